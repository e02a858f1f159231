"""One soak run: its own stack behind the proxy, the uploads, the faults, the wait, the invariant check.

The stack (`pdfbatch-soak` by default) is deployed with PDFBATCH_MYSQL_URL / PDFBATCH_REDIS_URL naming the
proxy's ports, so every function's MySQL and Redis connection goes through it; the soak itself (seeding,
waiting, checking) talks to MariaDB and Redis directly. Its database is dropped and its bucket emptied at
the start of each run: everything in them afterwards is this run's.

Two things differ from the template's defaults, both to keep a run within minutes: the work and OCR
queues' visibility timeout (720 s) is lowered (a killed invocation's messages come back sooner; it may now run
out before a slow invocation ends, which only adds concurrent duplicate deliveries), and the retry backoff
starts at 2 s (the template's RetryBaseSeconds, meant for tests). And three settings the tenants' faults
need: callbacks may go to http://127.0.0.1 on any port (the soak's receivers, as on the e2e stack), and a
tenant may keep ``max_pending`` batches waiting for an upload (MaxPendingBatches, 100 by default), so the
empty-batch flood reaches the limit in a few seconds.

Three tenants besides the admin (whose key makes the big batch and the reused POST): ``soak-honest``,
whose callbacks must arrive within HONEST_CALLBACK_SECONDS of their batch ending; ``soak-slow``, whose
receivers trickle their answer or never answer; ``soak-flood``, which POSTs /batches and never uploads.
The flood's batches stay PENDING for the upload link and its grace (two hours): the wait leaves them out
deliberately, checks each is not due before then, and at the end runs settle as it runs at their due
time (the clock moved past it): each must end FAILED upload_expired and be announced, as documented.
"""

from __future__ import annotations

import json
import os
import random
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import boto3
import pymysql
from botocore.config import Config
from tools import devdb
from tools.deploy import DeployError, DeployParams, deploy

from pdfbatch.api_client import ApiClient, ApiError, presigned_post, read_api_key
from pdfbatch.config import Settings, parse_mysql_url
from pdfbatch.invariants import ExpectedUpload, Oracle, Report, S3Keys, Sources, check
from pdfbatch.services.tally import ANNOUNCE_LEASE_SECONDS
from soak import chaos, corpus, receivers
from soak.proxy import ChaosProxy

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
MYSQL = ("127.0.0.1", 3306)
REDIS = ("127.0.0.1", 6379)
FINAL = ("COMPLETED", "FAILED")
# An honest tenant's callback arrives within this long of its batch ending, whatever other tenants'
# receivers do (docs/RESULTS.md, "Signed callbacks": the fast lane's 3 s deadline, and the event's way to
# the deliverer on a loaded local stack).
HONEST_CALLBACK_SECONDS = 10.0
TENANTS = {"honest": "soak-honest", "slow": "soak-slow", "silent": "soak-slow", "flood": "soak-flood"}

Log = Callable[[str], None]


@dataclass(frozen=True)
class SoakConfig:
    """What one run does and where."""

    seed: int
    pdfs: int = 2000
    profile: str = "full"
    timeout: float = 1500.0  # seconds to wait for every batch to be final after the faults
    stall: float = 300.0  # no new outcome and an empty work queue this long: stop waiting
    stack: str = "pdfbatch-soak"
    database: str = "pdfbatch_soak"
    redis_db: int = 12
    visibility_timeout: int = 60
    retry_base: int = 2
    retry_max: int = 20
    concurrency: int = 5
    max_pending: int = 20  # MaxPendingBatches: each tenant's batches waiting for an upload
    proxy_ports: tuple[int, int] | None = None  # (mysql, redis); None: derived from the stack name
    out: Path | None = None  # where the JSON report is written

    @classmethod
    def short(cls, seed: int, **overrides: Any) -> SoakConfig:
        """The CI variant: ~200 PDFs, the short fault profile, a tighter wait."""
        values: dict[str, Any] = {
            "pdfs": 200,
            "profile": "short",
            "timeout": 240.0,
            "stall": 90.0,
            "visibility_timeout": 30,
        }
        return cls(seed=seed, **{**values, **overrides})

    def ports(self) -> tuple[int, int]:
        """The proxy's ports: stable per stack, so an unchanged stack is not redeployed."""
        if self.proxy_ports:
            return self.proxy_ports
        # Below Linux's ephemeral range (32768-60999), where an outgoing connection could hold the port.
        base = 20000 + zlib.crc32(self.stack.encode()) % 6000 * 2
        return base, base + 1


