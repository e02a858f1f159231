"""The operator's commands on LocalStack: report, retry, and a poison message through the DLQ and back.

Everything goes through `pdfbatch ...` as an operator types it; the stores are then read directly
(MySQL ledger and users, Redis counters) to check that counters == ledger and nothing is linked twice.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
import redis
from tools import samples

from fixtures.stack import MYSQL_URL, REDIS_URL, ROOT, STACK, local_client, run_cli
from pdfbatch.adapters.redis import progress_key

pytestmark = pytest.mark.e2e

DLQ_STACK = f"{STACK}-dlq"


def cli_json(env: dict[str, str], *args: str, code: int = 0) -> Any:
    done = run_cli(env, *args, "--json")
    assert done.returncode == code, f"{args}: {done.returncode}\n{done.stderr[-3000:]}"
    return json.loads(done.stdout)


def ledger(conn: Any, batch_id: str) -> dict[str, dict[str, Any]]:
    """pdfbatch_files rows by entry name."""
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(
            "SELECT entry_index, entry_name, kind, outcome, reason, user_id, attempts, timings "
            "FROM pdfbatch_files WHERE batch_id = %s",
            (batch_id,),
        )
        return {r["entry_name"]: r for r in cur.fetchall()}


def pdf_url(conn: Any, email: str) -> str | None:
    with conn.cursor() as cur:
        cur.execute("SELECT pdf_url FROM users WHERE email = %s", (email,))
        row = cur.fetchone()
    return row[0] if row else None


def assert_counters_match_ledger(conn: Any, batch_id: str) -> dict[str, str]:
    """The Redis counters of the batch equal the ledger's outcomes; return the raw hash."""
    rows = ledger(conn, batch_id).values()
    counted = Counter(r["outcome"] for r in rows if r["kind"] == "pdf" and r["outcome"])
    reasons = Counter(r["reason"] for r in rows if r["kind"] == "pdf" and r["outcome"])
    raw = redis.Redis.from_url(REDIS_URL, decode_responses=True).hgetall(progress_key(batch_id))
    for outcome in ("linked", "skipped_no_match", "skipped_already_exists", "failed"):
        assert int(raw.get(outcome, 0)) == counted.get(outcome, 0), (outcome, raw)
    for reason in {*reasons, *(k.split(":", 1)[1] for k in raw if k.startswith("reason:"))}:
        assert int(raw.get(f"reason:{reason}", 0)) == reasons.get(reason, 0), (reason, raw)
    assert int(raw["processed"]) == sum(counted.values())
    return raw


def function_log(endpoint: str, stack_name: str, function: str) -> list[dict[str, Any]]:
    """Every JSON line the local stack collected from a function (its CloudWatch log group)."""
    logs = local_client("logs", endpoint)
    kwargs: dict[str, Any] = {"logGroupName": f"/aws/lambda/{stack_name}-{function}"}
    lines: list[dict[str, Any]] = []
    while True:
        page = logs.filter_log_events(**kwargs)
        for event in page["events"]:
            lines.extend(json.loads(x) for x in event["message"].splitlines() if x.startswith("{"))
        if not page.get("nextToken"):
            return lines
        kwargs["nextToken"] = page["nextToken"]


def seed(conn: Any, *emails: str) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO users (email) VALUES (%s) ON DUPLICATE KEY UPDATE pdf_url = NULL",
            [(e,) for e in emails],
        )


