"""Build one reproducible zip per Lambda function: handler.py + the pdfbatch package + its runtime deps.

The dependencies are installed once (Linux x86_64 wheels for CPython 3.13, whatever the build machine is)
into a cache keyed by a hash of the dependency list, and zipped once there; each function zip starts as a
copy of that deps zip and gets its own files appended. Entries carry a fixed timestamp and mode and are
written in sorted order, so a zip's sha256 changes only when its contents do.

    python -m pdfbatch.ops.build [--refresh]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

FUNCTIONS: tuple[str, ...] = ("unzip", "process_pdf", "status")
CACHE_ENV = "PDFBATCH_BUILD_CACHE"  # where installed dependencies are kept (default: build/cache)

# What AWS's python3.13 x86_64 runtime loads, whatever machine builds the zip.
PLATFORM_ARGS: tuple[str, ...] = (
    "--platform",
    "manylinux2014_x86_64",
    "--implementation",
    "cp",
    "--python-version",
    "3.13",
    "--only-binary=:all:",
)
# The Lambda runtime ships the AWS SDK; bundling it would add 20 MB and shadow the runtime's copy.
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer"})
# Bump when the layout of the cache or the stripping rules change.
_CACHE_FORMAT = "1"
_FIXED_DATE = (1980, 1, 1, 0, 0, 0)
_STRIP_DIRS = frozenset({"__pycache__", "tests", "test"})
_STRIP_TOP = frozenset({"bin", *RUNTIME_PROVIDED})  # console scripts; the SDK if a dependency pulled it
_STRIP_SUFFIXES = (".pyc", ".pyo")


class BuildError(Exception):
    """The build cannot go on; the message says what to fix."""


@dataclass(frozen=True)
class Artefact:
    """One built function zip."""

    function: str
    path: Path
    sha256: str
    size: int


def project_root() -> Path:
    """The repository root (src/pdfbatch/ops/build.py is three levels below it)."""
    return Path(__file__).resolve().parents[3]


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if not match:
        raise BuildError(f"cannot read the requirement {requirement!r} in pyproject.toml")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def runtime_dependencies(pyproject: Path) -> list[str]:
    """[project].dependencies of pyproject.toml, less what the Lambda runtime already provides."""
    with pyproject.open("rb") as fh:
        data = tomllib.load(fh)
    deps = data.get("project", {}).get("dependencies", [])
    return sorted(d for d in deps if _requirement_name(d) not in RUNTIME_PROVIDED)


def dependency_key(deps: Sequence[str]) -> str:
    """The cache key: changes when the dependency list, the target platform or the cache format does."""
    blob = json.dumps({"deps": sorted(deps), "platform": PLATFORM_ARGS, "format": _CACHE_FORMAT})
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


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
        elif path.is_file() and path.name.endswith(_STRIP_SUFFIXES):
            path.unlink()


def _files(base: Path, prefix: str = "") -> Iterator[tuple[str, Path]]:
    """(arcname, path) for every regular file under base, bytecode and caches excluded."""
    for path in base.rglob("*"):
        rel = path.relative_to(base)
        if any(part == "__pycache__" for part in rel.parts) or path.name.endswith(_STRIP_SUFFIXES):
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
    deps: Sequence[str],
    cache_dir: Path,
    *,
    refresh: bool = False,
    python: str = sys.executable,
) -> Path:
    """The cached zip of ``deps`` (Linux/CPython 3.13 wheels), installing them first when needed."""
    entry = cache_dir / f"deps-{dependency_key(deps)}"
    deps_zip = entry / "deps.zip"
    if deps_zip.is_file() and not refresh:
        return deps_zip
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".install-") as tmp:
        site = Path(tmp) / "site"
        cmd = [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-compile",
            "--target",
            str(site),
            *PLATFORM_ARGS,
            *deps,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)  # noqa: S603
        if proc.returncode != 0:
            raise BuildError(f"pip install of the function dependencies failed:\n{proc.stderr[-4000:]}")
        installed = sorted(p.name for p in site.glob("*.dist-info"))
        _strip(site)
        staged = Path(tmp) / "entry"
        staged.mkdir()
        with zipfile.ZipFile(staged / "deps.zip", "w") as zf:
            _write_entries(zf, _files(site))
        (staged / "installed.json").write_text(json.dumps({"requested": list(deps), "installed": installed}))
        if entry.exists():
            shutil.rmtree(entry)
        staged.rename(entry)  # atomic: a cache entry is complete or absent
    return deps_zip


def _function_files(root: Path, function: str) -> list[tuple[str, Path]]:
    """handler.py (and any sibling files) at the zip root, then the pdfbatch package less ops/."""
    fn_dir = root / "functions" / function
    if not (fn_dir / "handler.py").is_file():
        raise BuildError(
            f"{fn_dir / 'handler.py'} is missing: every function needs functions/{function}/handler.py "
            "defining handler(event, context)"
        )
    package = root / "src" / "pdfbatch"
    if not (package / "__init__.py").is_file():
        raise BuildError(f"{package} is not the pdfbatch package (no __init__.py)")
    files = list(_files(fn_dir))
    files += [(a, p) for a, p in _files(package, "pdfbatch/") if not a.startswith("pdfbatch/ops/")]
    return files


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
    refresh: bool = False,
) -> dict[str, Artefact]:
    """Build ``{out_dir}/{function}.zip`` for each function; return them with their sha256."""
    root = (root or project_root()).resolve()
    out_dir = out_dir or root / "build"
    # Keyed by the dependency list, so every source tree (and the tests' copies) can share one cache.
    cache_dir = cache_dir or Path(os.environ.get(CACHE_ENV) or project_root() / "build" / "cache")
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        raise BuildError(f"{pyproject} is missing")
    # Fail on a missing handler before spending time on pip.
    sources = {fn: _function_files(root, fn) for fn in functions}
    deps_zip = install_dependencies(runtime_dependencies(pyproject), cache_dir, refresh=refresh)
    out_dir.mkdir(parents=True, exist_ok=True)
    artefacts: dict[str, Artefact] = {}
    for fn, files in sources.items():
        target = out_dir / f"{fn}.zip"
        tmp = target.with_suffix(".zip.tmp")
        shutil.copyfile(deps_zip, tmp)
        with zipfile.ZipFile(tmp, "a") as zf:
            clash = set(zf.namelist()) & {a for a, _ in files}
            if clash:
                raise BuildError(f"{fn}: files clash with dependency files: {sorted(clash)[:5]}")
            _write_entries(zf, files)
        os.replace(tmp, target)
        artefacts[fn] = Artefact(fn, target, sha256_of(target), target.stat().st_size)
    return artefacts


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: build every function zip into build/."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--refresh", action="store_true", help="reinstall the dependencies (new releases)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: build/)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        artefacts = build(out_dir=args.out, refresh=args.refresh)
    except BuildError as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    for a in artefacts.values():
        print(f"{a.function:12} {a.size / 1e6:6.1f} MB  sha256 {a.sha256[:12]}  {a.path}")
    print(f"built {len(artefacts)} zips in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
