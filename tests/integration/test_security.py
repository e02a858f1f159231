"""Security over the real MariaDB and Redis: nothing personal in the logs of a full run, and SQL that is
parameterised everywhere (quotes, backslashes, LIKE wildcards, unicode and emoji round-trip exactly)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from fixtures import pdfs, zips
from fixtures.apigw import Context, api_event, load_handler
from fixtures.events import s3_event, sqs_event
from fixtures.pipeline import drain, ledger_rows, pdf_urls, receive_all, upload
from pdfbatch import bootstrap
from pdfbatch.errors import DependencyUnavailable
from pdfbatch.logs import logger
from pdfbatch.services import staging, views
from pdfbatch.tenants import ADMIN
from plugins.services import add_users

pytestmark = pytest.mark.integration

# Everything personal the corpus holds: none of it may reach a log line.
USER_EMAIL = "canary.user+cv@example.com"
STRANGER = "canary.stranger@nowhere.example"
LOCKED_EMAIL = "canary.locked@example.com"
PHRASE = "zebra-quartz-41 confidential"
NAMES = ["Jane Doe - SSN 078-05-1120.pdf", "privé/Éloïse Canary résumé.pdf", "canary-stranger.pdf"]
ZIP_KEY = "uploads/Canary Customer drop.zip"
DB_PASSWORD = "db-password-canary"
PDF_PASSWORDS = ("user-secret", "owner-secret")  # the passwords fixtures/pdfs.py encrypts with


@pytest.fixture()
def wired(deps: Any) -> Iterator[Any]:
    deps.settings = replace(deps.settings, mysql_url=f"mysql://app:{DB_PASSWORD}@db.internal:3306/prod")
    bootstrap.override(deps)
    yield deps
    bootstrap.override(None)


def test_logs_of_a_full_run_hold_no_email_text_password_or_entry_name(
    wired: Any, db: Any, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    deps = wired
    add_users(db, USER_EMAIL, LOCKED_EMAIL)
    # GIVEN a ZIP whose names, texts and addresses are all personal, with every kind of outcome
    data = zips.make_zip(
        [
            (NAMES[0], pdfs.resume_pdf("Jane Doe", USER_EMAIL, PHRASE)),
            (NAMES[1], pdfs.text_pdf([[PHRASE, f"Contact: {STRANGER}"]])),
            (NAMES[2], pdfs.truncated_pdf(USER_EMAIL)),
            ("Canary/" + "locked.pdf", pdfs.password_pdf(f"Contact: {LOCKED_EMAIL} {PHRASE}")),
            ("Canary/notes.txt", PHRASE.encode()),
        ]
    )
    deps.store.put_bytes(deps.settings.bucket, ZIP_KEY, data, "application/zip")
    unzip, process, status = load_handler("unzip"), load_handler("process_pdf"), load_handler("status")
    caplog.set_level(logging.DEBUG, logger="pdfbatch")  # ours; botocore debug (off in Lambda) names keys
    logger.setLevel(logging.DEBUG)
    try:
        # WHEN the handlers run it: unzip, then every message, one of them failing once on S3
        out = unzip.handler(s3_event(deps.settings.bucket, ZIP_KEY, len(data)), Context())
        batch_id = out["batches"][0]["batchId"]
        bodies = receive_all(deps)
        real_copy = deps.store.copy
        calls: list[Any] = []

        def flaky_copy(*args: Any) -> None:
            calls.append(args)
            if len(calls) == 1:
                raise DependencyUnavailable("s3", f"copy of {args} refused")
            real_copy(*args)

        deps.store.copy = flaky_copy
        process.handler(sqs_event(bodies), Context())
        process.handler(sqs_event(bodies, receive_count=2), Context())
        files = status.handler(api_event("GET", f"/batches/{batch_id}/files"), Context())
        polled = status.handler(api_event("GET", f"/batches/{batch_id}"), Context())
    finally:
        logger.setLevel(logging.INFO)
        deps.store.copy = real_copy

    # THEN the run did what it should (so the logs cover every path)
    assert json.loads(polled["body"])["status"] == "COMPLETED"
    outcomes = {i["name"]: i["outcome"] for i in json.loads(files["body"])["items"]}
    assert outcomes[NAMES[0]] == "linked" and outcomes[NAMES[2]] == "failed"
    assert len(calls) == 2
    # AND no log line or byte on stdout/stderr holds an address, the text, a password or a name
    out_text, err_text = capfd.readouterr()
    logs = out_text + err_text + caplog.text + "".join(str(r.__dict__) for r in caplog.records)
    assert "file processed" in logs  # the logs were captured
    secrets = [USER_EMAIL, STRANGER, LOCKED_EMAIL, "canary.user", "zebra-quartz", DB_PASSWORD, *PDF_PASSWORDS]
    secrets += [*NAMES, "Jane Doe", "Éloïse", "078-05-1120", "Canary Customer", "Canary/"]
    leaked = [s for s in secrets if s.lower() in logs.lower()]
    assert leaked == []


# --- SQL -----------------------------------------------------------------------------------------

ODD_NAMES = [
    'O\'Brien "final" CV.pdf',
    "back\\slash\\path.pdf",
    "100% sure_of_it.pdf",
    "'; DROP TABLE users; --.pdf",
    "emoji 😀🎉 ünïcødé 日本語.pdf",
    "%_%.pdf",
]
ODD_EMAILS = ["o'brien+cv@example.com", "josé.garcía@exämple.de", "d'arcy-o'neil@example.ie"]


def test_odd_entry_names_and_emails_round_trip_and_link_exactly(deps: Any, db: Any) -> None:
    # GIVEN users whose addresses hold quotes and unicode, and a ZIP of entries with hostile names
    ids = add_users(db, *ODD_EMAILS)
    entries = [(name, pdfs.text_pdf(["no address here"])) for name in ODD_NAMES]
    entries += [(f"{email}.pdf", pdfs.text_pdf([f"Contact: {email}"])) for email in ODD_EMAILS]
    report = staging.stage_zip(deps, upload(deps, zips.make_zip(entries)))
    drain(deps)
    # THEN every name is stored and listed exactly as written
    assert [r["entry_name"] for r in ledger_rows(db, report.batch_id)] == [n for n, _ in entries]
    listed = [i["name"] for i in views.list_files(deps, report.batch_id, caller=ADMIN)["items"]]
    assert listed == [n for n, _ in entries]
    # AND each odd address linked its own user, and the users table is intact
    urls = pdf_urls(db)
    assert set(urls) == set(ODD_EMAILS)
    assert all(urls[e] is not None and f"/pdfs/{ids[e]}/" in urls[e] for e in ODD_EMAILS)


@pytest.mark.parametrize(
    "probe",
    [
        "%",
        "%@example.com",
        "_'brien+cv@example.com",
        "o'brien+cv@example.com' OR '1'='1",
        "o\\'brien+cv@example.com",
    ],
)
def test_user_lookup_matches_only_the_exact_address(deps: Any, db: Any, probe: str) -> None:
    # GIVEN users with quotes in their addresses
    add_users(db, *ODD_EMAILS)
    # WHEN looked up with LIKE wildcards, an injection attempt or an escaped quote
    # THEN nothing matches: the value is a parameter compared with =
    assert deps.users.find_by_emails([probe]) == []
    assert {u.email for u in deps.users.find_by_emails(ODD_EMAILS)} == set(ODD_EMAILS)