@dataclass
class SoakResult:
    """What a run did and found."""

    config: SoakConfig
    report: Report
    faults_done: dict[str, int]
    faults_skipped: dict[str, int]
    fault_errors: list[str]
    batches: dict[str, dict[str, Any]]
    waited: str  # "final", "stalled" or "timeout"
    seconds: dict[str, float] = field(default_factory=dict)
    dead_letters: dict[str, int] = field(default_factory=dict)
    proxy: dict[str, dict[str, int]] = field(default_factory=dict)
    failed_posts: int = 0  # POST /batches attempts answered 5xx (and tried again)
    problems: list[str] = field(default_factory=list)  # the soak's own checks (callbacks, flood) that failed
    callbacks: dict[str, Any] = field(default_factory=dict)  # what the receivers saw and the log recorded

    @property
    def ok(self) -> bool:
        """Every invariant held, and the soak's own checks (honest callbacks in time, the flood) too."""
        return self.report.ok and not self.problems

    def as_dict(self) -> dict[str, Any]:
        """The JSON report."""
        config = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self.config).items()}
        return {
            "seed": self.config.seed,
            "config": config,
            "ok": self.ok,
            "waited": self.waited,
            "seconds": {k: round(v, 1) for k, v in self.seconds.items()},
            "faults": {"done": self.faults_done, "skipped": self.faults_skipped, "errors": self.fault_errors},
            "batches": self.batches,
            "deadLetters": self.dead_letters,
            "proxy": self.proxy,
            "failedPosts": self.failed_posts,
            "problems": self.problems,
            "callbacks": self.callbacks,
            "invariants": self.report.as_dict()["invariants"],
        }

    def summary(self) -> list[str]:
        """What to print: the seed, the faults, the batches, the invariants, how to replay."""
        kinds = sorted({*self.faults_done, *self.faults_skipped})
        faults = ", ".join(
            f"{k} {self.faults_done.get(k, 0)}"
            + (f" (+{self.faults_skipped[k]} skipped)" if k in self.faults_skipped else "")
            for k in kinds
        )
        lines = [
            f"soak seed {self.config.seed}: {self.config.pdfs} PDFs in the big batch, "
            f"profile {self.config.profile}",
            f"faults injected: {faults}",
        ]
        lines += [f"  fault not injected: {e}" for e in self.fault_errors[:5]]
        for batch_id, b in self.batches.items():
            lines.append(
                f"batch {batch_id} ({b['role']}): {b['status']} {b.get('reason') or ''} {b['counts']}, "
                f"{b.get('retried', 0)} files tried more than once (at most {b.get('maxAttempts', 0)} times)"
            )
        lines.append(
            f"waited: {self.waited}; dead letters: {self.dead_letters}; proxy: {self.proxy}; "
            f"POST /batches answered 5xx {self.failed_posts} times"
        )
        if self.callbacks:
            lines.append(f"callbacks: {json.dumps(self.callbacks, sort_keys=True)}")
        lines += [f"PROBLEM: {p}" for p in self.problems]
        lines.append("invariants:")
        lines += ["  " + line for line in self.report.lines()]
        lines += [
            f"  known cause of {name} on the code of issue 11: {KNOWN_CAUSES[name]}"
            for name in self.report.broken()
            if name in KNOWN_CAUSES
        ]
        broken = self.report.broken() + (["soak checks"] if self.problems else [])
        verdict = "every invariant held" if self.ok else "BROKEN: " + ", ".join(broken)
        lines.append(f"soak seed {self.config.seed}: {verdict}")
        replay = f"make soak SEED={self.config.seed}"
        if self.config.pdfs != 2000:
            replay += f" PDFS={self.config.pdfs}"
        if self.config.profile != "full":
            replay += f" PROFILE={self.config.profile}"
            replay += f" (or PDFBATCH_SOAK_SEED={self.config.seed} pytest tests/e2e/test_soak_short.py)"
        lines.append(f"replay: {replay}")
        return lines


# The queues whose messages are files still to be read: the text lane's and the OCR lane's.
WORK_QUEUES = ("QueueUrl", "OcrQueueUrl")
# An earlier run's deliveries to receivers long gone (emptied with the rest).
CALLBACK_QUEUES = ("CallbackQueueUrl", "SlowCallbackQueueUrl", "CallbackDeadLetterQueueUrl")

