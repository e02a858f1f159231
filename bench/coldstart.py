"""Section 8: what each function costs before its first event: zip size and cold-start import time.

Three builds of the same commit (host architecture, so the handlers can be imported here):
- before: every dependency in every zip and no bytecode (the build before per-function packages);
- per-function: each zip holds only what its function imports (functions/{fn}/requirements.txt);
- after: per-function, plus CPython 3.13 bytecode: what `pdfbatch stack up` and `sam build` ship.

A cold import is `import handler` in a fresh Lambda-runtime interpreter (.venvs/lambda-runtime: CPython
3.13 with boto3 only, as on AWS) with the unpacked zip first on sys.path and `-B`, because Lambda's code
directory is read-only: without shipped bytecode every cold start compiles every module again. As root,
each probe runs at real-time priority (`chrt -f 50`: the import then gets a core even while other work
keeps both busy, as a Lambda environment has its own); runs are interleaved (round after round over
every variant) so a busy spell hits them all alike; the table gives the median, the note the minimum.

Tracing: `Tracing: Active` makes Lambda record each invocation without any code in the function, so it
adds nothing to the import; the row "status + Powertools Tracer" says what the X-Ray SDK would add if
the handlers traced their own subsegments (aws-xray-sdk, pinned by requirements/dev.lock).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from tools import localstack
from tools.build import (
    FUNCTIONS,
    build,
    compile_bytecode,
    find_python313,
    host_architecture,
    platform_args,
    project_root,
)

from bench.report import Row, Target

SECTION = "8"
NOTES = (
    "Cold start (section 8): bytecode is what pays. Per-function packages shrink the status and unzip "
    "zips to about a third (no PDF library, no cryptography), but their import time stays as it was: "
    "the handlers never imported the PDF libraries. Shipping CPython 3.13 .pyc (Lambda cannot write "
    "__pycache__ into its read-only code folder) more than halves every function's cold import. "
    "process_pdf's zip grows by its bytecode, far within Lambda's 50 MB zipped / 250 MB unpacked.",
    "status: 221 ms before its plain router (measured at load 13; 182 ms minimum), most of it "
    "Powertools' event_handler package, which imports every resolver (AppSync's pulls in asyncio) for "
    "the five routes status serves. The handler now routes with a table of its own (method, OpenAPI "
    "path, function), the same answers byte for byte (tests/unit/test_api_fuzz.py, test_status_api.py), "
    "and only Powertools' Logger is imported; pdfbatch.services imports its use cases on first use "
    "(PEP 562), so status no longer loads staging, processing and operations (zipfile, the archive "
    "reader, metrics). What remains: pdfbatch's modules (dataclass construction in ports, config, "
    "model), Powertools' Logger, boto3's and the standard library's (ssl, socket, inspect, typing).",
    "Tracing: `Tracing: Active` adds nothing to a cold start (Lambda records the segments; no SDK is "
    "shipped). Powertools Tracer would: aws_xray_sdk patches botocore at import, loading the SDK that "
    "the first request would otherwise load later, hence the tracer row.",
)
STATUS_TARGET_MS = 150.0
ROUNDS = 9
VARIANTS = ("before", "per-function", "after")
_PROBE = """
import sys, time
sys.path.insert(0, sys.argv[1])
started, cpu = time.perf_counter(), time.process_time()
import handler
if len(sys.argv) > 2:
    from aws_lambda_powertools import Tracer
    Tracer(service="pdfbatch-status")
