"""The soak's faults: a plan drawn from the seed, and the injectors that carry it out on the local stack.

The plan (kind, time, value) is a pure function of the seed and the profile, so `make soak SEED=...` replays
the same faults at the same offsets; what they hit (which invocation a kill lands in, which query a cut
interrupts) depends on timing and is not reproducible to the millisecond.

Kinds:
- ``kill_worker`` / ``kill_unzip``: SIGKILL the process group of a live function process of the stack,
  found by its environment (AWS_LAMBDA_FUNCTION_NAME): as Lambda's OOM killer or a host failure would.
- ``cut_mysql`` / ``cut_redis``: abort every live connection through the proxy.
- ``refuse_mysql`` / ``refuse_redis``: cut, and refuse connections for ``value`` seconds (an outage).
- ``slow_mysql`` / ``slow_redis``: 50-300 ms on every chunk for ``value`` seconds.
- ``dup_notification``: invoke unzip again (asynchronously, as S3 does) with the event of an upload.
- ``dup_messages``: send copies of ``value`` work messages of already staged entries.
- ``drop`` / ``drop_again``: put the same ZIP into uploads/ twice (the AWS CLI way).
- ``reused_post`` / ``reused_again``: upload through a presigned POST, then post another ZIP through it.
- ``odd_drops``: put a ZIP under a name the notification rules once missed (``.Zip``) and an object that
  is no ZIP at all into uploads/ (issue 24, case 5: each must get a batch, the second FAILED).
- ``flood``: a third tenant POSTs /batches without uploading, up to its limit of waiting batches and
  ``value`` more: those must be 429 with Retry-After (issue 24, case 3).
- ``slow_receiver`` / ``silent_receiver``: a batch of the second tenant whose callback receiver sends its
  answer a byte every 2 s, or never answers; ``honest_callback``: a batch of the honest tenant, whose
  callback must arrive within the soak's bound of its batch ending (issue 24, case 2). These three come
  after every connection fault is over (``quiet``), so that what an honest callback waits for is the
  other receivers and the flood, never an outage of MySQL or Redis.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tools import localstack

from soak.proxy import ChaosProxy

# LocalStack's S3 notifications carry this one sequencer whatever the object (localstack/services/s3/
# notifications.py): a re-sent event is the same event only with it.
LOCALSTACK_SEQUENCER = "0055AED6DCD90281E5"


@dataclass(frozen=True)
class Fault:
    """One planned fault: what, when (seconds after the big upload) and how much."""

    at: float
    kind: str
    value: float = 0.0


@dataclass(frozen=True)
class Profile:
    """How often each fault happens within the window (mean seconds between two; 0: never)."""

    window: float
    every: dict[str, float]
    kill_unzip: float  # probability of one unzip kill while the big ZIP is being unpacked
    dup_notifications: int
    outage: tuple[float, float]  # refuse_* lasts this long (uniform)
    slow: tuple[float, float]  # slow_* lasts this long
    copies: int  # messages per dup_messages
    receivers: tuple[int, int, int] = (0, 0, 0)  # batches whose receiver trickles, is silent, is honest
    flood_beyond: int = 0  # POST /batches past the limit of waiting batches (0: no flood)


PROFILES = {
    "full": Profile(
        window=150.0,
        every={
            "kill_worker": 8.0,
            "cut_mysql": 20.0,
            "cut_redis": 20.0,
            "refuse_mysql": 45.0,
            "refuse_redis": 45.0,
            "slow_mysql": 40.0,
            "slow_redis": 40.0,
            "dup_messages": 15.0,
        },
        kill_unzip=0.6,
        dup_notifications=3,
        outage=(1.0, 4.0),
        slow=(3.0, 8.0),
        copies=10,
        receivers=(4, 2, 3),
        flood_beyond=5,
    ),
    "short": Profile(
        window=35.0,
        every={
            "kill_worker": 12.0,
            "cut_mysql": 15.0,
            "cut_redis": 15.0,
            "refuse_mysql": 35.0,
            "refuse_redis": 35.0,
            "dup_messages": 15.0,
        },
        kill_unzip=0.0,
        dup_notifications=2,
        outage=(1.0, 2.0),
        slow=(2.0, 4.0),
        copies=5,
        receivers=(2, 1, 2),
        flood_beyond=3,
    ),
}


def plan(seed: int, profile: Profile) -> list[Fault]:
    """The faults of one run, in time order: a Poisson process per kind, plus the uploads."""
    rng = random.Random(f"faults-{seed}")
    w = profile.window
    faults: list[Fault] = []
    for kind, mean in sorted(profile.every.items()):
        t = rng.expovariate(1 / mean)
        while t < w:
            value = 0.0
            if kind.startswith("refuse_"):
                value = rng.uniform(*profile.outage)
            elif kind.startswith("slow_"):
                value = rng.uniform(*profile.slow)
            elif kind == "dup_messages":
                value = profile.copies
            faults.append(Fault(round(t, 2), kind, round(value, 2)))
            t += rng.expovariate(1 / mean)
    if rng.random() < profile.kill_unzip:
        faults.append(Fault(round(rng.uniform(1.5, 8.0), 2), "kill_unzip"))
    # one duplicate notification early (unzip may still be at work), the others anywhere
    at = [rng.uniform(0.5, 3.0)] + [rng.uniform(0, w) for _ in range(profile.dup_notifications - 1)]
    faults += [Fault(round(t, 2), "dup_notification") for t in at[: profile.dup_notifications]]
    drop = rng.uniform(0, w * 0.1)
    reused = rng.uniform(0, w * 0.1)
    faults += [
        Fault(round(drop, 2), "drop"),
        Fault(round(drop + rng.uniform(w * 0.1, w * 0.4), 2), "drop_again"),
        Fault(round(reused, 2), "reused_post"),
        Fault(round(reused + rng.uniform(0.3, w * 0.2), 2), "reused_again"),
    ]
    if profile.flood_beyond:
        faults.append(Fault(round(rng.uniform(0, w * 0.3), 2), "flood", profile.flood_beyond))
        faults.append(Fault(round(rng.uniform(0, w * 0.5), 2), "odd_drops"))
    faults += receiver_faults(rng, profile, quiet(faults, w))
    return sorted(faults, key=lambda f: (f.at, f.kind))


# The connection faults whose value is how long they last.
TIMED = ("refuse_mysql", "refuse_redis", "slow_mysql", "slow_redis")


def quiet(faults: list[Fault], window: float) -> float:
    """When the last connection fault is over (the window's end at the earliest), plus 2 s."""
    ends = [f.at + f.value for f in faults if f.kind in TIMED]
    return round(max([window, *ends]) + 2.0, 2)


def receiver_faults(rng: random.Random, profile: Profile, at: float) -> list[Fault]:
    """The slow and silent receivers' batches first (their deliveries queued), the honest ones among and
    after them, within a few seconds."""
    trickle, silent, honest = profile.receivers
    out = [Fault(round(at + rng.uniform(0, 1.0), 2), "slow_receiver") for _ in range(trickle)]
    out += [Fault(round(at + rng.uniform(0, 1.0), 2), "silent_receiver") for _ in range(silent)]
    out += [Fault(round(at + 0.5 + rng.uniform(0, 3.0), 2), "honest_callback") for _ in range(honest)]
    return out


# --- function processes ----------------------------------------------------------------------------------


def function_processes(function_name: str) -> list[int]:
    """Pids of the execution environments of ``function_name`` (each leads its own process group)."""
    found = []
    for pid, env in localstack.lambda_processes():
        if env["AWS_LAMBDA_FUNCTION_NAME"] != function_name:
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(stat[2]) == pid and stat[0] != "Z":
            found.append(pid)
    return sorted(found)


def kill_group(pid: int) -> bool:
    """SIGKILL the process group ``pid`` leads (the handler's own children die with it)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


# --- the injectors ---------------------------------------------------------------------------------------


@dataclass
class Upload:
    """An upload S3 accepted: its key and its entries (what the oracle expects a batch to hold)."""

    key: str
    entries: list[tuple[str, bytes]]
    at: float


@dataclass
class Targets:
    """What the injectors act on: the stack's names, clients, the proxy and the uploads to make."""

    stack_outputs: dict[str, str]
    client: Callable[[str], Any]  # boto3 client by service, on LocalStack
    proxy: ChaosProxy
    big_key: str
    big_batch: str
    drop_key: str
    drop_zip: tuple[bytes, list[tuple[str, bytes]]]
    reused_zips: tuple[tuple[bytes, list[tuple[str, bytes]]], tuple[bytes, list[tuple[str, bytes]]]]
    post: Callable[[bytes], tuple[str, str]]  # upload a ZIP through a new presigned POST: (key, batch id)
    post_again: Callable[[bytes], bool]  # the same presigned POST, another ZIP: accepted?
    # a tenant's small batch with a callback: (role "slow" / "silent" / "honest") -> (key, batch id, entries)
    callback_batch: Callable[[str], tuple[str, str, list[tuple[str, bytes]]]] | None = None
    flood: Callable[[int], Flood] | None = None  # the empty-batch flood, ``value`` past the limit
    odd_zip: tuple[bytes, list[tuple[str, bytes]]] | None = None  # dropped as uploads/Soak-{seed}.Zip


@dataclass
class Flood:
    """What the empty-batch flood got: the batches created, and each answer past the limit."""

    created: list[str] = field(default_factory=list)
    beyond: list[tuple[int | None, str | None]] = field(default_factory=list)  # (HTTP status, Retry-After)
    errors: int = 0  # 5xx answers, tried again


@dataclass
class Injector:
    """Carries out a plan against Targets, on its own thread; counts what it did per kind."""

    targets: Targets
    seed: int
    log: Callable[[str], None] = print
    done: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    uploads: list[Upload] = field(default_factory=list)
    reused_batch: str = ""
    callback_batches: dict[str, str] = field(default_factory=dict)  # batch id -> receiver role
    flooded: Flood | None = None
    errors: list[str] = field(default_factory=list)
    _rng: random.Random = field(init=False)
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _side: list[threading.Thread] = field(default_factory=list)  # faults that run beside the plan (flood)

    def __post_init__(self) -> None:
        self._rng = random.Random(f"targets-{self.seed}")

    def start(self, faults: list[Fault], t0: float) -> None:
        """Run ``faults`` in the background, each at t0 + its offset."""
        self._thread = threading.Thread(target=self._run, args=(faults, t0), name="chaos", daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the plan to end; True when it did."""
        assert self._thread is not None
        self._thread.join(timeout)
        for side in list(self._side):
            side.join(0.0 if self._thread.is_alive() else timeout)
        return not self._thread.is_alive() and not any(t.is_alive() for t in self._side)

    def stop(self) -> None:
        """Skip what is left of the plan."""
        self._stop.set()

    def _run(self, faults: list[Fault], t0: float) -> None:
        for fault in faults:
            if self._stop.wait(max(0.0, t0 + fault.at - time.monotonic())):
                return
            try:
                ok = getattr(self, fault.kind)(fault)
            except Exception as exc:  # a fault that cannot be injected is reported, never fatal
                self.errors.append(f"{fault.kind} at {fault.at}s: {type(exc).__name__}: {exc}"[:300])
                ok = False
            (self.done if ok else self.skipped)[fault.kind] += 1

    # --- processes

    def _kill(self, function: str) -> bool:
        pids = function_processes(self.targets.stack_outputs[function])
        return bool(pids) and kill_group(self._rng.choice(pids))

    def kill_worker(self, fault: Fault) -> bool:
        """SIGKILL one process_pdf environment (busy or idle, whichever the draw picks)."""
        return self._kill("ProcessPdfFunctionName")

    def kill_unzip(self, fault: Fault) -> bool:
        """SIGKILL unzip while it unpacks (S3's async retry runs it again)."""
        return self._kill("UnzipFunctionName")

    # --- the proxy

    def cut_mysql(self, fault: Fault) -> bool:
        """Abort every live MySQL connection."""
        self.targets.proxy.cut("mysql")
        return True

    def cut_redis(self, fault: Fault) -> bool:
        """Abort every live Redis connection."""
        self.targets.proxy.cut("redis")
        return True

    def refuse_mysql(self, fault: Fault) -> bool:
        """MySQL down for ``value`` seconds."""
        self.targets.proxy.refuse("mysql", fault.value)
        return True

    def refuse_redis(self, fault: Fault) -> bool:
        """Redis down for ``value`` seconds."""
        self.targets.proxy.refuse("redis", fault.value)
        return True

    def slow_mysql(self, fault: Fault) -> bool:
        """MySQL slow for ``value`` seconds."""
        self.targets.proxy.latency("mysql", self._rng.uniform(0.05, 0.3), fault.value)
        return True

    def slow_redis(self, fault: Fault) -> bool:
        """Redis slow for ``value`` seconds."""
        self.targets.proxy.latency("redis", self._rng.uniform(0.05, 0.3), fault.value)
        return True

    # --- duplicates

    def dup_notification(self, fault: Fault) -> bool:
        """Invoke unzip with the S3 event of one of the uploads so far, as S3 would deliver it again."""
        keys = [self.targets.big_key, *{u.key for u in self.uploads}]
        key = self._rng.choice(sorted(keys))
        event = s3_event(self.targets.client("s3"), self.targets.stack_outputs["BucketName"], key)
        self.targets.client("lambda").invoke(
            FunctionName=self.targets.stack_outputs["UnzipFunctionName"],
            InvocationType="Event",
            Payload=json.dumps(event).encode(),
        )
        return True

    def dup_messages(self, fault: Fault) -> bool:
        """Send copies of work messages whose entries are staged (their original was sent after staging)."""
        bucket = self.targets.stack_outputs["BucketName"]
        batch = self.targets.big_batch
        listed = self.targets.client("s3").list_objects_v2(Bucket=bucket, Prefix=f"staging/{batch}/")
        staged = sorted(o["Key"] for o in listed.get("Contents", []))
        if not staged:
            return False
        picked = self._rng.sample(staged, min(int(fault.value), len(staged), 10))
        bodies = [
            {"batchId": batch, "index": int(k.rsplit("/", 1)[1].split(".")[0]), "key": k, "bucket": bucket}
            for k in picked
        ]
        self.targets.client("sqs").send_message_batch(
            QueueUrl=self.targets.stack_outputs["QueueUrl"],
            Entries=[{"Id": str(i), "MessageBody": json.dumps(b)} for i, b in enumerate(bodies)],
        )
        return True

    # --- uploads

    def drop(self, fault: Fault) -> bool:
        """Put the small ZIP into uploads/ (as `aws s3 cp` does)."""
        data, entries = self.targets.drop_zip
        self.targets.client("s3").put_object(
            Bucket=self.targets.stack_outputs["BucketName"], Key=self.targets.drop_key, Body=data
        )
        self.uploads.append(Upload(self.targets.drop_key, entries, fault.at))
        return True

    def drop_again(self, fault: Fault) -> bool:
        """The same ZIP to the same key once more."""
        return self.drop(fault)

    def reused_post(self, fault: Fault) -> bool:
        """POST /batches and upload the first small ZIP through its presigned POST."""
        data, entries = self.targets.reused_zips[0]
        key, self.reused_batch = self.targets.post(data)
        self.uploads.append(Upload(key, entries, fault.at))
        return True

    def reused_again(self, fault: Fault) -> bool:
        """Post another ZIP through the same presigned POST (still valid: it is not single use)."""
        if not self.reused_batch:
            return False
        data, entries = self.targets.reused_zips[1]
        if not self.targets.post_again(data):
            return False  # refused by S3: nothing was uploaded, nothing is expected
        self.uploads.append(Upload(f"uploads/{self.reused_batch}.zip", entries, fault.at))
        return True

    def odd_drops(self, fault: Fault) -> bool:
        """A ZIP named ``.Zip`` and an object that is no ZIP, straight into uploads/."""
        if self.targets.odd_zip is None:
            return False
        data, entries = self.targets.odd_zip
        s3, bucket = self.targets.client("s3"), self.targets.stack_outputs["BucketName"]
        s3.put_object(Bucket=bucket, Key=f"uploads/Soak-{self.seed}.Zip", Body=data)
        self.uploads.append(Upload(f"uploads/Soak-{self.seed}.Zip", entries, fault.at))
        s3.put_object(Bucket=bucket, Key=f"uploads/soak-{self.seed}-notes", Body=b"not a zip\n" * 10)
        self.uploads.append(Upload(f"uploads/soak-{self.seed}-notes", [], fault.at))
        return True

    # --- tenants

    def flood(self, fault: Fault) -> bool:
        """The flooding tenant's POST /batches, never uploaded to, up to its limit and ``value`` more."""
        flood = self.targets.flood
        if flood is None:
            return False

        def run() -> None:  # beside the plan: its POSTs must not delay the faults after it
            try:
                self.flooded = flood(int(fault.value))
            except Exception as exc:  # reported, never fatal
                self.errors.append(f"flood at {fault.at}s: {type(exc).__name__}: {exc}"[:300])

        side = threading.Thread(target=run, name="flood", daemon=True)
        self._side.append(side)
        side.start()
        return True

    def _callback_batch(self, role: str, fault: Fault) -> bool:
        if self.targets.callback_batch is None:
            return False
        key, batch_id, entries = self.targets.callback_batch(role)
        self.callback_batches[batch_id] = role
        self.uploads.append(Upload(key, entries, fault.at))
        return True

    def slow_receiver(self, fault: Fault) -> bool:
        """A batch whose callback receiver answers a byte every 2 s."""
        return self._callback_batch("slow", fault)

    def silent_receiver(self, fault: Fault) -> bool:
        """A batch whose callback receiver never answers."""
        return self._callback_batch("silent", fault)

    def honest_callback(self, fault: Fault) -> bool:
        """A batch of the honest tenant, whose receiver answers at once."""
        return self._callback_batch("honest", fault)


def s3_event(s3: Any, bucket: str, key: str) -> dict[str, Any]:
    """The ObjectCreated event S3 (LocalStack) sent for the object now at ``key``."""
    head = s3.head_object(Bucket=bucket, Key=key)
    obj: dict[str, Any] = {
        "key": urllib.parse.quote_plus(key, safe="/"),
        "size": int(head["ContentLength"]),
        "eTag": str(head.get("ETag", "")).strip('"'),
        "sequencer": LOCALSTACK_SEQUENCER,
    }
    if head.get("VersionId") and head["VersionId"] != "null":
        obj["versionId"] = head["VersionId"]
    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "awsRegion": "us-east-1",
                "eventTime": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "eventName": "ObjectCreated:Put",
                "s3": {
                    "s3SchemaVersion": "1.0",
                    "configurationId": "soak-duplicate",
                    "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
                    "object": obj,
                },
            }
        ]
    }
