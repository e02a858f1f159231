"""Section 12, issue 25: a trace by document and by person over a ledger of 1,000,000 file rows, and
what the evidence renders cost.

The ledger is generated in MariaDB (database ``pdfbatch_bench_trace``, kept between runs and rebuilt
when its size differs): 10,000 batches of 100 entries over 10 tenants and the admin, each content in
about 1.4 entries, each user linked or found already linked in about 3, and one entry in 50 ambiguous,
naming two users (keyed hashes in pdfbatch_named, as process_pdf writes them). The figure is the
function's time: ``views.trace_document`` / ``views.trace_user`` over the real MysqlLedger (its SQL
round trips included, the Lambda and API Gateway overhead not), p50 and p99 of random lookups, half by
a tenant key and half by the admin's. Target: <= 50 ms.

Evidence: ``evidence.render`` CPU time per résumé of the extraction corpus (each linked on page 1), and
the PNG bytes, as storage per 1,000 PDFs were every one linked.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.report import Row, Target
from pdfbatch.services.report import percentile

DATABASE = "pdfbatch_bench_trace"
KEY = "bench-named-users-key-0123456789"
PER_BATCH = 100
TENANTS = 10


def _ledger(rows: int, log: Callable[[str], None]) -> Any:
    import pymysql

    from pdfbatch.adapters.ledger import MysqlLedger
    from pdfbatch.adapters.mysql import MysqlClient
    from pdfbatch.config import UsersTable
    from pdfbatch.named import ring

    admin = pymysql.connect(host="127.0.0.1", user="root", autocommit=True)
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{DATABASE}`")
    admin.close()
    client = MysqlClient.from_url(f"mysql://root@127.0.0.1:3306/{DATABASE}", read_timeout=600)
    client.ensure_schema()
    with client.cursor() as cur:
        cur.execute("SELECT COUNT(*) AS n FROM pdfbatch_files")
        have = int(cur.fetchone()["n"])
    if have != rows:
        log(f"   generating a ledger of {rows:,} file rows (kept in {DATABASE})")
        t = time.monotonic()
        batches = rows // PER_BATCH
        keys = ring(KEY)
        with client.cursor() as cur:
            for table in ("pdfbatch_files", "pdfbatch_batches", "pdfbatch_named"):
                cur.execute(f"TRUNCATE TABLE {table}")
            cur.execute(
                "INSERT INTO pdfbatch_batches (batch_id, bucket, object_key, key_hash, source, status, "
                "total_files, created_at, updated_at, tenant, counts) "
                "SELECT LOWER(LPAD(HEX(seq), 32, '0')), 'b', CONCAT('uploads/', seq, '.zip'), "
                "UNHEX(SHA2(CONCAT('uploads/', seq, '.zip'), 256)), 'api', 'COMPLETED', %s, "
                "1700000000 + seq * 60, 1700000000 + seq * 60, "
                f"IF(seq %% {TENANTS + 1} = 0, NULL, CONCAT('tenant-', seq %% {TENANTS + 1})), '{{}}' "
                f"FROM seq_1_to_{batches}",
                (PER_BATCH,),
            )
            cur.execute(
                "INSERT INTO pdfbatch_files (batch_id, entry_index, entry_name, kind, size, sha256, outcome, "
                "reason, user_id, attempts, created_at, finished_at, decided_page, source, users_named) "
                f"SELECT LOWER(LPAD(HEX(seq DIV {PER_BATCH} + 1), 32, '0')), seq %% {PER_BATCH}, "
                "CONCAT('cv/', seq, '.pdf'), 'pdf', 50000, SHA2(CONCAT('doc', seq %% %s), 256), "
                "IF(seq %% 50 = 0, 'skipped_no_match', "
                "IF(seq %% 7 = 0, 'skipped_already_exists', 'linked')), "
                "IF(seq %% 50 = 0, 'ambiguous', IF(seq %% 7 = 0, 'already_linked', 'matched')), "
                "IF(seq %% 50 = 0, NULL, CAST(seq %% %s AS CHAR)), 1, 1700000000 + seq, 1700000001 + seq, 1, "
                "'text', IF(seq %% 50 = 0, 2, NULL) "
                f"FROM seq_0_to_{rows - 1}",
                (int(rows * 0.7), rows // 3),
            )
            named = [
                (keys.write_hash(str(user)), f"{seq // PER_BATCH + 1:032x}", seq % PER_BATCH)
                for seq in range(0, rows, 50)
                for user in (seq % (rows // 3), (seq + 1) % (rows // 3))
            ]
            for start in range(0, len(named), 5000):
                cur.executemany(
                    "INSERT IGNORE INTO pdfbatch_named (named_hash, batch_id, entry_index) "
                    "VALUES (%s, %s, %s)",
                    named[start : start + 5000],
                )
            cur.execute("ANALYZE TABLE pdfbatch_files, pdfbatch_batches, pdfbatch_named")
            cur.fetchall()
        log(f"   generated in {time.monotonic() - t:.0f} s")
    return MysqlLedger(client, UsersTable())


def run(rows: int, queries: int, log: Callable[[str], None]) -> list[Row]:
    """Section 12's rows."""
    from pdfbatch.config import Settings
    from pdfbatch.errors import NotFound
    from pdfbatch.services import views
    from pdfbatch.services.deps import Deps
    from pdfbatch.tenants import ADMIN, Caller

    ledger = _ledger(rows, log)
    deps = Deps(
        settings=Settings(bucket="b", named_keys=KEY),
        store=None,
        ledger=ledger,
        users=ledger.user_rows,
        progress=None,
    )  # type: ignore[arg-type]
    rng = random.Random(25)
    callers = [ADMIN, *(Caller(f"tenant-{n}") for n in range(1, TENANTS + 1))]
    import hashlib

    def timed(trace: Callable[..., Any], what: Callable[[], str]) -> tuple[list[float], int]:
        samples, found = [], 0
        for _ in range(queries):
            caller = ADMIN if rng.random() < 0.5 else rng.choice(callers[1:])
            value = what()
            t = time.perf_counter()
            try:
                found += len(trace(deps, value, caller=caller)["files"])
            except NotFound:
                # A tenant asking for another tenant's document is answered 404 by design: that answer
                # is timed like any other, and counts as nothing found.
                found += 0
            samples.append((time.perf_counter() - t) * 1000)
        return samples, found

    def doc() -> str:
        return hashlib.sha256(f"doc{rng.randrange(int(rows * 0.7))}".encode()).hexdigest()

    def user() -> str:
        return str(rng.randrange(rows // 3))

    timed(views.trace_document, doc)  # warm the buffer pool's pages of both indexes a little
    out = []
    for label, trace, what in (
        ("by document", views.trace_document, doc),
        ("by user", views.trace_user, user),
    ):
        samples, found = timed(trace, what)
        note = f"{queries} lookups, {found} entries found; p50 {statistics.median(samples):.1f} ms"
        out.append(
            Row(
                "12",
                f"trace {label} over {rows:,} file rows: function time p99",
                percentile(samples, 99),
                "ms",
                Target("<=", 50, " ms"),
                note,
            )
        )
    out += evidence_rows(log)
    return out


def evidence_rows(log: Callable[[str], None], n: int = 100) -> list[Row]:
    """CPU per render and bytes per PNG over the extraction corpus's résumés (linked on page 1)."""
    from tools import samples

    from pdfbatch import evidence

    docs = [(samples.resume(*samples.person(i)), samples.person(i)[1]) for i in range(n)]
    cpu, sizes = [], []
    for data, email in docs:
        t = time.process_time()
        png = evidence.render(data, 1, [email])
        cpu.append((time.process_time() - t) * 1000)
        assert png is not None
        sizes.append(len(png))
    log(f"   evidence: {statistics.median(cpu):.2f} ms CPU p50, {statistics.mean(sizes):.0f} B mean")
    return [
        Row("12", "evidence render: CPU per file (p50)", statistics.median(cpu), "ms", None, f"{n} résumés"),
        Row(
            "12",
            "evidence storage per 1,000 PDFs (all linked)",
            statistics.mean(sizes) * 1000 / 1e6,
            "MB",
            None,
            f"mean PNG {statistics.mean(sizes):.0f} B, 144 dpi greyscale",
        ),
    ]
