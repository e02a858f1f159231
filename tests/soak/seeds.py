"""The short soak's seeds: every seed that ever found a hole, and a few that ran clean.

A seed fixes a run's corpus and fault plan (soak.chaos), so a seed that once broke an invariant replays
the same attack on today's code. CI (tests/e2e/test_soak_short.py) replays CI_SEEDS, at most three: each
short soak takes 4-5 minutes here. The rest replay with `make soak PROFILE=short SEED=<seed>`, and fresh
seeds (exploring) are `make soak` without SEED. docs/TESTING.md says what to do with a seed that fails.
"""

from __future__ import annotations

# seed -> what it found (72221 and 694881 in CI's short soak, 256111 and 965370 in loops of short soaks on
# fresh seeds; the records do not say 303's profile).
FOUND = {
    303: "an entry refused at unzip and recorded but never counted (Redis failed) left its batch PROCESSING "
    "(fixed: unzip's re-run re-syncs the live counters with the ledger first)",
    72221: "POST /batches answered 503 after writing its batch row (Redis refused): a PENDING batch whose id "
    "nobody got (fixed: the batch row is the last write; tests/unit/test_create_batch_faults.py)",
    256111: "MySQL cut between an announcer's claim and its reply: a COMPLETED batch never announced "
    "(fixed: settle, services/settle.py; tests/unit/test_settle.py)",
    694881: "a drop's unzip failed under refuse_mysql and S3's retry came after the soak stopped waiting "
    "(a harness race: the soak waits until every upload has its batch)",
    965370: "MySQL refused at an OCR cold start: the message failed before any log or backoff and waited the "
    "OCR queue's 720 s (fixed: the schema is checked at first use; integration/test_ledger_schema.py)",
}
# Ran clean on the short profile (issue 13's and 14's loops of fresh seeds).
CLEAN = (105920, 248844)
# The product holes, found on the short profile: what CI replays on every run.
CI_SEEDS = (72221, 256111, 965370)