print((time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000)
"""
_ENV = {
    "POWERTOOLS_SERVICE_NAME": "pdfbatch-bench",
    "POWERTOOLS_METRICS_NAMESPACE": "pdfbatch",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    # As in Lambda, so Powertools Tracer does not switch itself off.
    "AWS_LAMBDA_FUNCTION_NAME": "pdfbatch-bench",
    "_X_AMZN_TRACE_ID": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
}


def run(log: Callable[[str], None], rounds: int = ROUNDS, out: Path | None = None) -> list[Row]:
    """Build the three variants, time cold imports, return the section's rows."""
    root = project_root()
    out = out or root / "build" / "bench" / "coldstart"
    runtime = localstack.ensure_environments(root).runtime_python
    arch = host_architecture()
    dirs: dict[tuple[str, str], Path] = {}
    sizes: dict[tuple[str, str], tuple[int, int]] = {}
    every_dependency = {fn: root / "requirements" / "lambda.lock" for fn in FUNCTIONS}
    options = {
        "before": {"locks": every_dependency, "bytecode": False},
        "per-function": {"bytecode": False},
        "after": {},
    }
    for variant in VARIANTS:
        log(f"   building the {variant} zips ({arch})")
        artefacts = build(root, out / variant / "zips", architecture=arch, **options[variant])  # type: ignore[arg-type]
        for fn, artefact in artefacts.items():
            folder = out / variant / fn
            _unpack(artefact.path, folder)
            dirs[(variant, fn)] = folder
            sizes[(variant, fn)] = (artefact.size, _tree_size(folder))
    tracer_dir = _tracer_packages(out / "tracer", arch)
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {key: [] for key in dirs}
    samples[("after+tracer", "status")] = []
    log(f"   timing cold imports: {rounds} rounds x {len(samples)} variants")
    for _ in range(rounds):
        for (variant, fn), folder in dirs.items():
            samples[(variant, fn)].append(_cold_import(runtime, folder))
        samples[("after+tracer", "status")].append(
            _cold_import(runtime, dirs[("after", "status")], extra_path=tracer_dir)
        )
    load = os.getloadavg()[0]
    rows: list[Row] = []
    for fn in FUNCTIONS:
        before, after = sizes[("before", fn)], sizes[("after", fn)]
        rows.append(
            Row(
                SECTION,
                f"{fn} zip (after / before)",
                after[0] / 1e6,
                "MB",
                note=f"before {before[0] / 1e6:.1f} MB; unpacked {after[1] / 1e6:.1f} MB "
                f"(before {before[1] / 1e6:.1f} MB, 250 MB limit)",
            )
        )
    for fn in FUNCTIONS:
        med = {v: statistics.median(w for w, _ in samples[(v, fn)]) for v in VARIANTS}
        low = {v: min(w for w, _ in samples[(v, fn)]) for v in VARIANTS}
        cpu = {v: statistics.median(c for _, c in samples[(v, fn)]) for v in VARIANTS}
        rows.append(
            Row(
                SECTION,
                f"{fn} cold import (after)",
                med["after"],
                "ms",
                Target("<=", STATUS_TARGET_MS, " ms") if fn == "status" else None,
                note=f"before {med['before']:.0f} ms, per-function without bytecode "
                f"{med['per-function']:.0f} ms; minimum after {low['after']:.0f} ms "
                f"(before {low['before']:.0f} ms); CPU after {cpu['after']:.0f} ms (before "
                f"{cpu['before']:.0f} ms)",
            )
        )
    traced = statistics.median(w for w, _ in samples[("after+tracer", "status")])
    plain = statistics.median(w for w, _ in samples[("after", "status")])
    rows.append(
        Row(
            SECTION,
            "status cold import + Powertools Tracer (X-Ray SDK)",
            traced,
            "ms",
            note=f"+{traced - plain:.0f} ms over the shipped status; Tracing: Active itself adds 0 ms to the "
            "import (Lambda records the segments, no SDK in the zip)",
        )
    )
    rows.append(
        Row(
            SECTION,
            "load average while timing",
            load,
            "",
            note="2 cores; medians of interleaved runs"
            + (", probes at real-time priority (chrt -f 50)" if _priority() else ", normal priority"),
        )
    )
    return rows


def _unpack(zip_path: Path, folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(folder)


def _tree_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _priority() -> list[str]:
    """`chrt -f 50` when this process may use it (root), else nothing."""
    chrt = shutil.which("chrt")
    return [chrt, "-f", "50"] if chrt and os.geteuid() == 0 else []


def _cold_import(python: Path, folder: Path, extra_path: Path | None = None) -> tuple[float, float]:
    """(wall, CPU) milliseconds to import the handler in a fresh interpreter that writes no bytecode."""
    env = {**_ENV, "PATH": os.environ.get("PATH", "")}
    args = [*_priority(), str(python), "-B", "-I", "-c", _PROBE, str(folder)]
    if extra_path is not None:
        env["PYTHONPATH"] = str(extra_path)
        args = [*_priority(), str(python), "-B", "-c", _PROBE, str(folder), "tracer"]  # -I drops PYTHONPATH
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"importing the handler in {folder} failed:\n{proc.stderr[-2000:]}")
    wall, cpu = proc.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def _tracer_packages(folder: Path, arch: str) -> Path:
    """aws-xray-sdk and wrapt for Lambda's CPython 3.13, as pinned (with hashes) in requirements/dev.lock."""
    target = folder / "site"
    if (target / "aws_xray_sdk").is_dir():
        return target
    lock = (project_root() / "requirements" / "dev.lock").read_text()
    wanted = _lock_blocks(lock, ("aws-xray-sdk", "wrapt"))
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", dir=folder, delete=False) as fh:
        fh.write(wanted)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--require-hashes",
        "--target",
        str(target),
        *platform_args(arch),
        "-r",
        fh.name,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"installing the X-Ray SDK for the tracer row failed:\n{proc.stderr[-2000:]}")
    compile_bytecode(target, find_python313())  # shipped as the rest is: with its bytecode
    return target


def _lock_blocks(lock: str, names: tuple[str, ...]) -> str:
    """The `name==version --hash ...` blocks of ``names`` in a uv lock, environment markers dropped."""
    out: list[str] = []
    keep = False
    for line in lock.splitlines():
        if line and not line[0].isspace():
            name = line.split("==", 1)[0].strip().lower()
            keep = name in names
            if keep:
                line = line.split(";", 1)[0].rstrip().rstrip("\\").rstrip() + " \\"
        elif keep and line.strip().startswith("#"):
            continue
        if keep:
            out.append(line)
    if not out:
        raise RuntimeError(f"none of {names} in requirements/dev.lock: add aws-xray-sdk to the dev extra")
    return "\n".join(out) + "\n"
