"""The chaos soak's short variant (tests/soak, `make soak` for the full one) on the suite's LocalStack.

About 200 PDFs and a few of each fault: worker kills, MySQL and Redis connections cut and refused through
the proxy, duplicate notifications and messages, a ZIP dropped twice, a presigned POST used twice, a `.Zip`
and a non-ZIP dropped, a tenant's flood of empty batches past its limit (429 with Retry-After), and, once
the connection faults are over, two trickling and one silent callback receiver beside an honest tenant's,
whose callbacks must arrive within soak.run.HONEST_CALLBACK_SECONDS (about 10 s more per seed). Its own
stack (`pdfbatch-e2e-chaos`), database and proxy. It replays soak.seeds.CI_SEEDS (seeds that found holes),
one run each, unless PDFBATCH_SOAK_SEED names the one seed to run; a failure prints the replay command.
Fresh seeds are `make soak`'s; docs/TESTING.md says how a failing seed becomes a generator test.
"""

from __future__ import annotations

import os

import pytest

from soak.run import Soak, SoakConfig
from soak.seeds import CI_SEEDS

pytestmark = pytest.mark.e2e

_SUFFIX = os.environ.get("PDFBATCH_E2E_SUFFIX", "")
_SEEDS = [int(os.environ["PDFBATCH_SOAK_SEED"])] if os.environ.get("PDFBATCH_SOAK_SEED") else list(CI_SEEDS)


@pytest.mark.parametrize("seed", _SEEDS)
def test_a_short_chaos_soak_ends_every_batch_with_every_invariant_held(localstack: str, seed: int) -> None:
    # GIVEN a stack whose functions reach MySQL and Redis through the soak's proxy, a seed that found a hole
    config = SoakConfig.short(
        seed,
        stack="pdfbatch-e2e-chaos" + (f"-{_SUFFIX}" if _SUFFIX else ""),
        database="pdfbatch_e2e_chaos" + (f"_{_SUFFIX}" if _SUFFIX else ""),
        redis_db=int(os.environ.get("PDFBATCH_E2E_REDIS_DB", "14")),
    )
    # WHEN ~200 PDFs are uploaded while faults are injected, and every batch is waited for
    result = Soak(config, localstack, log=lambda line: print(line, flush=True)).run()
    # THEN every invariant held (the summary names the seed, the faults and what broke)
    assert result.ok, "\n".join(result.summary())