# What the soak found behind each invariant it can break on the code of issue 11: hints for whoever reads a
# failure, not verdicts (a new cause shows up as the same broken invariant).
KNOWN_CAUSES = {
    "uploads_accounted": (
        "case 1: a second upload to a key maps to the first one's batch (uploads/<id>.zip always does; an "
        "`aws s3 cp` drop does on LocalStack, whose notifications all carry sequencer "
        f"{chaos.LOCALSTACK_SEQUENCER}), and reads of the ZIP are not pinned to the notified version"
    ),
    "one_outcome": "case 1 (two ZIPs mixed under one batch) or case 6 (a last delivery died without give_up)",
    "batches_final": (
        "case 6 (a message reached the work DLQ without an outcome: see deadLetters), or the uncounted "
        "unzip failure under counters_match_ledger; a PENDING batch of role ? with no entries is a POST "
        "/batches that answered 5xx after writing its batch row (seed 72221, fixed by writing it last)"
    ),
    "counters_match_ledger": (
        "live below the ledger: unzip recorded an entry failed (corrupt, encrypted, too large) and died "
        "before counting it; its re-run skips entries with an outcome, so the batch stays PROCESSING until "
        "the Redis hash expires. Summary below the ledger: case 1, a batch FAILED as a whole while another "
        "unzip of its key staged files"
    ),
    "reports_match_ledger": (
        "final but not announced: an announcer died after its claim (seed 256111: MySQL cut between the "
        "claim and its reply), and the status function's settle schedule did not announce it within the "
        "lease and two periods (is the schedule deployed and firing?)"
    ),
    "final_objects_exist": "case 2: a final key shared by two batches, deleted by the one that lost the link",
    "no_staged_leftovers": (
        "a linked file's staged copy survived: process_pdf deletes it after the link (best effort, a "
        "warning in its log when the delete failed), or an entry without an outcome was staged"
    ),
}


