"""The bench's own stack on the shared LocalStack, deployed with the project's tooling, and its helpers.

Stack `pdfbatch-bench`, database `pdfbatch_bench`, Redis db 9: the demo, test and e2e stacks are never
touched. LocalStack is started with a lease (tools.localstack) and stopped only if this run started it
and nobody else holds a lease.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pymysql
import redis
from botocore.config import Config
from tools import localstack

from pdfbatch.api_client import ApiClient

ROOT = Path(__file__).resolve().parents[1]
STACK = os.environ.get("PDFBATCH_BENCH_STACK", "pdfbatch-bench")
DB = os.environ.get("PDFBATCH_BENCH_DB", "pdfbatch_bench")
REDIS_DB = int(os.environ.get("PDFBATCH_BENCH_REDIS_DB", "9"))
MYSQL_URL = f"mysql://root@127.0.0.1:3306/{DB}"
REDIS_URL = f"redis://127.0.0.1:6379/{REDIS_DB}"
REGION = "us-east-1"

_REPORT = re.compile(
    r"REPORT RequestId: (\S+)\tDuration: ([\d.]+) ms\tBilled Duration: (\d+) ms\t"
    r"Memory Size: (\d+) MB\tMax Memory Used: (\d+) MB"
)


@dataclass(frozen=True)
class Report:
    """One invocation's REPORT line (written by the local executor's bootstrap, as Lambda does)."""

    request_id: str
    duration_ms: float
    billed_ms: int
    memory_mb: int
    max_memory_mb: int
    logged_ms: int = 0  # when the line reached the log (the invocation's end)
    stream: str = ""  # the execution environment


@dataclass
class BenchStack:
    """A deployed bench stack: its outputs and clients for S3, SQS, Lambda, Logs, MySQL and Redis."""

    endpoint: str
    outputs: dict[str, str]
    env: dict[str, str]
    clients: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ clients
    def client(self, service: str) -> Any:
        """A boto3 client on LocalStack (one per service)."""
        if service not in self.clients:
            config = Config(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=50)
            if service == "s3":
                config = config.merge(Config(s3={"addressing_style": "path"}))
            if service == "lambda":
                # MaximumConcurrency 1 is below AWS's minimum (2), which botocore checks client-side.
                config = config.merge(Config(parameter_validation=False))
            make: Any = boto3.client  # typed per literal service name; this one is a variable
            self.clients[service] = make(
                service,
                endpoint_url=self.endpoint,
                region_name=REGION,
                aws_access_key_id="test",
                aws_secret_access_key="test",
                config=config,
            )
        return self.clients[service]

    def api(self) -> ApiClient:
        """The status API client exactly as the CLI builds it, so whatever credentials it sends apply."""
        from pdfbatch import cli

        os.environ.update(self.env)
        os.environ["PDFBATCH_API_URL"] = self.outputs["LocalApiUrl"]
        client: ApiClient = cli.api_client()
        return client

    def db(self) -> Any:
        """A fresh autocommit connection to the bench database."""
        return pymysql.connect(host="127.0.0.1", user="root", database=DB, autocommit=True, charset="utf8mb4")

    @property
    def bucket(self) -> str:
        """The stack's bucket."""
        return self.outputs["BucketName"]

    # ------------------------------------------------------------------ users
    def seed_users(self, emails: Sequence[str]) -> None:
        """Insert ``emails`` as users without a PDF (existing ones get their pdf_url cleared)."""
        conn = self.db()
        with conn.cursor() as cur:
            for start in range(0, len(emails), 2000):
                cur.executemany(
                    "INSERT INTO users (email, pdf_url) VALUES (%s, NULL) "
                    "ON DUPLICATE KEY UPDATE pdf_url = NULL",
                    [(e,) for e in emails[start : start + 2000]],
                )
        conn.close()

    # ------------------------------------------------------------------ functions
    def function(self, name: str) -> str:
        """The deployed name of `unzip`, `process-pdf`, `ocr-pdf` or `status`."""
        key = {
            "unzip": "UnzipFunctionName",
            "process-pdf": "ProcessPdfFunctionName",
            "ocr-pdf": "OcrPdfFunctionName",
            "status": "StatusFunctionName",
        }
        return self.outputs[key[name]]

    def _mapping(self) -> dict[str, Any]:
        lam = self.client("lambda")
        mappings = lam.list_event_source_mappings(FunctionName=self.function("process-pdf"))
        return dict(mappings["EventSourceMappings"][0])

    def set_process_concurrency(self, value: int) -> None:
        """Reserved concurrency and the SQS mapping's MaximumConcurrency of process_pdf, both to ``value``.

        AWS accepts MaximumConcurrency from 2; LocalStack stores 1 too, and the local SQS concurrency patch
        then runs one batch at a time, which is what reserved concurrency 1 means on AWS.
        """
        lam = self.client("lambda")
        name = self.function("process-pdf")
        lam.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=value)
        mapping = self._mapping()
        lam.update_event_source_mapping(UUID=mapping["UUID"], ScalingConfig={"MaximumConcurrency": value})
        self._wait_mapping(lambda m: m.get("ScalingConfig", {}).get("MaximumConcurrency") == value)

    def enable_processing(self, enabled: bool) -> None:
        """Turn the SQS -> process_pdf mapping on or off."""
        mapping = self._mapping()
        self.client("lambda").update_event_source_mapping(UUID=mapping["UUID"], Enabled=enabled)
        want = "Enabled" if enabled else "Disabled"
        self._wait_mapping(lambda m: m.get("State") == want)

    def _wait_mapping(self, ok: Any, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not ok(self._mapping()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"event source mapping did not settle: {self._mapping()}")
            time.sleep(0.2)
        time.sleep(1.5)  # the mapping's worker restarts after an update

    def fresh_environment(self, name: str) -> None:
        """Make the next invoke of ``name`` start a new execution environment (a configuration change)."""
        lam = self.client("lambda")
        fn = self.function(name)
        config = lam.get_function_configuration(FunctionName=fn)
        variables = dict(config.get("Environment", {}).get("Variables", {}))
        variables["PDFBATCH_BENCH_GENERATION"] = str(time.time_ns())
        lam.update_function_configuration(FunctionName=fn, Environment={"Variables": variables})
        self._wait_active(fn)

    def set_function_env(self, name: str, variables: dict[str, str | None]) -> None:
        """Set (a value) or remove (None) variables of function ``name``'s environment; wait until the
        update is active (its next invokes start new execution environments)."""
        lam = self.client("lambda")
        fn = self.function(name)
        current = dict(
            lam.get_function_configuration(FunctionName=fn).get("Environment", {}).get("Variables", {})
        )
        wanted = {k: v for k, v in {**current, **variables}.items() if v is not None}
        if wanted == current:
            return
        lam.update_function_configuration(FunctionName=fn, Environment={"Variables": wanted})
        self._wait_active(fn)

    def _wait_active(self, fn: str) -> None:
        lam = self.client("lambda")
        deadline = time.monotonic() + 60
        while True:
            c = lam.get_function_configuration(FunctionName=fn)
            if c.get("LastUpdateStatus") == "Successful" and c.get("State") == "Active":
                # LocalStack drops an S3 notification that arrives while it swaps the environments of the
                # updated version (seen: no invoke, no error); a few seconds later they are delivered.
                time.sleep(5)
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{fn} did not become active after a configuration update")
            time.sleep(0.2)

    def purge_queue(self) -> None:
        """Drop every message of the work queue."""
        self.client("sqs").purge_queue(QueueUrl=self.outputs["QueueUrl"])

    # ------------------------------------------------------------------ logs
    def log_events(
        self, name: str, since_ms: int, until_ms: int | None = None
    ) -> Iterator[tuple[int, str, str]]:
        """(timestamp ms, log stream, line) of function ``name`` in [since_ms, until_ms], as LocalStack
        stored them in CloudWatch Logs (one stream per execution environment)."""
        logs = self.client("logs")
        group = f"/aws/lambda/{self.function(name)}"
        kwargs: dict[str, Any] = {"logGroupName": group, "startTime": since_ms}
        if until_ms is not None:
            kwargs["endTime"] = until_ms
        while True:
            try:
                page = logs.filter_log_events(**kwargs)
            except logs.exceptions.ResourceNotFoundException:
                return
            for event in page.get("events", []):
                for line in event["message"].splitlines():
                    yield int(event["timestamp"]), str(event.get("logStreamName", "")), line
            token = page.get("nextToken")
            if not token:
                return
            kwargs["nextToken"] = token

    def log_lines(self, name: str, since_ms: int, until_ms: int | None = None) -> Iterator[str]:
        """The lines of log_events()."""
        for _, _, line in self.log_events(name, since_ms, until_ms):
            yield line

    def reports(self, name: str, since_ms: int, until_ms: int | None = None) -> list[Report]:
        """The REPORT lines of ``name`` in [since_ms, until_ms]."""
        out = []
        for ts, stream, line in self.log_events(name, since_ms, until_ms):
            m = _REPORT.search(line)
            if m:
                out.append(Report(m[1], float(m[2]), int(m[3]), int(m[4]), int(m[5]), ts, stream))
        return out

    def json_lines(self, name: str, since_ms: int, message: str) -> list[dict[str, Any]]:
        """Structured (Powertools) log records of ``name`` with ``message``."""
        out = []
        for line in self.log_lines(name, since_ms):
            if not line.startswith("{") or message not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("message") == message:
                out.append(record)
        return out


def cli_env(endpoint: str) -> dict[str, str]:
    """The environment `pdfbatch` runs with for the bench stack."""
    env = dict(os.environ)
    env.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="test",
        AWS_SECRET_ACCESS_KEY="test",
        AWS_DEFAULT_REGION=REGION,
        PDFBATCH_STACK_NAME=STACK,
        PDFBATCH_MYSQL_URL=MYSQL_URL,
        PDFBATCH_REDIS_URL=REDIS_URL,
    )
    env.pop("PDFBATCH_API_URL", None)
    return env


