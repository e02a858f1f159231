"""Any users table (issue 16): string and UUID ids, duplicate emails, narrow character sets, a table that
is not as configured; and who a PDF is linked to (unique/first, ambiguous), over the in-memory fakes.

The fakes are held to MySQL by tests/integration/test_fakes_contract.py; the same tables run over the
real MariaDB in tests/integration/test_users_table.py.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import uuid
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fakes import FakeLedger
from fixtures import pdfs
from fixtures.apigw import Context, load_handler
from fixtures.events import sqs_event
from fixtures.pipeline import BUCKET, drain, files_by_name, receive_all, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch.adapters.users_table import PERMANENT_ERRNOS, can_hold, configuration_problem
from pdfbatch.cli.batches import why
from pdfbatch.config import Settings, UsersTable
from pdfbatch.errors import ConfigError, UsersTableError
from pdfbatch.logs import logger
from pdfbatch.model import (
    REASON_OUTCOME,
    REASON_TEXT,
    FileResult,
    Reason,
    final_key,
    key_segment,
    user_id_of_segment,
)
from pdfbatch.ports import UserRow
from pdfbatch.services import orphans, processing, staging, views
from pdfbatch.services.deps import Deps
from pdfbatch.tenants import ADMIN

SHA = "ab" * 32
text_pdf = functools.cache(lambda *pages: pdfs.text_pdf(list(pages)))


def objects(deps: Deps, prefix: str) -> list[str]:
    listed = deps.store.client.list_objects_v2(Bucket=BUCKET, Prefix=prefix)  # type: ignore[attr-defined]
    return [o["Key"] for o in listed.get("Contents", [])]


def run(deps: Deps, entries: list[tuple[str, bytes]]) -> str:
    """Stage a ZIP of ``entries``, process every message; return the batch id."""
    key = f"uploads/{uuid.uuid4().hex}.zip"  # a new upload each time, not a duplicate notification
    report = staging.stage_zip(deps, upload(deps, make_zip(entries), key=key))
    drain(deps)
    return report.batch_id


# --- final keys -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "user_id", ["42", "0", "9223372036854775807", "550e8400-e29b-41d4-a716-446655440000"]
)
def test_integer_and_uuid_ids_keep_the_key_every_earlier_release_wrote(user_id: str) -> None:
    assert final_key(user_id, SHA) == f"pdfs/{user_id}/{SHA}.pdf"


@pytest.mark.parametrize(
    ("user_id", "segment"),
    [
        ("john/doe", "!john_2fdoe"),
        ("Ann Lee", "!Ann_20Lee"),
        ("josé", "!jos_c3_a9"),
        ("..", "!.."),
        ("", "!"),
        ("a_b!", "!a_5fb_21"),
        ("-42", "-42"),
    ],
)
def test_an_odd_id_is_written_in_safe_characters(user_id: str, segment: str) -> None:
    assert key_segment(user_id) == segment


SAFE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_!")


@given(st.lists(st.text(max_size=300), min_size=2, max_size=6, unique=True))
def test_any_ids_become_distinct_safe_key_segments_of_bounded_length(ids: list[str]) -> None:
    segments = [key_segment(i) for i in ids]
    assert len(set(segments)) == len(ids)  # one-to-one
    for segment in segments:
        assert set(segment) <= SAFE and segment not in (".", "..") and 1 <= len(segment) <= 200
        assert len(final_key(segment, SHA).encode()) < 1024


@given(st.text(max_size=300))
def test_gc_reads_back_the_user_of_every_segment_but_a_hashed_one(user_id: str) -> None:
    # pdfbatch gc asks whether the user a final key names points at it: it must read the id back.
    segment = key_segment(user_id)
    assert user_id_of_segment(segment) == (None if segment.startswith("!!") else user_id)


@pytest.mark.parametrize("segment", ["!_zz", "!_2", "!a_2fb/c", "a/b", "!!" + "0" * 64, "!_ff"])
def test_segments_no_id_maps_to_name_nobody(segment: str) -> None:
    assert user_id_of_segment(segment) is None


# --- which addresses a column can hold ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("charset", "address", "held"),
    [
        ("latin1", "josé@example.com", True),
        ("latin1", "€uro@example.com", True),  # MySQL's latin1 is cp1252
        ("latin1", "мария@example.com", False),
        ("latin1", "𝕞𝕒𝕣𝕚𝕒@example.com", False),
        ("utf8mb3", "мария@example.com", True),
        ("utf8", "мария@example.com", True),
        ("utf8mb3", "𝕞𝕒𝕣𝕚𝕒@example.com", False),
        ("utf8mb4", "𝕞𝕒𝕣𝕚𝕒@example.com", True),
        ("utf8mb4", "bad\udc80@example.com", False),  # a lone surrogate cannot even be sent
        ("ascii", "josé@example.com", False),
        ("cp1251", "мария@example.com", True),
        ("cp1251", "josé@example.com", False),
        ("some_new_charset", "josé@example.com", False),  # unknown: ASCII only
        ("some_new_charset", "jose@example.com", True),
        (None, "𝕞𝕒𝕣𝕚𝕒@example.com", True),  # a binary string holds any bytes
    ],
)
def test_a_column_holds_what_its_character_set_can_encode(
    charset: str | None, address: str, held: bool
) -> None:
    assert can_hold(charset, address) is held


# --- configuration --------------------------------------------------------------------------------------


def test_match_policy_is_unique_unless_first_and_anything_else_fails_at_cold_start() -> None:
    assert Settings.from_env({}).match_policy == "unique"
    assert Settings.from_env({"PDFBATCH_MATCH_POLICY": "first"}).match_policy == "first"
    with pytest.raises(ConfigError, match="PDFBATCH_MATCH_POLICY"):
        Settings.from_env({"PDFBATCH_MATCH_POLICY": "closest"})


@pytest.mark.parametrize("errno", sorted(PERMANENT_ERRNOS))
def test_a_permanent_server_error_names_the_configuration_never_a_value(errno: int) -> None:
    users = UsersTable(table="crm.customers", id_column="cid", email_column="mail", pdf_url_column="cv")
    error = configuration_problem(errno, users)
    assert isinstance(error, UsersTableError) and error.errno == errno
    assert "`crm.customers`" in error.problem and f"MySQL error {errno}" in error.problem
    assert "@" not in error.problem


@pytest.mark.parametrize("errno", [1205, 1213, 2003, 2013, 1040])  # lock wait, deadlock, gone, too many
def test_an_outage_is_not_a_configuration_problem(errno: int) -> None:
    assert configuration_problem(errno, UsersTable()) is None


# --- a table that is not as configured ----------------------------------------------------------------


def capture_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    handler = logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    monkeypatch.setattr(handler, "stream", sys.stdout)


def test_a_misconfigured_users_table_fails_each_file_once_without_retries(
    deps: Deps, ledger: FakeLedger, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a batch of two résumés, and a users table whose email column is not the configured one
    capture_logs(monkeypatch)
    email = "private.person@example.com"
    report = staging.stage_zip(
        deps, upload(deps, make_zip([("a.pdf", pdfs.resume_pdf("P", email)), ("b.pdf", text_pdf("x"))]))
    )
    bodies = sorted(receive_all(deps), key=lambda m: m["index"])
    ledger.users_table_error = configuration_problem(1054, deps.settings.users)
    monkeypatch.setattr(deps.queue, "change_visibility", lambda *a: pytest.fail("no backoff: not an outage"))
    capsys.readouterr()
    # WHEN process_pdf receives them for the first time
    result = load_handler("process_pdf").handler(sqs_event(bodies, receive_count=1), Context())
    # THEN neither message fails (nothing comes back), the résumé is failed/users_table_error at once,
    assert result == {"batchItemFailures": []}
    rows = files_by_name(deps, report.batch_id)
    assert (rows["a.pdf"].outcome, rows["a.pdf"].reason, rows["a.pdf"].attempts) == (
        "failed",
        "users_table_error",
        1,
    )
    # the PDF without an address needs no lookup, and the batch completes
    assert (rows["b.pdf"].outcome, rows["b.pdf"].reason) == ("skipped_no_match", "no_email")
    assert views.batch_status(deps, report.batch_id, caller=ADMIN)["status"] == "COMPLETED"
    # AND the log names the configuration problem, never the address
    out = capsys.readouterr().out
    lines = [json.loads(line) for line in out.splitlines() if line.strip() and "_aws" not in line]
    problems = [line for line in lines if line.get("problem")]
    assert problems and "PDFBATCH_USERS_EMAIL_COLUMN" in problems[0]["problem"]
    assert problems[0]["level"] == "ERROR" and problems[0]["mysql_errno"] == 1054
    assert email not in out


def test_a_link_the_table_refuses_fails_the_file_and_leaves_its_copy_to_gc(
    deps: Deps, ledger: FakeLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a user, and a pdf_url column too narrow for the URL (strict mode refuses the UPDATE)
    user = ledger.add_user("narrow@example.com")

    def refuse(*_: Any) -> bool:
        raise configuration_problem(1406, deps.settings.users)  # type: ignore[misc]

    monkeypatch.setattr(ledger, "link", refuse)
    # WHEN their résumé is processed
    batch = run(deps, [("cv.pdf", pdfs.resume_pdf("N", "narrow@example.com"))])
    # THEN it is failed/users_table_error and nobody is linked; the copy is not deleted on the hot path
    # (the same key may be what this user already points at) but is an orphan `pdfbatch gc` finds
    row = files_by_name(deps, batch)["cv.pdf"]
    assert (row.outcome, row.reason, row.user_id) == ("failed", "users_table_error", None)
    assert ledger.pdf_url_of(user) is None
    copies = objects(deps, "pdfs/")
    assert len(copies) == 1
    assert orphans.referenced_keys(deps, copies) == set()


# --- ids of any kind ------------------------------------------------------------------------------------


@pytest.mark.parametrize("user_id", ["john/doe ü", str(uuid.UUID(int=7)), "0042"])
def test_string_and_uuid_ids_are_linked_under_a_safe_key(
    deps: Deps, ledger: FakeLedger, user_id: str
) -> None:
    # GIVEN a user whose id is a string, a UUID or digits with leading zeros
    ledger.add_user("odd.id@example.com", user_id=user_id)
    # WHEN their résumé is processed
    batch = run(deps, [("cv.pdf", pdfs.resume_pdf("O", "odd.id@example.com"))])
    # THEN it is linked to that id, under the key its id encodes to, and the API shows the id as text
    row = files_by_name(deps, batch)["cv.pdf"]
    assert (row.outcome, row.user_id, row.final_key) == (
        "linked",
        user_id,
        final_key(user_id, row.sha256 or ""),
    )
    assert ledger.pdf_url_of(user_id) == f"s3://{BUCKET}/{row.final_key}"
    assert objects(deps, "pdfs/") == [row.final_key]
    item = views.list_files(deps, batch, caller=ADMIN)["items"][0]
    assert (item["userId"], item["usersNamed"]) == (user_id, None)


# --- who a PDF names ------------------------------------------------------------------------------------


def test_two_users_on_the_deciding_page_are_ambiguous_and_nobody_is_linked(
    deps: Deps, ledger: FakeLedger
) -> None:
    # GIVEN a cover letter naming the recruiter and the candidate, both users, on its first page
    recruiter = ledger.add_user("recruiter@agency.example")
    candidate = ledger.add_user("candidate@example.com")
    pdf = pdfs.text_pdf([["To: recruiter@agency.example", "From: candidate@example.com"]])
    # WHEN it is processed
    batch = run(deps, [("letter.pdf", pdf)])
    # THEN it is skipped as ambiguous, says two users were named, records no user, links nobody
    row = files_by_name(deps, batch)["letter.pdf"]
    assert (row.outcome, row.reason, row.users_named, row.user_id) == (
        "skipped_no_match",
        "ambiguous",
        2,
        None,
    )
    assert ledger.pdf_url_of(recruiter) is None and ledger.pdf_url_of(candidate) is None
    assert objects(deps, "pdfs/") == []
    item = views.list_files(deps, batch, caller=ADMIN)["items"][0]
    assert (item["reason"], item["usersNamed"], item["userId"]) == ("ambiguous", 2, None)
    assert why(item) == f"{REASON_TEXT[Reason.AMBIGUOUS]} (2 users named)"
    assert views.batch_status(deps, batch, caller=ADMIN)["reasons"] == {"ambiguous": 1}


def test_one_address_on_two_rows_is_ambiguous_under_either_policy(deps: Deps, ledger: FakeLedger) -> None:
    # GIVEN two rows sharing one address (no UNIQUE key), under the first-in-document-order policy too
    ledger.add_user("shared@example.com")
    ledger.add_user("Shared@Example.com")
    for policy in ("unique", "first"):
        deps.settings = replace(deps.settings, match_policy=policy)
        # WHEN a résumé showing it is processed
        batch = run(deps, [(f"{policy}.pdf", pdfs.resume_pdf("S", "shared@example.com", f"policy {policy}"))])
        # THEN nobody is picked arbitrarily
        row = files_by_name(deps, batch)[f"{policy}.pdf"]
        assert (row.reason, row.users_named, row.user_id) == ("ambiguous", 2, None), policy


def test_first_policy_links_the_first_user_in_document_order(deps: Deps, ledger: FakeLedger) -> None:
    # GIVEN PDFBATCH_MATCH_POLICY=first and a page naming two users
    deps.settings = replace(deps.settings, match_policy="first")
    first = ledger.add_user("first@example.com")
    ledger.add_user("second@example.com")
    # WHEN it is processed
    batch = run(deps, [("two.pdf", text_pdf("first@example.com and second@example.com"))])
    # THEN the first address in document order wins, as before issue 16
    row = files_by_name(deps, batch)["two.pdf"]
    assert (row.outcome, row.user_id) == ("linked", first)


def test_the_first_page_naming_a_user_decides(deps: Deps, ledger: FakeLedger) -> None:
    # GIVEN one user on page 1 and two others on page 2
    owner = ledger.add_user("owner@example.com")
    ledger.add_user("b@example.com")
    ledger.add_user("c@example.com")
    # WHEN it is processed
    batch = run(deps, [("p.pdf", text_pdf("owner@example.com", "b@example.com, c@example.com"))])
    # THEN page 1 decided: its one user is linked, page 2 is never read
    row = files_by_name(deps, batch)["p.pdf"]
    assert (row.outcome, row.user_id, row.timings.get("pages")) == ("linked", owner, 1.0)


def test_a_latin1_table_is_never_asked_for_what_it_cannot_hold_and_its_owner_is_linked(
    deps: Deps, ledger: FakeLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a latin1 users table, and a page with a Cyrillic and a 4-byte address before the owner's
    ledger.email_charset = "latin1"
    owner = ledger.add_user("josé.owner@example.com")
    asked: list[str] = []
    find = ledger.find_by_emails
    monkeypatch.setattr(ledger, "find_by_emails", lambda emails: asked.extend(emails) or find(emails))
    pdf = pdfs.unicode_text_pdf([["мария@example.com 𝕞𝕒𝕣𝕚𝕒@example.com", "Owner: josé.owner@example.com"]])
    # WHEN it is processed
    batch = run(deps, [("cv.pdf", pdf)])
    # THEN the owner is linked and nobody else
    row = files_by_name(deps, batch)["cv.pdf"]
    assert (row.outcome, row.user_id) == ("linked", owner)
    assert "мария@example.com" in asked  # the scan asked; the table's charset filter dropped it


# --- the seam for the scan that decides (issue 16's pdf half) --------------------------------------------


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (processing.Verdict(Reason.AMBIGUOUS, None, 3), ("skipped_no_match", "ambiguous", 3)),
        (processing.Verdict(Reason.NO_USER), ("skipped_no_match", "no_user", None)),
        (processing.Verdict(Reason.NO_EMAIL), ("skipped_no_match", "no_email", None)),
        (processing.Verdict(Reason.NO_TEXT_LAYER), ("skipped_no_match", "no_text_layer", None)),
    ],
)
def test_a_verdict_that_links_nobody_is_recorded_with_its_reason(
    verdict: processing.Verdict, expected: tuple[str, str, int | None]
) -> None:
    result = processing.unlinked_result(verdict, SHA, {"extract": 0.1})
    assert (result.outcome, result.reason, result.users_named) == expected
    assert result.user_id is None and result.sha256 == SHA and REASON_OUTCOME[result.reason] == result.outcome


class StubScan:
    """What the scan that decides reports (pdf.scan after issue 16's pdf half)."""

    extract_seconds = 0.01
    lookup_seconds = 0.0
    validate_seconds = 0.0
    visibility_seconds = 0.0
    pages_read = 1

    def __init__(self, reason: str, match: UserRow | None, users_named: int) -> None:
        self.reason, self.match, self.users_named = reason, match, users_named


@pytest.mark.parametrize("decided", ["ambiguous", "matched"])
def test_process_file_acts_on_the_scans_decision(
    deps: Deps, ledger: FakeLedger, monkeypatch: pytest.MonkeyPatch, decided: str
) -> None:
    # GIVEN a scan that decides by itself (stubbed), and the user it may name
    user_id = ledger.add_user("decided@example.com", user_id="u-1")
    user = UserRow(user_id, "decided@example.com", None)
    stub = StubScan(decided, user if decided == "matched" else None, 1 if decided == "matched" else 4)

    def scan(_: Deps, __: bytes) -> tuple[StubScan, processing.Verdict]:
        return stub, processing.Verdict(stub.reason, stub.match, stub.users_named)

    monkeypatch.setattr(processing, "_scan", scan)
    # WHEN a file is processed
    batch = run(deps, [("any.pdf", text_pdf("whatever"))])
    # THEN the decision is what is recorded
    row = files_by_name(deps, batch)["any.pdf"]
    if decided == "matched":
        assert (row.outcome, row.user_id, row.users_named) == ("linked", "u-1", None)
    else:
        assert (row.outcome, row.reason, row.user_id, row.users_named) == (
            "skipped_no_match",
            "ambiguous",
            None,
            4,
        )
        assert ledger.pdf_url_of("u-1") is None


def test_an_ambiguous_result_records_no_user_even_if_one_is_given() -> None:
    result = processing.unlinked_result(
        processing.Verdict(Reason.AMBIGUOUS, UserRow("1", "a@example.com", None), 2), SHA, {}
    )
    assert result == FileResult("skipped_no_match", "ambiguous", sha256=SHA, users_named=2)


# --- `stack up` checks the table before deploying ------------------------------------------------------


def test_stack_up_stops_before_deploying_with_one_sentence_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools import deploy, localstack, users_check

    from pdfbatch import cli
    from pdfbatch.cli import stack

    # GIVEN MySQL and Redis up, and a users table without its configured email column
    monkeypatch.setattr(stack, "check_mysql", lambda create=False: None)
    monkeypatch.setattr(stack, "check_redis", lambda: None)
    problem = "the users table `users` has no column `email` (PDFBATCH_USERS_EMAIL_COLUMN)"
    monkeypatch.setattr(users_check, "check_users_table", lambda *a: users_check.UsersCheck(error=problem))
    monkeypatch.setattr(localstack, "start", lambda *a: pytest.fail("nothing may start"))
    monkeypatch.setattr(deploy, "deploy", lambda *a, **k: pytest.fail("nothing may be deployed"))
    # WHEN `pdfbatch stack up` runs
    code = cli.main(["stack", "up"])
    # THEN it exits 2 with one sentence naming what is wrong
    err = capsys.readouterr().err.strip()
    assert code == cli.EXIT_USAGE == 2
    assert err == f"pdfbatch: the users table cannot be used as configured: {problem}."


def test_stack_up_refuses_a_match_policy_it_does_not_know(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pdfbatch import cli
    from pdfbatch.cli import stack

    monkeypatch.setattr(stack, "check_mysql", lambda create=False: None)
    monkeypatch.setattr(stack, "check_redis", lambda: None)
    monkeypatch.setenv("PDFBATCH_MATCH_POLICY", "best")
    assert cli.main(["stack", "up"]) == 2
    assert "PDFBATCH_MATCH_POLICY must be one of unique, first" in capsys.readouterr().err


def test_the_users_table_and_the_policy_stack_up_checked_are_the_ones_deployed() -> None:
    from tools.deploy import DeployParams

    env = {
        "PDFBATCH_USERS_TABLE": "crm.customers",
        "PDFBATCH_USERS_ID_COLUMN": "cid",
        "PDFBATCH_MATCH_POLICY": "first",
    }
    params = DeployParams.from_env(env, extra={"MaxPages": "10"}).template_parameters()
    assert (params["UsersTable"], params["UsersIdColumn"], params["MatchPolicy"]) == (
        "crm.customers",
        "cid",
        "first",
    )
    assert params["MaxPages"] == "10" and "UsersEmailColumn" not in params  # unset: the default
