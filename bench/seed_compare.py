"""Section 7: the seed system (bench/seed, Node) and pdfbatch on the same batch, in interleaved rounds.

`python -m bench.seed_compare [--quick]` runs it alone; `make bench` runs it as section 7. Both sides use
the same MariaDB, Redis and LocalStack: the seed its own database (`pdfbatch_seed`, the same users in the
same order), Redis db 8 (its BullMQ queue and counters; flushed here) and bucket; pdfbatch the bench stack.
Each side gets one unmeasured warm-up batch, then rounds alternate seed, pdfbatch, seed, ... Times: the
seed from its enqueue to its last counter update; pdfbatch from the start of the ZIP's upload to
COMPLETED (both clocks are this machine's). CPU comes from /proc per process; LocalStack's calls from
its request log.
"""

from __future__ import annotations

import argparse
import os
import re
import select
import shutil
import subprocess
import sys
import time
import uuid
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from statistics import median
from typing import Any

from bench.report import Row, Target

SEED_DIR = Path(__file__).resolve().parent / "seed"
SEED_DB = os.environ.get("PDFBATCH_SEED_DB", "pdfbatch_seed")
SEED_REDIS_DB = int(os.environ.get("PDFBATCH_SEED_REDIS_DB", "8"))
SEED_BUCKET = os.environ.get("PDFBATCH_SEED_BUCKET", "pdfbatch-seed-bench")
SEED_MYSQL_URL = f"mysql://root@127.0.0.1:3306/{SEED_DB}"
SEED_REDIS_URL = f"redis://127.0.0.1:6379/{SEED_REDIS_DB}"
RATIO_TARGET = 0.8
SEED = "seed"
OURS = "pdfbatch"
# CPU roles (cpu_snapshot): each side's own processes, LocalStack, and the databases both use.
NODE, FUNCTIONS, LOCALSTACK = "seed worker (node)", "pdfbatch functions", "LocalStack"
SHARED = ("MariaDB", "Redis")

# The batch in two kinds: PDFs as word processors write them (embedded fonts: pdf-parse's heavy case,
# section 2's corpus) and fpdf2 core-font PDFs (tiny, cheap to parse: the per-file overhead shows).
CORPORA = {"real": "word-processor PDFs", "light": "core-font PDFs"}

_AWS_CALL = re.compile(r"localstack\.request\.aws\s*:\s*AWS (\w[\w-]*\.\w+) =>")
_SHA_KEY = re.compile(r"/pdfs/\d+/([0-9a-f]{64})\.pdf$")
_NAME_KEY = re.compile(r"/pdfs/\d+/(.+)$")


# --------------------------------------------------------------------------------------------- pure parts
def ratio_of_medians(seed_seconds: Sequence[float], ours_seconds: Sequence[float]) -> float:
    """The seed's median time over pdfbatch's: above 1 means pdfbatch is faster."""
    if not seed_seconds or not ours_seconds:
        raise ValueError("each side needs at least one round")
    return median(seed_seconds) / median(ours_seconds)


def aws_calls(lines: Iterable[str]) -> Counter[str]:
    """`service.Operation` -> count, from LocalStack request-log lines (`AWS s3.PutObject => 200`)."""
    return Counter(m[1] for line in lines if (m := _AWS_CALL.search(line)))


def linked_entry(pdf_url: str, by_sha: Mapping[str, str]) -> str | None:
    """The ZIP entry a users.pdf_url points at: pdfbatch keys by content hash, the seed by entry name."""
    if m := _SHA_KEY.search(pdf_url):
        return by_sha.get(m[1])
    if m := _NAME_KEY.search(pdf_url):
        return m[1]
    return None


def mislinked(linked: Mapping[str, str | None], truth: Mapping[str, str]) -> list[str]:
    """Users linked to a file that names someone else (or to no known file). ``linked``: email -> entry."""
    return sorted(email for email, entry in linked.items() if entry is None or truth.get(entry) != email)


def per_file_ms(cpu_seconds: float, files: int) -> float:
    """CPU milliseconds per file."""
    return 1000 * cpu_seconds / files


def describe_calls(calls: Counter[str], files: int, top: int = 6) -> str:
    """`s3.GetObject 1.00, sqs.DeleteMessage 0.31, ...` per file, most frequent first."""
    return ", ".join(f"{op} {n / files:.2f}" for op, n in calls.most_common(top)) or "none"


