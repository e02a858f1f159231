"""Issue 26's figures across commits: what the pixel check (pdf.pixels.confirm) costs and refuses.

(In-process tallies of one tree, for section 1's rows, are bench/pixel_tally.py.)

`python -m bench.pixels REV [REV ...]` compares trees in one run (CPU time per read swells with other
jobs' load on a shared machine, so figures of separate runs do not compare): section 1's résumés and
the labelled corpus scanned by each commit's src/pdfbatch and by the working tree, each in its own
process, rounds interleaved; it prints the pixel check's CPU per linked document, the refusals, and
each tree's ratio to the first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import labelled

# One tree's side: every document of each part scanned in this process, the pixel check's CPU per
# linked document (median, mean) and the owners' addresses it refused.
_WORKER = r"""
import json, statistics, sys, time
from pathlib import Path
from pdfbatch import pdf
from pdfbatch.pdf import pixels
folder = Path(sys.argv[1])
spent, refused, checked = [0.0], [], [0]
original = pixels.confirm
def confirm(document, emails, shown):
    t = time.process_time()
    try:
        checks = original(document, emails, shown)
    finally:
        spent[0] += time.process_time() - t
    for c in checks:
        if c.email in shown:
            checked[0] += 1
            if c.seen.value not in ("read", "like"):
                refused.append(c.email)
    return checks
pixels.confirm = confirm
out = {}
for part in ("résumés", "labelled"):
    users = json.loads((folder / part / "users.json").read_text())
    def scan(name, emails):
        rows = [type("R", (), {"id": n, "email": e})() for n, e in enumerate(emails)]
        return pdf.scan((folder / part / name).read_bytes(), lambda c: [r for r in rows if r.email in c],
                        max_pages=5, budget_seconds=60, isolate=False, clock=time.process_time)
    first, (emails, _) = next(iter(users.items()))
    scan(first, emails)  # warm: fonts, models
    refused.clear()
    checked[0] = 0
    ms, linked = [], 0
    for name, (emails, owner) in users.items():
        spent[0] = 0.0
        if scan(name, emails).email == owner and owner is not None:
            linked += 1
            ms.append(spent[0] * 1000)
    out[part] = {"median": statistics.median(ms), "mean": statistics.mean(ms), "linked": linked,
                 "checked": checked[0], "refused": list(refused)}
print(json.dumps(out))
"""


def compare(revisions: Sequence[str], rounds: int = 3) -> None:
    """Print the pixel check's figures for each of ``revisions`` and the working tree, in one run."""
    from bench.extraction import corpus

    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        sides = {}
        for rev in revisions:
            archive = subprocess.run(
                ["git", "-C", str(root), "archive", rev, "src/pdfbatch"], check=True, capture_output=True
            ).stdout
            (base / rev).mkdir()
            subprocess.run(["tar", "-x", "-C", str(base / rev)], input=archive, check=True)
            sides[rev] = str(base / rev / "src")
        sides["working tree"] = str(root / "src")
        docs = base / "docs"
        parts: dict[str, list[tuple[str, bytes, list[str], str | None]]] = {
            "résumés": [
                (f"{i}.pdf", d.data, [d.email], d.email) for i, d in enumerate(corpus(100, 1, 3)["résumé"])
            ],
            "labelled": [(f"{s.name}.pdf", data, list(s.users), s.expected) for s, data in labelled.corpus()],
        }
        for part, items in parts.items():
            (docs / part).mkdir(parents=True)
            for name, data, _, _ in items:
                (docs / part / name).write_bytes(data)
            users = {name: (emails, owner) for name, _, emails, owner in items}
            (docs / part / "users.json").write_text(json.dumps(users))
        runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
        for round_ in range(rounds):
            for side, path in sides.items():
                run = subprocess.run(
                    [sys.executable, "-c", _WORKER, str(docs)],
                    check=True,
                    capture_output=True,
                    text=True,
                    env={"PYTHONPATH": path, "PATH": "/usr/bin:/bin", "OMP_THREAD_LIMIT": "1"},
                )
                runs[side].append(json.loads(run.stdout))
                print(f"round {round_ + 1}/{rounds}: {side} done", file=sys.stderr, flush=True)
    first = next(iter(sides))
    for part in parts:
        print(f"{part}: pixel check CPU per linked document (median of {rounds} rounds' medians and means)")
        median = {s: statistics.median(r[part]["median"] for r in runs[s]) for s in sides}
        mean = {s: statistics.median(r[part]["mean"] for r in runs[s]) for s in sides}
        for side in sides:
            refused = [e for r in runs[side] for e in r[part]["refused"]]
            checked = sum(r[part]["checked"] for r in runs[side])
            print(
                f"  {side:>12}: median {median[side]:5.1f} ms ({median[side] / median[first]:.2f}x),"
                f" mean {mean[side]:5.1f} ms ({mean[side] / mean[first]:.2f}x);"
                f" linked {runs[side][0][part]['linked']} of {len(parts[part])};"
                f" refused {len(refused)} of {checked} checked"
                + (f" ({', '.join(sorted(set(refused)))})" if refused else "")
            )


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of `python -m bench.pixels`."""
    parser = argparse.ArgumentParser(prog="python -m bench.pixels", description=__doc__.split("\n\n")[2])
    parser.add_argument("revisions", nargs="+", help="commits to compare with the working tree, first = base")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    compare(args.revisions, args.rounds)


if __name__ == "__main__":
    main()
