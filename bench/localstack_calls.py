"""Where LocalStack's CPU per PDF goes (issue 15's "LocalStack CPU per PDF <= 8 ms" row), in one run.

`python -m bench.localstack_calls [--rounds N]`:
1. The 320-PDF core-font batch of section 7 on the bench stack: LocalStack's CPU per PDF, the calls its
   request log shows per PDF, and process_pdf's invocations per PDF (their REPORT lines).
2. Each kind of call a file costs, alone, from five threads as process_pdf's five environments send them:
   LocalStack's CPU per call, and this process's CPU per call (botocore building, signing and parsing it,
   which a function pays on AWS too). The kinds are interleaved over rounds; medians.
3. What the calls explain: each logged kind's calls per PDF times its measured price, plus the SQS
   receive and delete LocalStack's own poller makes per invocation (not in its request log). The rest is
   the Lambda service inside LocalStack (the invoke, the runtime API's calls, storing the log lines),
   given per invocation.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

from bench.report import Row, publish

RESULTS = Path(__file__).resolve().parent / "results"
THREADS = 5  # process_pdf's reserved concurrency
BUCKET = "pdfbatch-bench-calls"
QUEUE = "pdfbatch-bench-calls"
BATCH = 5  # process_pdf's SQS batch size: the poller receives and deletes five messages at a time


@dataclass(frozen=True)
class Price:
    """One kind of call: LocalStack's and the client's CPU per call (ms)."""

    kind: str
    localstack_ms: float
    client_ms: float


def _fan(n: int, one: Callable[[int], None]) -> None:
    """Call ``one(i)`` for i in range(n) from THREADS threads."""
    counter = iter(range(n))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            one(i)

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


class Calls:
    """Each kind of call process_pdf's files cost, on a bucket and queue of their own."""

    def __init__(self, client: Callable[[str], Any], body: bytes, n: int) -> None:
        self.s3, self.sqs, self.body, self.n = client("s3"), client("sqs"), body, n
        self.s3.create_bucket(Bucket=BUCKET)
        self.queue = self.sqs.create_queue(QueueName=QUEUE)["QueueUrl"]
        self.round = 0

    def _key(self, i: int, what: str = "staged") -> str:
        return f"{what}/{self.round}/{i:06d}.pdf"

    def kinds(self) -> dict[str, tuple[int, Callable[[], None]]]:
        """kind -> (calls made, the function that makes them); in the order a file meets them."""
        n = self.n
        return {
            "s3.PutObject": (
                n,
                lambda: _fan(
                    n, lambda i: self.s3.put_object(Bucket=BUCKET, Key=self._key(i), Body=self.body)
                ),
            ),
            "s3.GetObject": (
                n,
                lambda: _fan(n, lambda i: self.s3.get_object(Bucket=BUCKET, Key=self._key(i))["Body"].read()),
            ),
            "s3.CopyObject": (
                n,
                lambda: _fan(
                    n,
                    lambda i: self.s3.copy_object(
                        Bucket=BUCKET,
                        Key=self._key(i, "pdfs"),
                        CopySource={"Bucket": BUCKET, "Key": self._key(i)},
                    ),
                ),
            ),
            "s3.DeleteObject": (
                n,
                lambda: _fan(n, lambda i: self.s3.delete_object(Bucket=BUCKET, Key=self._key(i))),
            ),
            "s3.DeleteObjects (5 keys)": (
                n // BATCH,
                lambda: _fan(
                    n // BATCH,
                    lambda i: self.s3.delete_objects(
                        Bucket=BUCKET,
                        Delete={
                            "Objects": [{"Key": self._key(i * BATCH + j, "pdfs")} for j in range(BATCH)],
                            "Quiet": True,
                        },
                    ),
                ),
            ),
            "sqs.SendMessageBatch (10 messages)": (n // 10, lambda: _fan(n // 10, self._send)),
            "sqs.ReceiveMessage + DeleteMessageBatch (5 messages)": (
                n // BATCH,
                lambda: _fan(n // BATCH, self._receive),
            ),
        }

    def _send(self, i: int) -> None:
        entries = [
            {"Id": str(j), "MessageBody": f'{{"batchId":"b","entry":{i * 10 + j}}}'} for j in range(10)
        ]
        self.sqs.send_message_batch(QueueUrl=self.queue, Entries=entries)

    def _receive(self, _: int) -> None:
        got = self.sqs.receive_message(QueueUrl=self.queue, MaxNumberOfMessages=BATCH, WaitTimeSeconds=1)
        messages = got.get("Messages", [])
        if messages:
            self.sqs.delete_message_batch(
                QueueUrl=self.queue,
                Entries=[{"Id": str(k), "ReceiptHandle": m["ReceiptHandle"]} for k, m in enumerate(messages)],
            )

    def close(self) -> None:
        """Empty and remove the bucket and queue."""
        self.sqs.delete_queue(QueueUrl=self.queue)
        paginator = self.s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=BUCKET):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            for start in range(0, len(keys), 1000):
                self.s3.delete_objects(Bucket=BUCKET, Delete={"Objects": keys[start : start + 1000]})
        self.s3.delete_bucket(Bucket=BUCKET)


def prices(calls: Calls, localstack_cpu: Callable[[], float], rounds: int) -> list[Price]:
    """Median CPU per call of each kind over ``rounds`` (kinds in file order within a round)."""
    seen: dict[str, list[tuple[float, float]]] = {}
    for r in range(rounds):
        calls.round = r
        for kind, (made, run) in calls.kinds().items():
            ls0, me0 = localstack_cpu(), time.process_time()
            run()
            ls1, me1 = localstack_cpu(), time.process_time()
            seen.setdefault(kind, []).append((1000 * (ls1 - ls0) / made, 1000 * (me1 - me0) / made))
    return [Price(kind, median(ls for ls, _ in v), median(me for _, me in v)) for kind, v in seen.items()]


@dataclass(frozen=True)
class Batch:
    """The batch's side: LocalStack CPU per PDF, logged calls per PDF, invocations per PDF."""

    files: int
    localstack_ms: float
    functions_ms: float
    calls_per_pdf: dict[str, float]
    invocations_per_pdf: float


def _price_of(priced: Sequence[Price], logged: str) -> Price | None:
    """The measured price of a logged kind ("s3.DeleteObjects" is measured as "s3.DeleteObjects (5 keys)")."""
    return next((p for p in priced if p.kind.split(" ")[0] == logged), None)


def explain(batch: Batch, priced: Sequence[Price]) -> tuple[float, dict[str, float]]:
    """LocalStack ms per PDF the calls explain, and each part of it."""
    parts: dict[str, float] = {}
    for kind, per_pdf in batch.calls_per_pdf.items():
        price = _price_of(priced, kind)
        if price is not None:
            parts[kind] = per_pdf * price.localstack_ms
    poll = _price_of(priced, "sqs.ReceiveMessage")
    if poll is not None:
        parts["the poller's receive + delete (not logged)"] = batch.invocations_per_pdf * poll.localstack_ms
    return sum(parts.values()), parts


def client_ms(batch: Batch, priced: Sequence[Price]) -> float:
    """The functions' botocore CPU per PDF for the calls they send (all but the poller's)."""
    total = 0.0
    for kind, per_pdf in batch.calls_per_pdf.items():
        price = _price_of(priced, kind)
        if price is not None:
            total += per_pdf * price.client_ms
    return total


# What no design that stages each file and links it by a server-side copy can do without: unzip's PUT
# of the staged copy, process_pdf's GET of it and its COPY to the final key.
FLOOR = ("s3.PutObject", "s3.GetObject", "s3.CopyObject")


def measure_batch(stack: Any, rounds: int, log: Callable[[str], None]) -> Batch:
    """Section 7's core-font batch on the bench stack, ``rounds`` measured after a warm-up; medians."""
    from bench import corpora, pipeline
    from bench import seed_compare as sc

    path, users = corpora.batch_zip(300, 20, 100)
    files = len(users)
    port = int(stack.endpoint.rsplit(":", 1)[1].split("/")[0])
    roles = sc.Roles(-1, frozenset(stack.function(f) for f in ("unzip", "process-pdf", "status")), port)
    log_file = sc.CallLog(sc.localstack_log(port))
    ls, fn, inv = [], [], []
    counted: Counter[str] = Counter()
    for r in range(rounds + 1):
        stack.seed_users(users)
        before = sc.cpu_snapshot(roles)
        log_file.mark()
        run = pipeline.run_batch(stack, path, files)
        time.sleep(2)  # the last invocation's tail: its log lines, the poller's delete
        used = sc.cpu_delta(before, sc.cpu_snapshot(roles))
        seen = log_file.calls() or Counter()
        invocations = len(pipeline.reports_for(stack, "process-pdf", run))
        log(f"  batch {r}: {run.seconds:.2f} s, LocalStack {1000 * used[sc.LOCALSTACK] / files:.1f} ms/PDF")
        if r == 0:
            continue  # warm-up: environments start
        ls.append(1000 * used[sc.LOCALSTACK] / files)
        fn.append(1000 * used[sc.FUNCTIONS] / files)
        inv.append(invocations / files)
        counted.update(seen)
    per_pdf = {k: v / (files * rounds) for k, v in counted.items() if not k.startswith("s3.PostObject")}
    return Batch(files, median(ls), median(fn), per_pdf, median(inv))


def run(rounds: int, calls_n: int, log: Callable[[str], None]) -> tuple[list[Row], list[str]]:
    """The rows and notes (LocalStack started, the bench stack deployed, both left as found)."""
    from bench import corpora
    from bench import seed_compare as sc
    from bench import stack as st

    rows: list[Row] = []
    with st.Lease() as lease:
        st.reset_state()
        stack = st.up(lease.endpoint, log)
        batch = measure_batch(stack, rounds, log)
        port = int(stack.endpoint.rsplit(":", 1)[1].split("/")[0])
        roles = sc.Roles(-1, frozenset(), port)

        def localstack_cpu() -> float:
            return sum(s for role, s in sc.cpu_snapshot(roles).values() if role == sc.LOCALSTACK)

        path, _ = corpora.batch_zip(300, 20, 100)
        import zipfile

        with zipfile.ZipFile(path) as z:
            body = z.read(sorted(n for n in z.namelist() if n.endswith(".pdf"))[0])
        calls = Calls(stack.client, body, calls_n)
        try:
            priced = prices(calls, localstack_cpu, rounds)
        finally:
            calls.close()
    explained, parts = explain(batch, priced)
    label = "300 résumés + 20 manuals, core-font PDFs"
    for p in priced:
        rows.append(
            Row(
                "13",
                f"LocalStack CPU per call: {p.kind}",
                p.localstack_ms,
                "ms",
                note=f"client (botocore) {p.client_ms:.2f} ms per call; {THREADS} threads, "
                f"{len(body):,}-byte PDF",
            )
        )
    rows += [
        Row(
            "13",
            f"{label}: LocalStack CPU per PDF, measured",
            batch.localstack_ms,
            "ms",
            note=f"median of {rounds} batches; function processes {batch.functions_ms:.1f} ms per PDF",
        ),
        Row(
            "13",
            f"{label}: LocalStack CPU per PDF, explained by the calls",
            explained,
            "ms",
            note="; ".join(f"{k} {v:.1f}" for k, v in parts.items()) + " ms per PDF",
        ),
        Row(
            "13",
            "explained / measured",
            explained / batch.localstack_ms if batch.localstack_ms else None,
            "x",
        ),
        Row(
            "13",
            "the rest: LocalStack's Lambda service per process_pdf invocation",
            (batch.localstack_ms - explained) / batch.invocations_per_pdf
            if batch.invocations_per_pdf
            else None,
            "ms",
            note=f"{batch.invocations_per_pdf:.3f} invocations per PDF; the invoke, the runtime API, "
            "log storage",
        ),
    ]
    floor_prices = [_price_of(priced, k) for k in FLOOR]
    floor = sum(p.localstack_ms for p in floor_prices if p is not None)
    send, poll = _price_of(priced, "sqs.SendMessageBatch"), _price_of(priced, "sqs.ReceiveMessage")
    queue = (send.localstack_ms / 10 if send else 0.0) + (poll.localstack_ms / BATCH if poll else 0.0)
    rows += [
        Row(
            "13",
            "LocalStack CPU per PDF, the calls a staged file cannot avoid",
            floor + queue,
            "ms",
            note=f"stage PUT, GET and COPY {floor:.1f} ms, its message sent, received and deleted "
            f"{queue:.1f} ms: about issue 15's 8 ms before LocalStack's Lambda service adds its share "
            "per invocation (the row above); on AWS none of this is the project's CPU (its cost is "
            "latency, section 11)",
        ),
        Row(
            "13",
            "function CPU per PDF in botocore, the functions' own calls",
            client_ms(batch, priced),
            "ms",
            note="each logged call's client CPU measured here (Python 3.11, five threads), times calls per "
            "PDF; the same work on AWS, plus TLS",
        ),
    ]
    logged = ", ".join(f"{k} {v:.2f}" for k, v in sorted(batch.calls_per_pdf.items(), key=lambda kv: -kv[1]))
    notes = [
        "LocalStack calls (section 13): each file costs its unzip PutObject, process_pdf's GetObject, "
        "CopyObject and DeleteObject, a tenth of a SendMessageBatch, and a fifth of the SQS poller's receive "
        f"and delete; logged per PDF in the batch: {logged}. Every call goes through LocalStack's one Python "
        "process (its gateway's handler chain, the S3 or SQS provider, the response's serialisation), so its "
        "price is CPU here and latency on AWS, where none of it is the project's CPU.",
    ]
    return rows, notes


def main(argv: Sequence[str] | None = None) -> int:
    """Run it, print the table, write bench/results/localstack-calls.md."""
    parser = argparse.ArgumentParser(prog="python -m bench.localstack_calls", description=__doc__)
    parser.add_argument(
        "--rounds", type=int, default=3, help="measured batches, and rounds of each call kind"
    )
    parser.add_argument("--calls", type=int, default=500, help="calls of each kind per round")
    parser.add_argument("--out", type=Path, default=RESULTS / "localstack-calls.md")
    args = parser.parse_args(argv)
    started = time.monotonic()

    def log(message: str) -> None:
        print(message, flush=True)

    rows, notes = run(args.rounds, args.calls, log)
    publish(rows, args.out, title="Where LocalStack's CPU per PDF goes", notes=notes, started=started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