def test_report_then_retry_after_fixing_a_user_counts_correctly_and_never_links_twice(
    stack: dict[str, Any], tmp_path: Path
) -> None:
    env, conn = stack["env"], stack["db"]
    run = uuid.uuid4().hex[:8]
    known, fixed = f"known.{run}@example.com", f"fixed.{run}@example.com"
    # GIVEN a batch with a linked résumé, one whose user does not exist yet, and a broken PDF
    seed(conn, known)
    corpus = samples.Corpus()
    corpus.add("known.pdf", samples.resume("Known Person", known))
    corpus.add("fixed.pdf", samples.resume("Fixed Person", fixed))
    corpus.add("broken.pdf", b"%PDF-1.4\nnot really a PDF\n")
    corpus.add("notes.txt", b"ignored")
    path = tmp_path / "retry.zip"
    corpus.write_zip(path)
    status = cli_json(env, "upload", str(path), "--wait")
    batch_id = status["batchId"]
    assert (status["status"], status["linked"], status["skipped_no_match"], status["failed"]) == (
        "COMPLETED",
        1,
        1,
        1,
    )

    # and process_pdf's log on the local stack holds its EMF metrics, and JSON lines keyed by batch and
    # file that carry no address, name or entry name
    deadline = time.monotonic() + 30
    while not [
        x for x in function_log(stack["endpoint"], STACK, "process-pdf") if x.get("batch_id") == batch_id
    ]:
        assert time.monotonic() < deadline, "no process_pdf log line for the batch"
        time.sleep(1)
    lines = function_log(stack["endpoint"], STACK, "process-pdf")
    ours = [x for x in lines if x.get("batch_id") == batch_id]
    assert all(isinstance(x.get("file_index"), int) for x in ours)
    text = json.dumps(lines)
    assert known not in text and fixed not in text and "Known Person" not in text and "fixed.pdf" not in text
    emf = [x["_aws"]["CloudWatchMetrics"][0] for x in lines if "_aws" in x]
    assert {d["Namespace"] for d in emf} == {"pdfbatch"}
    names = {m["Name"] for d in emf for m in d["Metrics"]}
    assert {"DownloadDuration", "ExtractDuration", "CopyDuration", "UpdateDuration", "QueueAge"} <= names
    assert {"FilesLinked", "FilesSkippedNoMatch", "FilesFailed"} <= names

    # WHEN the operator asks for the report
    report = cli_json(env, "report", batch_id)
    # THEN it holds the outcomes, the reasons and every stage's percentiles, from the ledger
    assert report["outcomes"] == {
        "linked": 1,
        "skipped_no_match": 1,
        "skipped_already_exists": 0,
        "failed": 1,
    }
    assert {(r["outcome"], r["reason"]) for r in report["reasons"]} == {
        ("linked", "matched"),
        ("skipped_no_match", "no_user"),
        ("failed", "malformed_pdf"),
    }
    assert (report["pdfs"], report["ignored"], report["pending"]) == (3, 1, 0)
    stages = report["stagesMs"]
    assert {"download", "validate", "extract", "match", "copy", "update", "total"} <= set(stages)
    assert stages["copy"]["files"] == 1 and stages["download"]["files"] == 3
    for s in stages.values():
        assert s["p50"] <= s["p95"] <= s["p99"] <= s["max"]
    table = run_cli(env, "report", batch_id)
    assert table.returncode == 0 and "p95" in table.stderr and "no_user" in table.stderr

    # WHEN the missing user is added and the batch retried
    seed(conn, fixed)
    out = cli_json(env, "retry", batch_id, "--wait")
    # THEN the two files not linked ran again; the résumé is now linked; counters == ledger
    assert (out["reopened"], out["resent"], out["kept"]) == (2, 2, {"linked/matched": 1})
    final = out["status"]
    assert (final["status"], final["linked"], final["skipped_no_match"], final["failed"]) == (
        "COMPLETED",
        2,
        0,
        1,
    )
    rows = ledger(conn, batch_id)
    assert (rows["fixed.pdf"]["outcome"], rows["fixed.pdf"]["attempts"]) == ("linked", 2)
    assert rows["known.pdf"]["attempts"] == 1
    assert_counters_match_ledger(conn, batch_id)
    urls = (pdf_url(conn, known), pdf_url(conn, fixed))
    assert all(urls)

    # WHEN it is retried again, failed files only
    out = cli_json(env, "retry", batch_id, "--failed-only", "--wait")
    # THEN only the broken PDF ran; no user was linked again or differently
    assert (out["reopened"], out["status"]["status"], out["status"]["linked"]) == (1, "COMPLETED", 2)
    assert (pdf_url(conn, known), pdf_url(conn, fixed)) == urls
    rows = ledger(conn, batch_id)
    assert (rows["broken.pdf"]["attempts"], rows["fixed.pdf"]["attempts"]) == (3, 2)
    assert_counters_match_ledger(conn, batch_id)
    with conn.cursor() as cur:
        cur.execute("SELECT status, counts FROM pdfbatch_batches WHERE batch_id = %s", (batch_id,))
        status_row, counts = cur.fetchone()
    assert status_row == "COMPLETED" and json.loads(counts)["linked"] == 2


def test_unknown_batches_exit_2(stack: dict[str, Any]) -> None:
    for command in ("retry", "report"):
        done = run_cli(stack["env"], command, "0" * 32)
        assert done.returncode == 2, done.stderr
        assert "no such batch" in done.stderr and "Traceback" not in done.stderr