# --------------------------------------------------------------------------------------------- processes
@dataclass(frozen=True)
class Roles:
    """Which processes belong to whom: the seed's worker pid, pdfbatch's function names, LocalStack's port."""

    seed_pid: int
    functions: frozenset[str]
    localstack_port: int


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}


def _role(roles: Roles, pid: int, cmdline: str, comm: str) -> str | None:
    if pid == roles.seed_pid:
        return NODE
    if "bootstrap.py" in cmdline:
        name = _environ(pid).get("AWS_LAMBDA_FUNCTION_NAME", "")
        return FUNCTIONS if name in roles.functions else None
    if "localstack.runtime.main" in cmdline:
        listen = _environ(pid).get("GATEWAY_LISTEN", "")
        return LOCALSTACK if listen.endswith(f":{roles.localstack_port}") else None
    if comm.startswith(("mariadbd", "mysqld")):
        return "MariaDB"
    if comm.startswith("redis-server"):
        return "Redis"
    return None


def cpu_snapshot(roles: Roles) -> dict[int, tuple[str, float]]:
    """pid -> (role, CPU seconds so far) for the processes either side runs on."""
    from bench.cpu import processes

    out: dict[int, tuple[str, float]] = {}
    for pid, cmdline, comm, seconds in processes():
        role = _role(roles, pid, cmdline, comm)
        if role is not None:
            out[pid] = (role, seconds)
    return out


def cpu_delta(
    before: Mapping[int, tuple[str, float]], after: Mapping[int, tuple[str, float]]
) -> Counter[str]:
    """CPU seconds per role between two snapshots."""
    out: Counter[str] = Counter()
    for pid, (role, seconds) in after.items():
        out[role] += max(0.0, seconds - before.get(pid, (role, 0.0))[1])
    return out


def localstack_log(port: int) -> Path | None:
    """LocalStack's request log: where the process listening on ``port`` writes its output."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        if "localstack.runtime.main" not in cmdline:
            continue
        if not _environ(int(entry.name)).get("GATEWAY_LISTEN", "").endswith(f":{port}"):
            continue
        try:
            target = Path(os.readlink(entry / "fd" / "1"))
        except OSError:
            return None
        return target if target.is_file() else None
    return None


class CallLog:
    """The LocalStack request-log lines written between mark() and calls()."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.offset = 0

    def mark(self) -> None:
        """Start counting from here."""
        self.offset = self.path.stat().st_size if self.path else 0

    def calls(self) -> Counter[str] | None:
        """The AWS calls logged since mark(); None when the log cannot be read."""
        if self.path is None:
            return None
        time.sleep(0.5)  # let the last lines reach the file
        with self.path.open("rb") as f:
            f.seek(self.offset)
            text = f.read().decode("utf-8", "replace")
        return aws_calls(text.splitlines())