def reset_state() -> None:
    """A fresh bench database and Redis db (the stack itself is reused when unchanged)."""
    conn = pymysql.connect(host="127.0.0.1", user="root", autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{DB}`")
    conn.close()
    redis.Redis.from_url(REDIS_URL).flushdb()


def up(endpoint: str, log: Any = print) -> BenchStack:
    """`pdfbatch stack up` for the bench stack (creates the database, deploys or reuses the stack)."""
    env = cli_env(endpoint)

    def stack_up() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pdfbatch.cli", "stack", "up", "--json"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )

    done = stack_up()
    if done.returncode != 0 and "lacks the outputs" in done.stderr:
        # LocalStack's CloudFormation sometimes ends an update of a changed template UPDATE_COMPLETE with
        # no outputs at all; the bench stack holds nothing worth keeping, so recreate it.
        log("  the bench stack came out of its update without outputs; recreating it")
        _delete_stack(endpoint)
        done = stack_up()
    if done.returncode != 0:
        raise RuntimeError(f"pdfbatch stack up failed:\n{done.stderr[-3000:]}")
    for line in done.stderr.strip().splitlines()[-1:]:
        log(f"  {line.strip()}")
    return BenchStack(endpoint, json.loads(done.stdout), env)


def _delete_stack(endpoint: str, timeout: float = 120) -> None:
    cfn = boto3.client(
        "cloudformation",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    cfn.delete_stack(StackName=STACK)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stacks = [s for s in cfn.list_stacks()["StackSummaries"] if s["StackName"] == STACK]
        if all(s["StackStatus"] == "DELETE_COMPLETE" for s in stacks):
            return
        time.sleep(1)
    raise RuntimeError(f"stack {STACK} was not deleted within {timeout:.0f} s")


class Lease:
    """LocalStack started if needed and held for the run; stopped after only if this run started it."""

    def __init__(self) -> None:
        self.endpoint = ""

    def __enter__(self) -> Lease:
        handle = localstack.start(ROOT, lease=True)
        self.endpoint = handle.endpoint
        return self

    def __exit__(self, *exc: object) -> None:
        localstack.release(ROOT)


def chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """``items`` in lists of ``size``."""
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