# ------------------------------------------------------------------------------------------------
# A poison message: fails on every delivery, lands in the DLQ, is redriven once the cause is fixed
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dlq_stack(stack: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A second stack on the e2e database whose failed messages come back at once (1 s backoff)."""
    from tools.deploy import DeployParams, deploy

    params = DeployParams(
        mysql_url=MYSQL_URL,
        redis_url=REDIS_URL,
        max_receive_count=5,
        extra={"RetryBaseSeconds": "1", "RetryMaxSeconds": "1"},
    )
    outputs = deploy(
        params, endpoint_url=stack["endpoint"], stack_name=DLQ_STACK, root=ROOT, region="us-east-1"
    )
    env = {**stack["env"], "PDFBATCH_STACK_NAME": DLQ_STACK}
    yield {"env": env, "db": stack["db"], "outputs": outputs}


def test_poison_message_reaches_the_dlq_its_batch_completes_and_redrive_links_it(
    dlq_stack: dict[str, Any], tmp_path: Path
) -> None:
    env, conn = dlq_stack["env"], dlq_stack["db"]
    run = uuid.uuid4().hex[:8]
    good, poison = f"good.{run}@example.com", f"poison.{run}@example.com"
    seed(conn, good, poison)
    trigger = f"pdfbatch_poison_{run}"
    # GIVEN linking the poison user fails every time (the database refuses the update)
    with conn.cursor() as cur:
        cur.execute(
            f"CREATE TRIGGER `{trigger}` BEFORE UPDATE ON users FOR EACH ROW BEGIN "
            f"IF NEW.email = %s THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'poisoned'; END IF; END",
            (poison,),
        )
    try:
        corpus = samples.Corpus()
        corpus.add("good.pdf", samples.resume("Good Person", good))
        corpus.add("poison.pdf", samples.resume("Poison Person", poison))
        path = tmp_path / "poison.zip"
        corpus.write_zip(path)
        # WHEN the batch is uploaded
        status = cli_json(env, "upload", str(path), "--wait", "--timeout", "180")
        batch_id = status["batchId"]
        # THEN it completes, the poison file failed/gave_up after every delivery failed
        assert (status["status"], status["linked"], status["failed"]) == ("COMPLETED", 1, 1)
        rows = ledger(conn, batch_id)
        assert (rows["poison.pdf"]["outcome"], rows["poison.pdf"]["reason"]) == ("failed", "gave_up")
        assert rows["poison.pdf"]["attempts"] == 5
        assert_counters_match_ledger(conn, batch_id)
        # and its message reaches the DLQ, where `pdfbatch dlq` shows it (and leaves it)
        deadline = time.monotonic() + 90
        mine: list[dict[str, Any]] = []
        while not mine:
            assert time.monotonic() < deadline, "the poison message never reached the DLQ"
            time.sleep(1)
            mine = [m for m in cli_json(env, "dlq")["messages"] if m["batchId"] == batch_id]
        assert len(mine) == 1
        assert (mine[0]["name"], mine[0]["outcome"], mine[0]["reason"]) == ("poison.pdf", "failed", "gave_up")
        assert [m["batchId"] for m in cli_json(env, "dlq")["messages"]].count(batch_id) == 1
    finally:
        # WHEN the cause is fixed
        with conn.cursor() as cur:
            cur.execute(f"DROP TRIGGER IF EXISTS `{trigger}`")
    # and the DLQ redriven
    out = cli_json(env, "dlq", "--redrive", "--wait")
    # THEN the file is reopened, processed again and linked; the batch completes counted once
    assert out["reopened"] >= 1 and batch_id in out["batches"]
    final = next(s for s in out["statuses"] if s["batchId"] == batch_id)
    assert (final["status"], final["linked"], final["failed"], final["processed"]) == ("COMPLETED", 2, 0, 2)
    rows = ledger(conn, batch_id)
    assert (rows["poison.pdf"]["outcome"], rows["poison.pdf"]["reason"]) == ("linked", "matched")
    assert rows["poison.pdf"]["attempts"] == 6
    assert pdf_url(conn, poison) and pdf_url(conn, good)
    assert_counters_match_ledger(conn, batch_id)
    assert [m for m in cli_json(env, "dlq")["messages"] if m["batchId"] == batch_id] == []