# --------------------------------------------------------------------------------------------- the seed
def ensure_installed(log: Callable[[str], None]) -> str:
    """`npm ci` in bench/seed when node_modules is missing or older than the lock file; node's path."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise RuntimeError("the seed system needs node and npm on PATH (Node 20 or later)")
    lock, marker = SEED_DIR / "package-lock.json", SEED_DIR / "node_modules" / ".package-lock.json"
    if not marker.exists() or marker.stat().st_mtime < lock.stat().st_mtime:
        log("  installing the seed system's packages (npm ci)")
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=SEED_DIR, check=True, timeout=600
        )
    return node


@dataclass
class Seed:
    """The seed system's worker, its database, counters and bucket."""

    endpoint: str
    node: str
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)

    def prepare(self, users: Sequence[str], client: Callable[[str], Any]) -> None:
        """A fresh users table with ``users`` (ids in the same order as the bench's), counters and bucket."""
        import pymysql
        import redis

        conn = pymysql.connect(host="127.0.0.1", user="root", autocommit=True, charset="utf8mb4")
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{SEED_DB}`")
            cur.execute(f"DROP TABLE IF EXISTS `{SEED_DB}`.users")
            cur.execute(
                f"CREATE TABLE `{SEED_DB}`.users (id INT AUTO_INCREMENT PRIMARY KEY, "
                "email VARCHAR(255) NOT NULL UNIQUE, pdf_url VARCHAR(1024) NULL) CHARACTER SET utf8mb4"
            )
            cur.executemany(f"INSERT INTO `{SEED_DB}`.users (email) VALUES (%s)", [(e,) for e in users])
        conn.close()
        redis.Redis.from_url(SEED_REDIS_URL).flushdb()
        s3 = client("s3")
        try:
            s3.head_bucket(Bucket=SEED_BUCKET)
        except s3.exceptions.ClientError:
            s3.create_bucket(Bucket=SEED_BUCKET)

    def start(self, timeout: float = 60) -> None:
        """Start the worker and wait until it listens."""
        self.env = {
            **os.environ,
            "SEED_REDIS_URL": SEED_REDIS_URL,
            "SEED_MYSQL_URL": SEED_MYSQL_URL,
            "SEED_S3_ENDPOINT": self.endpoint,
            "SEED_BUCKET": SEED_BUCKET,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as errors:
            self.process = subprocess.Popen(
                [self.node, "seed.js", "worker"],
                cwd=SEED_DIR,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
            )
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else b""
        if line.strip() != b"ready":
            self.stop()
            raise RuntimeError(f"the seed worker did not start (see {self.log_path})")

    def stop(self) -> None:
        """Stop the worker this object started."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def reset(self) -> None:
        """Every user without a PDF again."""
        import pymysql

        conn = pymysql.connect(host="127.0.0.1", user="root", database=SEED_DB, autocommit=True)
        with conn.cursor() as cur:
            cur.execute("UPDATE users SET pdf_url = NULL")
        conn.close()

    def run(self, zip_path: Path, files: int, timeout: float = 900) -> tuple[float, dict[str, str]]:
        """Enqueue the ZIP, wait for its last count; (enqueue -> done seconds, the counter hash)."""
        import redis

        assert self.process is not None
        batch_id = f"b{uuid.uuid4().hex[:12]}"
        subprocess.run(
            [self.node, "seed.js", "enqueue", batch_id, str(zip_path)],
            cwd=SEED_DIR,
            env=self.env,
            check=True,
            timeout=120,
        )
        r = redis.Redis.from_url(SEED_REDIS_URL, decode_responses=True)
        key = f"seed:batch:{batch_id}"
        deadline = time.monotonic() + timeout
        while (h := r.hgetall(key)).get("status") != "COMPLETED":
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the seed worker died (exit {self.process.returncode}); see {self.log_path}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"the seed did not finish its batch in {timeout:.0f} s: {h}")
            time.sleep(0.05)
        if int(h["processed"]) != files:
            raise RuntimeError(f"the seed processed {h['processed']} of {files} files")
        return (int(h["doneAt"]) - int(h["enqueuedAt"])) / 1000, h

    def linked(self) -> dict[str, str]:
        """email -> pdf_url of every linked user."""
        import pymysql

        conn = pymysql.connect(host="127.0.0.1", user="root", database=SEED_DB, charset="utf8mb4")
        with conn.cursor() as cur:
            cur.execute("SELECT email, pdf_url FROM users WHERE pdf_url IS NOT NULL")
            rows = {str(e): str(u) for e, u in cur.fetchall()}
        conn.close()
        return rows


# --------------------------------------------------------------------------------------------- rounds
@dataclass
class Round:
    """One measured batch of one side."""

    side: str
    seconds: float
    cpu: Counter[str]
    calls: Counter[str] | None
    linked: dict[str, str | None]  # email -> ZIP entry
    note: str = ""


@dataclass
class Comparison:
    """Every measured round, and what the figures are computed from."""

    files: int
    label: str  # the batch, e.g. "300 résumés + 20 manuals, word-processor PDFs"
    truth: dict[str, str]  # ZIP entry -> the user it names
    rounds: list[Round] = field(default_factory=list)
    foreign: Counter[str] = field(default_factory=Counter)  # calls in seed rounds the seed never makes

    @property
    def kind(self) -> str:
        """The corpus kind, the last part of the label."""
        return self.label.rsplit(", ", 1)[-1]

    def side(self, name: str) -> list[Round]:
        """The rounds of ``name``, in order."""
        return [r for r in self.rounds if r.side == name]

    def cpu_ms(self, name: str, role: str) -> float:
        """Median CPU ms per file of ``role`` over ``name``'s rounds."""
        return median(per_file_ms(r.cpu.get(role, 0.0), self.files) for r in self.side(name))

    def all_in_ms(self, name: str) -> float:
        """Median CPU ms per file of every process ``name`` runs on (its own, LocalStack, MariaDB, Redis)."""
        own = NODE if name == SEED else FUNCTIONS
        return median(
            per_file_ms(sum(r.cpu.get(k, 0.0) for k in (own, LOCALSTACK, *SHARED)), self.files)
            for r in self.side(name)
        )


def truth_of(zip_path: Path, users: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(entry -> the user it names, sha256 -> entry): the corpus writes one entry per user, in order."""
    with zipfile.ZipFile(zip_path) as zf:
        names = [n for n in zf.namelist() if n.lower().endswith(".pdf")]
        if len(names) != len(users):
            raise RuntimeError(f"{zip_path.name}: {len(names)} PDFs for {len(users)} users")
        by_sha = {sha256(zf.read(n)).hexdigest(): n for n in names}
    return dict(zip(names, users, strict=True)), by_sha


def compare(
    stack: Any, zip_path: Path, users: Sequence[str], rounds: int, log: Callable[[str], None], label: str
) -> Comparison:
    """Warm both sides up, then ``rounds`` measured rounds each, interleaved seed first."""
    from bench import pipeline
    from bench.corpora import OUT

    files = len(users)
    truth, by_sha = truth_of(zip_path, users)
    port = int(stack.endpoint.rsplit(":", 1)[1].split("/")[0])
    seed = Seed(stack.endpoint, ensure_installed(log), OUT / "seed-worker.log")
    seed.prepare(users, stack.client)
    seed.start()
    result = Comparison(files, label, truth)
    try:
        roles = Roles(
            seed.process.pid if seed.process else -1,
            frozenset(stack.function(f) for f in ("unzip", "process-pdf", "status")),
            port,
        )
        calls = CallLog(localstack_log(port))

        def seed_round(measured: bool) -> None:
            seed.reset()
            before = cpu_snapshot(roles)
            calls.mark()
            seconds, _ = seed.run(zip_path, files)
            used = cpu_delta(before, cpu_snapshot(roles))
            seen = calls.calls()
            links = {e: linked_entry(u, by_sha) for e, u in seed.linked().items()}
            log(f"  seed: {seconds:.2f} s, node {used[NODE]:.1f} CPU-s, {len(links)} linked")
            if measured:
                result.rounds.append(Round(SEED, seconds, used, seen, links))
                if seen is not None:
                    result.foreign.update({op: n for op, n in seen.items() if op != "s3.PutObject"})

        def ours_round(measured: bool) -> None:
            stack.seed_users(users)
            before = cpu_snapshot(roles)
            calls.mark()
            run = pipeline.run_batch(stack, zip_path, files)
            used = cpu_delta(before, cpu_snapshot(roles))
            seen = calls.calls()
            links = {e: linked_entry(u, by_sha) for e, u in _linked(stack).items()}
            first = pipeline.phases(stack, run).get("first PDF done")
            note = f"upload {run.upload_seconds:.2f} s" + (
                f", first PDF done at {first:.2f} s" if first is not None else ""
            )
            log(f"  pdfbatch: {run.seconds:.2f} s ({note}), {len(links)} linked")
            if measured:
                result.rounds.append(Round(OURS, run.seconds, used, seen, links, note))

        log("  warm-up: one unmeasured batch each")
        seed_round(measured=False)
        ours_round(measured=False)
        for i in range(rounds):
            log(f"  round {i + 1} of {rounds}")
            seed_round(measured=True)
            ours_round(measured=True)
    finally:
        seed.stop()
    return result


def _linked(stack: Any) -> dict[str, str]:
    conn = stack.db()
    with conn.cursor() as cur:
        cur.execute("SELECT email, pdf_url FROM users WHERE pdf_url IS NOT NULL")
        rows = {str(e): str(u) for e, u in cur.fetchall()}
    conn.close()
    return rows


# --------------------------------------------------------------------------------------------- the table
def rows_and_notes(c: Comparison) -> tuple[list[Row], list[str]]:
    """Section 7's rows (times, ratio, CPU and calls per PDF, who was linked) and its note."""
    seed, ours = c.side(SEED), c.side(OURS)
    n = c.files
    st, ot = [r.seconds for r in seed], [r.seconds for r in ours]
    pairs = ", ".join(f"{s:.2f}/{o:.2f}" for s, o in zip(st, ot, strict=True))
    rows = [
        Row(
            "7",
            f"seed system (Node rebuild), {c.label}: enqueue -> done, median",
            median(st),
            "s",
            note=f"rounds: {', '.join(f'{s:.2f}' for s in st)} s",
        ),
        Row(
            "7",
            f"pdfbatch, {c.label}, interleaved: upload -> COMPLETED, median",
            median(ot),
            "s",
            note="; ".join(f"{r.seconds:.2f} s ({r.note})" for r in ours),
        ),
        Row(
            "7",
            f"seed's end-to-end time / pdfbatch's (median), {c.kind}",
            ratio_of_medians(st, ot),
            "",
            Target(">=", RATIO_TARGET),
            f"seed/pdfbatch per round (s): {pairs}; above 1 means pdfbatch is faster",
        ),
    ]
    rows += [
        Row(
            "7",
            f"seed CPU per PDF, all in, {c.kind}",
            c.all_in_ms(SEED),
            "ms",
            note=f"median of rounds: {_cpu_note(c, SEED, (NODE, LOCALSTACK, *SHARED))}",
        ),
        Row(
            "7",
            f"pdfbatch CPU per PDF, all in, {c.kind}",
            c.all_in_ms(OURS),
            "ms",
            note=f"median of rounds: {_cpu_note(c, OURS, (FUNCTIONS, LOCALSTACK, *SHARED))}; "
            f"{c.all_in_ms(OURS) / c.all_in_ms(SEED):.2f}x the seed's",
        ),
        Row(
            "7",
            f"pdfbatch CPU per PDF: function processes, {c.kind}",
            c.cpu_ms(OURS, FUNCTIONS),
            "ms",
            Target("<=", 8, " ms"),
            "unzip, process_pdf and status, all in (their runtime too); botocore's share of it per call is "
            "python -m bench.localstack_calls (section 13)",
        ),
        Row(
            "7",
            f"pdfbatch CPU per PDF: LocalStack, {c.kind}",
            c.cpu_ms(OURS, LOCALSTACK),
            "ms",
            Target("<=", 8, " ms"),
            f"during the seed's rounds LocalStack spent {c.cpu_ms(SEED, LOCALSTACK):.1f} ms per PDF "
            "(one PutObject per linked file)",
        ),
    ]
    if all(r.calls is not None for r in c.rounds):
        seed_calls = sum((r.calls or Counter() for r in seed), Counter())
        ours_calls = sum((r.calls or Counter() for r in ours), Counter())
        rows += [
            Row(
                "7",
                f"pdfbatch: AWS calls LocalStack logged per PDF, {c.kind}",
                sum(ours_calls.values()) / (n * len(ours)),
                "",
                note=describe_calls(ours_calls, n * len(ours)),
            ),
            Row(
                "7",
                f"seed: AWS calls LocalStack logged per PDF, {c.kind}",
                seed_calls["s3.PutObject"] / (n * len(seed)),
                "",
                note="s3.PutObject (its only call)",
            ),
        ]
    seed_users = set(seed[-1].linked) if seed else set()
    ours_users = set(ours[-1].linked) if ours else set()
    seed_wrong = max(len(mislinked(r.linked, c.truth)) for r in seed)
    ours_wrong = max(len(mislinked(r.linked, c.truth)) for r in ours)
    only_seed, only_ours = len(seed_users - ours_users), len(ours_users - seed_users)
    same = (
        f"{only_seed} only by the seed, {only_ours} only by pdfbatch"
        if only_seed or only_ours
        else "same users"
    )
    rows.append(
        Row(
            "7",
            f"users linked, seed / pdfbatch (last round), {c.kind}",
            len(seed_users),
            "",
            note=f"pdfbatch {len(ours_users)}; {same}; linked to a file that names someone else: "
            f"seed {seed_wrong}, pdfbatch {ours_wrong} (worst round)",
        )
    )
    return rows, [f"{c.label}: {_where_time_goes(c)} {_foreign_note(c)}"]


ABOUT = (
    "Seed system (section 7): bench/seed is the seed's Node design rebuilt (a BullMQ job per ZIP, adm-zip, "
    "one task per PDF five at a time with p-limit, pdf-parse 1.1.1 on a Uint8Array copy, the email regex, "
    "mysql2, UPDATE ... AND pdf_url IS NULL, an S3 PUT per linked PDF, WATCH/MULTI counters in Redis). It "
    "reads the ZIP from local disk (its enqueue names a path) and parses every page of every PDF in one "
    "node thread; pdfbatch's time includes the ZIP's upload to S3. The copy matters on the core-font "
    "corpus: its ~1.2 KB résumés come out of adm-zip in Node's shared buffer pool, and pdf-parse given "
    "the Buffer itself reads the whole pool: 'bad XRef entry', no address, or a neighbour's address (the "
    "seed's links to someone else's résumé), then an unhandled rejection ends the process. "
    "Calls per PDF are those LocalStack's "
    "request log shows: its own SQS poller's receives and deletes and the Lambda invokes are internal and "
    "not logged. MariaDB and Redis serve other work on this machine too, so their CPU in the all-in "
    "figures is an upper bound."
)


def _cpu_note(c: Comparison, side: str, roles: Sequence[str]) -> str:
    return ", ".join(f"{role} {c.cpu_ms(side, role):.1f}" for role in roles) + " ms"


def _where_time_goes(c: Comparison) -> str:
    seed, ours = c.side(SEED), c.side(OURS)
    busy = median(r.cpu.get(NODE, 0.0) / r.seconds for r in seed)
    cores = median(sum(r.cpu.get(k, 0.0) for k in (FUNCTIONS, LOCALSTACK, *SHARED)) / r.seconds for r in ours)
    return (
        f"the seed's one node thread was busy {busy:.0%} of its time (one core at most); pdfbatch kept "
        f"{cores:.1f} cores busy and spent {c.all_in_ms(OURS) / c.all_in_ms(SEED):.2f}x the seed's CPU per "
        f"PDF, {c.cpu_ms(OURS, LOCALSTACK):.0f} ms of it in LocalStack."
    )


def _foreign_note(c: Comparison) -> str:
    if not c.side(SEED) or any(r.calls is None for r in c.rounds):
        return "LocalStack's request log could not be read: no call counts."
    extra = sum(c.foreign.values())
    if not extra:
        return (
            "No other client used LocalStack during the seed's rounds (its log shows only the seed's PUTs)."
        )
    return (
        f"LocalStack is shared: during the seed's rounds it also logged {extra} call(s) the seed never makes "
        f"({describe_calls(c.foreign, 1, 4)}), so its CPU and call counts include other sessions' work."
    )


def run(
    stack: Any,
    resumes: int,
    manuals: int,
    pages: int,
    rounds: int,
    log: Callable[[str], None],
    kinds: Sequence[str] = tuple(CORPORA),
) -> tuple[list[Row], list[str]]:
    """Section 7 on the bench stack, once per corpus kind: the rows and the notes."""
    from bench import corpora

    rows, notes = [], [ABOUT]
    for kind in kinds:
        make = corpora.real_batch_zip if kind == "real" else corpora.batch_zip
        path, users = make(resumes, manuals, pages)
        log(f"  {CORPORA[kind]}")
        label = f"{resumes} résumés + {manuals} manuals, {CORPORA[kind]}"
        more, text = rows_and_notes(compare(stack, path, users, rounds, log, label))
        rows += more
        notes += text
    return rows, notes


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.seed_compare [--quick] [--rounds N]`: section 7 alone, on its own lease and stack."""
    from bench import report
    from bench import stack as st
    from bench.corpora import OUT
    from bench.sizes import QUICK, RESULTS, Sizes

    parser = argparse.ArgumentParser(prog="python -m bench.seed_compare", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny corpus, one round: checks it runs")
    parser.add_argument("--rounds", type=int, default=None, help="measured rounds per side")
    parser.add_argument("--out", type=Path, default=None, help="where to write the table (markdown)")
    parser.add_argument(
        "--corpus", choices=[*CORPORA, "both"], default="both", help="which batch (default both)"
    )
    args = parser.parse_args(argv)
    kinds = tuple(CORPORA) if args.corpus == "both" else (args.corpus,)
    sizes = QUICK if args.quick else Sizes()
    rounds = args.rounds or sizes.seed_rounds
    out = args.out or (OUT / "seed-compare-quick.md" if args.quick else RESULTS / "seed-compare.md")
    started = time.monotonic()

    def log(message: str) -> None:
        print(f"[{time.monotonic() - started:4.0f} s] {message}", file=sys.stderr, flush=True)

    with st.Lease() as lease:
        log(f"LocalStack at {lease.endpoint}; deploying {st.STACK} with `pdfbatch stack up`")
        st.reset_state()
        stack = st.up(lease.endpoint, log)
        rows, notes = run(stack, sizes.resumes, sizes.manuals, sizes.manual_pages, rounds, log, kinds)
    report.publish(
        rows,
        out,
        title="pdfbatch against the seed system" + (" (--quick: tiny corpus)" if args.quick else ""),
        notes=notes,
        started=started,
    )
    log(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
