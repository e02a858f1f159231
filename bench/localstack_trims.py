"""What the local stack's two LocalStack trims save, measured in one run (issue 15).

`python -m bench.localstack_trims [--rounds N]`: the 320-PDF batch of section 2 on LocalStack as it comes
(`PDFBATCH_LOCALSTACK_UNTRIMMED=1`: AWS/SQS metrics put into its CloudWatch emulation per message, and
Twisted's parse of every multipart body) and as the local stack starts it, LocalStack restarted for each
setting (both are read at its start). CPU is read from /proc: the LocalStack process (all its threads) and
the function processes of that LocalStack (their environment names its home). The settings run one after
the other, untrimmed first, so the trimmed side never inherits a warm page cache the other lacked.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from pathlib import Path
from statistics import median

from tools import localstack

from bench import corpora, pipeline
from bench import stack as st
from bench.report import Row, publish

RESULTS = Path(__file__).resolve().parent / "results"
_TICK = os.sysconf("SC_CLK_TCK")


def _cpu(home: bytes, localstack_pid: int) -> tuple[float, float]:
    """CPU seconds so far of (LocalStack, the function processes it started)."""
    mine = b"PDFBATCH_LOCALSTACK_HOME=" + home
    ls = fn = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            cpu = (int(fields[11]) + int(fields[12])) / _TICK
            if int(entry.name) == localstack_pid:
                ls += cpu
            elif mine in (entry / "environ").read_bytes().split(b"\0"):
                fn += cpu
        except (OSError, ValueError, IndexError):
            continue  # gone, or not ours to read
    return ls, fn


def _side(untrimmed: bool, rounds: int, log: object = print) -> list[tuple[float, float, float, float]]:
    """(seconds, upload seconds, LocalStack ms per PDF, functions ms per PDF) per measured round."""
    say = log if callable(log) else print
    localstack.stop(st.ROOT)  # each setting needs a LocalStack started with it
    if untrimmed:
        os.environ[localstack.UNTRIMMED_ENV] = "1"
    else:
        os.environ.pop(localstack.UNTRIMMED_ENV, None)
    out: list[tuple[float, float, float, float]] = []
    try:
        with st.Lease() as lease:
            st.reset_state()
            stack = st.up(lease.endpoint, say)
            layout = localstack.ensure_environments(st.ROOT)
            pid = int(layout.pid_file.read_text().strip())
            home = str(layout.home).encode()
            path, users = corpora.real_batch_zip(300, 20, 100)
            stack.seed_users(users)
            pipeline.run_batch(stack, path, len(users))  # warm-up: environments start
            for _ in range(rounds):
                stack.seed_users(users)
                before = _cpu(home, pid)
                run = pipeline.run_batch(stack, path, len(users))
                time.sleep(2)  # the last invocation's tail (its log lines, the poller's delete)
                after = _cpu(home, pid)
                n = len(users)
                ls, fn = (1000 * (a - b) / n for a, b in zip(after, before, strict=True))
                out.append((run.seconds, run.upload_seconds, ls, fn))
                side = "untrimmed" if untrimmed else "trimmed"
                say(f"  {side}: {run.seconds:.2f} s, LocalStack {ls:.1f} ms/PDF")
    finally:
        os.environ.pop(localstack.UNTRIMMED_ENV, None)
        localstack.stop(st.ROOT)
    return out


def run(rounds: int = 3, log: object = print) -> list[Row]:
    """Rows: batch time, upload time and CPU per PDF on each side, and the ratios."""
    untrimmed = _side(True, rounds, log)
    trimmed = _side(False, rounds, log)
    label = "300 résumés + 20 manuals"
    rows: list[Row] = []
    names = (
        "upload -> COMPLETED",
        "ZIP upload (presigned POST)",
        "LocalStack CPU per PDF",
        "function CPU per PDF",
    )
    units = ("s", "s", "ms", "ms")
    for k, (name, unit) in enumerate(zip(names, units, strict=True)):
        a = median(r[k] for r in untrimmed)
        b = median(r[k] for r in trimmed)
        each = ", ".join(f"{r[k]:.2f}" for r in untrimmed) + " / " + ", ".join(f"{r[k]:.2f}" for r in trimmed)
        rows.append(Row("12", f"{label}: {name}, LocalStack as it comes", a, unit, note="median of rounds"))
        rows.append(
            Row("12", f"{label}: {name}, trimmed (the local stack)", b, unit, note="median of rounds")
        )
        rows.append(
            Row("12", f"{label}: {name}, trimmed / as it comes", b / a if a else None, "x", note=each)
        )
    return rows


NOTES = (
    "LocalStack trims: a py-spy profile of LocalStack during this batch put ~45% of its active CPU in "
    "PutMetricData (its SQS emulation publishes AWS/SQS metrics per message sent, received and deleted) and "
    "~23% in Twisted's parse of the presigned POST's multipart body, which LocalStack's gateway parses "
    "again. The local stack starts LocalStack with SQS_DISABLE_CLOUDWATCH_METRICS=1 and the executor "
    "plugin turns Twisted's parse off (form_parsing.py); PDFBATCH_LOCALSTACK_UNTRIMMED=1 keeps both, for "
    "this comparison. The settings run one after the other (LocalStack reads them at its start), so the "
    "ratio carries whatever else the machine did meanwhile.",
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run it, print the table, write bench/results/localstack-trims.md."""
    parser = argparse.ArgumentParser(prog="python -m bench.localstack_trims", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds per side")
    parser.add_argument("--out", type=Path, default=RESULTS / "localstack-trims.md")
    args = parser.parse_args(argv)
    started = time.monotonic()
    rows = run(args.rounds)
    publish(rows, args.out, title="LocalStack as it comes and trimmed", notes=NOTES, started=started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