class Soak:
    """One run against the LocalStack at ``endpoint``."""

    def __init__(self, config: SoakConfig, endpoint: str, log: Log = print) -> None:
        self.config = config
        self.endpoint = endpoint.rstrip("/")
        self.log = log
        self.direct_mysql = f"mysql://root@{MYSQL[0]}:{MYSQL[1]}/{config.database}"
        self.direct_redis = f"redis://{REDIS[0]}:{REDIS[1]}/{config.redis_db}"
        self._clients: dict[str, Any] = {}
        self._checker_deps: Any = None
        self.outputs: dict[str, str] = {}
        for name, value in {
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": REGION,
        }.items():
            os.environ.setdefault(name, value)

    # --- clients

    def client(self, service: str) -> Any:
        """A boto3 client on LocalStack."""
        if service not in self._clients:
            config = Config(retries={"mode": "standard", "max_attempts": 5}, s3={"addressing_style": "path"})
            make: Any = boto3.client
            self._clients[service] = make(
                service,
                endpoint_url=self.endpoint,
                region_name=REGION,
                aws_access_key_id="test",
                aws_secret_access_key="test",
                config=config,
            )
        return self._clients[service]

    def db(self, database: str | None = None) -> Any:
        """A direct autocommit connection to MariaDB (not through the proxy)."""
        return pymysql.connect(
            host=MYSQL[0], port=MYSQL[1], user="root", database=database, autocommit=True, charset="utf8mb4"
        )

    # --- setting up

    def reset_database(self) -> None:
        """Drop the soak's database and create it again (users table and ledger, empty)."""
        conn = self.db()
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{self.config.database}`")
        devdb.create_schema(conn, parse_mysql_url(self.direct_mysql))
        conn.close()

    def deploy(self, proxy: ChaosProxy) -> None:
        """Deploy (or reuse) the soak stack, its functions pointed at the proxy."""
        env = {
            "PDFBATCH_MYSQL_URL": f"mysql://root@127.0.0.1:{proxy.port('mysql')}/{self.config.database}",
            "PDFBATCH_REDIS_URL": f"redis://127.0.0.1:{proxy.port('redis')}/{self.config.redis_db}",
        }
        extra = {
            "RetryBaseSeconds": str(self.config.retry_base),
            "RetryMaxSeconds": str(self.config.retry_max),
            "MaxPendingBatches": str(self.config.max_pending),
            "CallbackAllow": "127.0.0.1/32",
            "CallbackAllowHttp": "true",
            "CallbackPorts": "1-65535",
        }
        params = DeployParams.from_env(env, process_concurrency=self.config.concurrency, extra=extra)

        def run() -> dict[str, str]:
            return deploy(params, self.endpoint, self.config.stack, root=ROOT, region=REGION, log=self.log)

        try:
            self.outputs = run()
        except DeployError as exc:
            if "lacks the outputs" not in str(exc):
                raise
            # LocalStack's CloudFormation can end an update UPDATE_COMPLETE without outputs: start over.
            self.log("the soak stack came out of its update without outputs; recreating it")
            self.client("cloudformation").delete_stack(StackName=self.config.stack)
            self.client("cloudformation").get_waiter("stack_delete_complete").wait(
                StackName=self.config.stack
            )
            self.outputs = run()

    def prepare(self) -> None:
        """Empty the bucket and the queues; lower the work and OCR queues' visibility timeout (module doc)."""
        s3, sqs = self.client("s3"), self.client("sqs")
        bucket = self.outputs["BucketName"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
        for name in (
            *WORK_QUEUES,
            *CALLBACK_QUEUES,
            "DeadLetterQueueUrl",
            "UnzipDeadLetterQueueUrl",
            "OcrDeadLetterQueueUrl",
        ):
            if name not in self.outputs:
                continue
            try:
                sqs.purge_queue(QueueUrl=self.outputs[name])
            except sqs.exceptions.PurgeQueueInProgress:
                self.log(f"{name}: a purge is already in progress")
        for name in WORK_QUEUES:
            sqs.set_queue_attributes(
                QueueUrl=self.outputs[name],
                Attributes={"VisibilityTimeout": str(self.config.visibility_timeout)},
            )

    def seed_users(self, c: corpus.SoakCorpus) -> dict[str, int]:
        """Insert the corpus's users; return their ids by email."""
        conn = self.db(self.config.database)
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO users (email) VALUES (%s)", [(e,) for e in c.users])
            cur.executemany(
                "INSERT INTO users (email, pdf_url) VALUES (%s, 's3://legacy-archive/cv/on-file.pdf')",
                [(e,) for e in c.linked_users],
            )
            cur.execute("SELECT id, email FROM users")
            ids = {str(email): str(uid) for uid, email in cur.fetchall()}
        conn.close()
        return ids

    def create_tenants(self) -> tuple[dict[str, str], dict[str, str]]:
        """The soak's tenants' keys (and signing secrets) in its database, as `pdfbatch keys create` makes
        them: ({tenant: key}, {tenant: signing secret})."""
        from pdfbatch import tenants
        from pdfbatch.adapters.mysql import MysqlClient
        from pdfbatch.adapters.tenant_keys import MysqlTenantKeys

        client = MysqlClient.from_url(self.direct_mysql)
        client.ensure_schema()
        store = MysqlTenantKeys(client)
        root = str(
            self.client("secretsmanager").get_secret_value(SecretId=self.outputs["CallbackTenantRootArn"])[
                "SecretString"
            ]
        )
        keys, secrets_ = {}, {}
        for name in sorted(set(TENANTS.values())):
            keys[name] = tenants.create_key(store, name)
            secrets_[name] = tenants.new_signing_secret(store, root, name, time.time())
        return keys, secrets_

    def settle_period(self) -> float | None:
        """The deployed stack's SettleSchedule period (settled_in_time allows two of them)."""
        from pdfbatch.services import settle

        stack = self.client("cloudformation").describe_stacks(StackName=self.config.stack)["Stacks"][0]
        params = {p["ParameterKey"]: p.get("ParameterValue") for p in stack.get("Parameters", [])}
        return settle.schedule_seconds(params.get("SettleSchedule") or settle.DEFAULT_SCHEDULE)

    def check_flood(self, injector: chaos.Injector) -> list[str]:
        """The flood as documented: exactly the limit created, every POST past it 429 with a Retry-After
        until the oldest ends; each batch PENDING and not due for settle before its link and grace are over;
        and at that time a settle run ends each FAILED upload_expired and announces it."""
        from pdfbatch.logs import logger
        from pdfbatch.services import settle
        from pdfbatch.services.batches import UPLOAD_GRACE_SECONDS

        flood = injector.flooded
        if flood is None:
            return ["flood: not run"] if chaos.PROFILES[self.config.profile].flood_beyond else []
        limit, problems = self.config.max_pending, []
        if len(flood.created) != limit:
            problems.append(f"flood: {len(flood.created)} batches created, the limit is {limit}")
        deps = self.checker_deps()
        lasts = deps.settings.upload_url_expires_seconds + UPLOAD_GRACE_SECONDS
        for status, retry_after in flood.beyond:
            if status != 429 or not retry_after or not 0 < float(retry_after) <= lasts + 60:
                problems.append(f"flood: past the limit answered {status} with Retry-After {retry_after!r}")
        rows = {b: deps.ledger.get_batch(b) for b in flood.created}
        for batch_id, row in rows.items():
            if row is None or row.status != "PENDING" or row.announced_at is not None:
                problems.append(
                    f"flood: batch {batch_id} is {row.status if row else 'missing'} before its time"
                )
            elif abs((row.settle_at or 0.0) - (row.created_at + lasts)) > 1.0:
                problems.append(f"flood: batch {batch_id} is due at {row.settle_at}, not link + grace")
        if problems:
            return problems
        # Settle's run at their due time (and one period on): every batch of the flood ends, announced.
        later = replace(deps, clock=lambda: time.time() + lasts + 60.0)
        level = logger.log_level
        logger.setLevel("WARNING")  # its info lines (one per batch) are the function's log, not the soak's
        try:
            expired = set(settle.settle(later).expired)
        finally:
            logger.setLevel(level)
        for batch_id in flood.created:
            row = deps.ledger.get_batch(batch_id)
            if (
                batch_id not in expired
                or row is None
                or row.reason != "upload_expired"
                or not row.announced_at
            ):
                problems.append(f"flood: batch {batch_id} not expired and announced at its due time")
        return problems

    def check_callbacks(
        self, injector: chaos.Injector, honest: receivers.Honest
    ) -> tuple[dict[str, Any], list[str]]:
        """Each honest batch's summary arrived, verified, within HONEST_CALLBACK_SECONDS of its end, while the
        other tenant's receivers trickled or never answered; what the callback log holds per role."""
        roles = injector.callback_batches
        wanted = [b for b, r in roles.items() if r == "honest"]
        deadline = time.monotonic() + HONEST_CALLBACK_SECONDS + 5
        while time.monotonic() < deadline and not all(b in honest.arrived for b in wanted):
            time.sleep(0.2)
        late: dict[str, float | None] = {}
        for batch_id in wanted:
            row = self.checker_deps().ledger.get_batch(batch_id)
            if batch_id in honest.arrived and row is not None and row.completed_at:
                late[batch_id] = round(honest.arrived[batch_id] - row.completed_at, 2)
            else:
                late[batch_id] = None
        problems = [
            f"honest callback of {b}: "
            + ("never arrived" if s is None else f"{s:.1f} s after its batch ended")
            + f" (bound {HONEST_CALLBACK_SECONDS:.0f} s)"
            for b, s in late.items()
            if s is None or s > HONEST_CALLBACK_SECONDS
        ]
        if honest.refused:
            problems.append(f"honest receiver refused {honest.refused} deliveries that did not verify")
        if honest.errors:
            problems.append(
                f"honest receiver's server reported {len(honest.errors)} errors: {honest.errors[0]}"
            )
        attempts: dict[str, Counter[str]] = {}
        log = self.checker_deps().callbacks
        for batch_id, role in roles.items():
            for a in log.attempts(batch_id) if log is not None else ():
                outcome = "running" if a.duration_ms is None else str(a.http_status or a.error)
                attempts.setdefault(role, Counter())[outcome] += 1
        flood = injector.flooded
        out = {
            "honestLateSeconds": late,
            "attempts": {r: dict(sorted(c.items())) for r, c in sorted(attempts.items())},
            "flood": {
                "created": len(flood.created),
                "beyond": [s for s, _ in flood.beyond],
                "retried5xx": flood.errors,
            }
            if flood
            else None,
        }
        return out, problems

    def checker_deps(self) -> Any:
        """The pipeline's Deps over the stack's bucket, MySQL and Redis directly (built once)."""
        from pdfbatch.bootstrap import build_deps

        if self._checker_deps is None:
            settings = replace(
                Settings.from_env(
                    {"PDFBATCH_MYSQL_URL": self.direct_mysql, "PDFBATCH_REDIS_URL": self.direct_redis}
                ),
                bucket=self.outputs["BucketName"],
                work_queue_url=self.outputs["QueueUrl"],
                endpoint_url=self.endpoint,
                region=REGION,
            )
            self._checker_deps = build_deps(settings, ensure_schema=False)
        return self._checker_deps

    def checker_sources(self, settle_period: float | None = None) -> Sources:
        """The invariant checker's view: the stack's bucket, MySQL and Redis directly."""
        return Sources.from_deps(
            self.checker_deps(),
            S3Keys(self.client("s3")),
            own_uploads=True,  # prepare() empties it
            settle_period=settle_period,
        )

    # --- the run

    def run(self) -> SoakResult:
        """Set up, upload, inject the plan's faults, wait for every batch, check the invariants."""
        cfg = self.config
        profile = chaos.PROFILES[cfg.profile]
        seconds: dict[str, float] = {}
        started = time.monotonic()
        self.log(f"soak seed {cfg.seed}: generating {cfg.pdfs} PDFs")
        c = corpus.build(cfg.seed, cfg.pdfs)
        work = ROOT / "build" / "soak" / str(cfg.seed)
        work.mkdir(parents=True, exist_ok=True)
        big_zip = c.zip_bytes(c.big)
        seconds["generate"] = time.monotonic() - started

        with ChaosProxy() as proxy:
            mysql_port, redis_port = cfg.ports()
            proxy.add("mysql", mysql_port, MYSQL)
            proxy.add("redis", redis_port, REDIS)
            t = time.monotonic()
            self.reset_database()
            self.deploy(proxy)
            self.prepare()
            ids = self.seed_users(c)
            seconds["setup"] = time.monotonic() - t
            api = ApiClient(self.outputs["LocalApiUrl"], api_key=read_api_key(ROOT, cfg.stack))
            posts: dict[str, dict[str, Any]] = {}
            failed_posts: list[int] = []

            def post(data: bytes) -> tuple[str, str]:
                body = create_batch(api, failed=failed_posts)
                path = work / f"{body['batchId']}.zip"
                path.write_bytes(data)
                presigned_post(body["upload"]["url"], body["upload"]["fields"], path)
                posts[body["batchId"]] = body
                return body["key"], body["batchId"]

            keys, secrets_ = self.create_tenants()
            small = [("notes.txt", f"soak {cfg.seed}: nothing to link".encode())]
            honest = receivers.Honest(TENANTS["honest"], secrets_["soak-honest"])
            slow: dict[str, receivers.Trickle | receivers.Silent] = {
                "slow": receivers.Trickle(),
                "silent": receivers.Silent(),
            }

            def callback_batch(role: str) -> tuple[str, str, list[tuple[str, bytes]]]:
                tenant_api = ApiClient(self.outputs["LocalApiUrl"], api_key=keys[TENANTS[role]])
                url = honest.url if role == "honest" else slow[role].url
                body = create_batch(tenant_api, failed=failed_posts, callback_url=url)
                path = work / f"{body['batchId']}.zip"
                path.write_bytes(c.zip_bytes(small))
                presigned_post(body["upload"]["url"], body["upload"]["fields"], path)
                return body["key"], body["batchId"], small

            def flood(beyond: int) -> chaos.Flood:
                return flood_batches(
                    ApiClient(self.outputs["LocalApiUrl"], api_key=keys[TENANTS["flood"]]),
                    cfg.max_pending + beyond,
                )

            def post_again(data: bytes) -> bool:
                (body,) = [b for b in posts.values() if b["batchId"] != big_batch]
                path = work / "reused-again.zip"
                path.write_bytes(data)
                try:
                    presigned_post(body["upload"]["url"], body["upload"]["fields"], path)
                except ApiError:
                    return False
                return True

            uploaded = time.monotonic()
            big_key, big_batch = post(big_zip)
            # The plan's clock starts when unzip starts on the big ZIP (a cold stack takes a while to
            # deliver the first notification): faults then land while files are staged and processed.
            self.await_started(big_batch)
            t0 = time.monotonic()
            self.log(
                f"big batch {big_batch} uploaded ({len(big_zip) // 1024} KiB), unzip started after "
                f"{t0 - uploaded:.1f} s; faults begin"
            )
            targets = chaos.Targets(
                stack_outputs=self.outputs,
                client=self.client,
                proxy=proxy,
                big_key=big_key,
                big_batch=big_batch,
                drop_key=f"uploads/soak-{cfg.seed}.zip",
                drop_zip=(c.zip_bytes(c.dropped), c.dropped),
                reused_zips=(
                    (c.zip_bytes(c.reused), c.reused),
                    (c.zip_bytes(c.reused_second), c.reused_second),
                ),
                post=post,
                post_again=post_again,
                callback_batch=callback_batch,
                flood=flood,
                odd_zip=(c.zip_bytes(c.dropped), c.dropped),
            )
            injector = chaos.Injector(targets, cfg.seed, self.log)
            injector.start(chaos.plan(cfg.seed, profile), t0)
            waited = self.wait(injector, api, t0, profile.window)
            seconds["run"] = time.monotonic() - t0
            problems: list[str] = []
            if waited == "final":
                t = time.monotonic()
                self.await_announced()
                seconds["announce"] = time.monotonic() - t
                t = time.monotonic()
                problems += self.check_flood(injector)
                callbacks, late = self.check_callbacks(injector, honest)
                problems += late
                seconds["tenants"] = time.monotonic() - t
            else:
                callbacks = {}
            for r in (honest, *slow.values()):
                r.close()
            if callbacks:  # how the slow receivers' connections ended, and what the honest one's server said
                callbacks["receiverConnections"] = {
                    name: dict(sorted(r.ended.items())) for name, r in slow.items()
                }
                callbacks["honestServerErrors"] = honest.errors[:20]
            proxy_stats = {name: asdict(proxy.stats(name)) for name in ("mysql", "redis")}

        t = time.monotonic()
        owners = {h: (ids[e] if e else None) for h, e in c.owners.items()}
        uploads = [corpus_upload(big_key, c.big)] + [
            corpus_upload(u.key, u.entries) for u in injector.uploads
        ]
        oracle = Oracle(owners, uploads)
        (work / "oracle.json").write_text(json.dumps(oracle.as_json()))
        batches = self.batches()
        report = check(self.checker_sources(self.settle_period()), list(batches), oracle)
        seconds["check"] = time.monotonic() - t
        seconds["total"] = time.monotonic() - started
        roles = {
            big_key: "big",
            f"uploads/{injector.reused_batch}.zip": "reused POST",
            targets.drop_key: "dropped",
            f"uploads/Soak-{cfg.seed}.Zip": "dropped .Zip",
            f"uploads/soak-{cfg.seed}-notes": "dropped, no ZIP",
        }
        roles |= {f"uploads/{b}.zip": f"callback {r}" for b, r in injector.callback_batches.items()}
        flooded = set(injector.flooded.created) if injector.flooded else set()
        roles |= {f"uploads/{b}.zip": "flood" for b in flooded}
        result = SoakResult(
            config=cfg,
            report=report,
            faults_done=dict(sorted(injector.done.items())),
            faults_skipped=dict(sorted(injector.skipped.items())),
            fault_errors=injector.errors,
            batches={
                b: {**row, "role": roles.get(row.pop("key"), "?")}
                for b, row in batches.items()
                if b not in flooded  # summed up under callbacks["flood"]
            },
            waited=waited,
            seconds=seconds,
            dead_letters=self.dead_letters(),
            proxy=proxy_stats,
            failed_posts=len(failed_posts),
            problems=problems,
            callbacks=callbacks,
        )
        out = cfg.out or work / "report.json"
        out.write_text(json.dumps(result.as_dict(), indent=2, sort_keys=True))
        self.log(f"report written to {out}")
        return result

    def await_started(self, batch_id: str, timeout: float = 180.0) -> None:
        """Until unzip has inspected the batch's ZIP (its ledger row has started_at)."""
        deadline = time.monotonic() + timeout
        conn = self.db(self.config.database)
        try:
            while time.monotonic() < deadline:
                with conn.cursor() as cur:
                    cur.execute("SELECT started_at FROM pdfbatch_batches WHERE batch_id = %s", (batch_id,))
                    row = cur.fetchone()
                if row and row[0]:
                    return
                time.sleep(0.2)
        finally:
            conn.close()
        raise RuntimeError(f"unzip did not start on the big batch within {timeout:.0f} s")

    def await_announced(self) -> None:
        """Until every final batch is announced, nobody reading it: an announcer that died after its
        claim leaves the announcement to the status function's settle schedule (every minute) once the
        claim's lease is over. Bounded by the lease and two schedule periods; the invariant judges."""
        deadline = time.monotonic() + ANNOUNCE_LEASE_SECONDS + 150
        said = False
        while time.monotonic() < deadline:
            conn = self.db(self.config.database)
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT COUNT(*) FROM pdfbatch_batches "
                    "WHERE status IN ('COMPLETED', 'FAILED') AND announced_at IS NULL"
                )
                (due,) = cur.fetchone()
            conn.close()
            if not due:
                return
            if not said:
                self.log(f"{due} final batches not announced yet: waiting for the settle schedule")
                said = True
            time.sleep(3)

    def batches(self) -> dict[str, dict[str, Any]]:
        """Every batch in the soak's database (this run's, and any a late retry of an earlier seed's
        unzip made): status, reason, counts and key."""
        conn = self.db(self.config.database)
        with conn.cursor() as cur:
            cur.execute(
                "SELECT batch_id, status, reason, total_files, object_key "
                "FROM pdfbatch_batches ORDER BY created_at"
            )
            rows = cur.fetchall()
            cur.execute(
                "SELECT batch_id, COALESCE(outcome, 'pending'), COUNT(*) FROM pdfbatch_files "
                "WHERE kind = 'pdf' GROUP BY batch_id, outcome"
            )
            counts: dict[str, dict[str, int]] = {}
            for batch_id, outcome, n in cur.fetchall():
                counts.setdefault(batch_id, {})[outcome] = int(n)
            # Files tried more than once: the faults hit work in progress (a kill, a cut, an outage).
            cur.execute(
                "SELECT batch_id, SUM(attempts > 1), MAX(attempts) FROM pdfbatch_files "
                "WHERE kind = 'pdf' GROUP BY batch_id"
            )
            retried = {b: {"retried": int(n or 0), "maxAttempts": int(m or 0)} for b, n, m in cur.fetchall()}
        conn.close()
        return {
            b: {
                "status": s,
                "reason": r,
                "totalFiles": t,
                "counts": counts.get(b, {}),
                "key": k,
                **retried.get(b, {}),
            }
            for b, s, r, t, k in rows
        }

    def _queue_empty(self) -> bool:
        """No message left, visible, in flight or delayed, on the work queue or the OCR lane's."""
        names = [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ]
        for queue in WORK_QUEUES:
            attrs = self.client("sqs").get_queue_attributes(
                QueueUrl=self.outputs[queue], AttributeNames=names
            )
            if any(int(v) for v in attrs["Attributes"].values()):
                return False
        return True

    def wait(self, injector: chaos.Injector, api: ApiClient, t0: float, window: float) -> str:
        """Until the plan is done, every upload has its batch and every batch is final (polling the API as
        clients do), or it stalls."""
        cfg = self.config
        deadline = t0 + window + cfg.timeout
        last_progress, last_done, last_log = time.monotonic(), -1, 0.0
        poll_errors: Counter[str] = Counter()
        settle_until = None
        while True:
            plan_done = injector.join(timeout=2.0)
            batches = self.batches()
            done = sum(n for b in batches.values() for o, n in b["counts"].items() if o != "pending")
            if done != last_done:
                last_done, last_progress = done, time.monotonic()
            # The flood's batches wait for an upload that never comes, for hours (their link and grace):
            # left out here on purpose, and checked by check_flood once every other batch is final.
            flooded = set(injector.flooded.created) if injector.flooded else set()
            batches = {b: row for b, row in batches.items() if b not in flooded}
            for batch_id, b in batches.items():
                if b["status"] not in FINAL:
                    try:
                        api.status(batch_id)  # as a waiting client would (a read may end a batch)
                    except ApiError as exc:
                        poll_errors[str(exc.status)] += 1
            now = time.monotonic()
            # Every upload has its batch too: an unzip that failed under a fault is retried by S3's
            # asynchronous invocation a minute or two later (the big ZIP and each upload are one batch
            # each). Counted per key: a late retry of an earlier seed's unzip on the same stack can add
            # a batch of a key this run never used (CI, seed 965370: it stood in for a missing drop).
            expected = Counter([injector.targets.big_key, *(u.key for u in injector.uploads)])
            have = Counter(b["key"] for b in batches.values())
            accounted = all(have[key] >= n for key, n in expected.items())
            final = accounted and all(b["status"] in FINAL for b in batches.values())
            if now - last_log > 10:
                states = Counter(b["status"] for b in batches.values())
                faults = sum(injector.done.values())
                self.log(
                    f"  {now - t0:5.0f} s: {done} outcomes, batches {dict(states)}, {faults} faults so far"
                )
                last_log = now
            if plan_done and final and self._queue_empty():
                settle_until = settle_until or now + 10  # late notifications may still create batches
                if now >= settle_until:
                    return "final"
            else:
                settle_until = None
            if plan_done and now - last_progress > cfg.stall and self._queue_empty():
                self.log(f"no new outcome for {cfg.stall:.0f} s and the work queues are empty: stalled")
                return "stalled"
            if now > deadline:
                injector.stop()
                self.log("timed out waiting for the batches to be final")
                return "timeout"

    def dead_letters(self) -> dict[str, int]:
        """Messages left in the dead-letter queues (visible or not)."""
        out = {}
        for name in ("DeadLetterQueueUrl", "UnzipDeadLetterQueueUrl", "OcrDeadLetterQueueUrl"):
            attrs = self.client("sqs").get_queue_attributes(
                QueueUrl=self.outputs[name],
                AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
            )["Attributes"]
            out[name.removesuffix("Url")] = sum(int(v) for v in attrs.values())
        return out


def create_batch(
    api: ApiClient, attempts: int = 20, failed: list[int] | None = None, callback_url: str | None = None
) -> dict[str, Any]:
    """POST /batches as a client would: a 503 (MySQL or Redis down behind the proxy) is tried again.

    Each 5xx is appended to ``failed``: the id of that attempt is never known to the client."""
    for attempt in range(attempts):
        try:
            return api.create_batch(callback_url)
        except ApiError as exc:
            if (exc.status or 503) < 500 or attempt == attempts - 1:
                raise
            if failed is not None:
                failed.append(exc.status or 503)
            time.sleep(1.0)
    raise AssertionError("unreachable")


def flood_batches(api: ApiClient, posts: int, attempts: int = 20) -> chaos.Flood:
    """``posts`` POST /batches without an upload, one after another; a 5xx is tried again (and counted)."""
    out = chaos.Flood()
    for _ in range(posts):
        for attempt in range(attempts):
            try:
                out.created.append(str(api.create_batch()["batchId"]))
            except ApiError as exc:
                if (exc.status or 503) >= 500 and attempt < attempts - 1:
                    out.errors += 1
                    time.sleep(1.0)
                    continue
                out.beyond.append((exc.status, exc.header("Retry-After")))
            break
    return out


def corpus_upload(key: str, entries: list[tuple[str, bytes]]) -> ExpectedUpload:
    """What the oracle expects a batch of this upload to hold."""
    return ExpectedUpload(key, tuple((name, corpus.sha(data)) for name, data in entries))


def new_seed() -> int:
    """A fresh seed for a run nobody asked to replay."""
    return random.SystemRandom().randrange(1, 10**6)
