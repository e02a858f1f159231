"""pdfbatch.ops.build: one zip per function, with what Lambda needs and nothing it must not have."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from pdfbatch.ops.build import FUNCTIONS, BuildError, build, project_root, runtime_dependencies
from pdfbatch.ops.localstack import find_python313

REPO = project_root()
# Shared with `python -m pdfbatch.ops.build` (gitignored): pip runs only when the dependency list changes.
CACHE = REPO / "build" / "cache"

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
        real = REPO / "functions" / fn / "handler.py"
        if real.is_file():
            shutil.copy2(real, fn_dir / "handler.py")
        else:
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


def test_each_function_zip_holds_its_handler_the_package_and_the_dependencies(
    first_build: dict[str, Path], source_root: Path
) -> None:
    assert set(first_build) == set(FUNCTIONS)
    for fn, path in first_build.items():
        entries = names(path)
        tops = {n.split("/", 1)[0] for n in entries}
        assert "handler.py" in entries
        with zipfile.ZipFile(path) as zf:
            assert zf.read("handler.py") == (source_root / "functions" / fn / "handler.py").read_bytes()
        assert "pdfbatch/__init__.py" in entries and "pdfbatch/config.py" in entries
        assert {"pypdfium2", "pypdfium2_raw", "pypdf", "cryptography", "pymysql", "redis"} <= tops
        assert "aws_lambda_powertools" in tops
        assert any(n.startswith("pypdfium2_raw/") and n.endswith(".so") for n in entries)  # Linux binary


def test_zips_leave_out_the_sdk_operator_tooling_and_caches(first_build: dict[str, Path]) -> None:
    for path in first_build.values():
        entries = names(path)
        tops = {n.split("/", 1)[0] for n in entries}
        assert not tops & {"boto3", "botocore", "s3transfer", "bin"}
        assert not [n for n in entries if n.startswith("pdfbatch/ops/")]
        assert not [n for n in entries if "__pycache__" in n or n.endswith(".pyc")]
        assert not [n for n in entries if ".dist-info/" in n]
        assert len(entries) == len(set(entries))


def test_a_second_build_is_byte_identical(
    source_root: Path, first_build: dict[str, Path], tmp_path: Path
) -> None:
    second = build(source_root, tmp_path, CACHE)
    for fn, artefact in second.items():
        assert artefact.path.read_bytes() == first_build[fn].read_bytes(), fn


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


def test_runtime_dependencies_leave_out_what_the_lambda_runtime_ships(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "x"\ndependencies = ["boto3>=1", "Botocore", "redis>=5", "pypdf"]\n'
    )
    assert runtime_dependencies(pyproject) == ["pypdf", "redis>=5"]


def test_dependencies_import_on_cpython_3_13(first_build: dict[str, Path], tmp_path: Path) -> None:
    # The project needs CPython 3.13 (LocalStack and the Lambda runtime): find it as `stack up` does.
    python = find_python313()
    with zipfile.ZipFile(first_build["process_pdf"]) as zf:
        zf.extractall(tmp_path)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "import pypdfium2, pypdf, cryptography.hazmat.bindings._rust, pymysql, redis; "
        "from aws_lambda_powertools.utilities.batch import BatchProcessor; "
        "import pdfbatch.config; print(pdfbatch.config.__file__)"
    )
    proc = subprocess.run([python, "-I", "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith(str(tmp_path))
