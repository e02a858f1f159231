"""What the wheel ships (issue 23): the pdfbatch package and none of the checkout's tooling, read from
pyproject's setuptools settings as a build reads them (nothing is built)."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
import tomllib
from pathlib import Path

import setuptools
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "pdfbatch"


def test_the_wheel_ships_the_pdfbatch_package_and_no_tooling() -> None:
    # GIVEN pyproject's package discovery (namespace packages, as setuptools does from pyproject)
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    # WHEN setuptools finds the packages a wheel would hold
    packages = setuptools.find_namespace_packages(
        where=str(ROOT / find["where"][0]),
        include=find.get("include", ["*"]),
        exclude=find.get("exclude", []),
    )
    # THEN they are pdfbatch and its subpackages: tools/ (local stack, build, deploy, samples) is left out
    assert find["where"] == ["src"]
    assert "pdfbatch" in packages
    assert [p for p in packages if p != "pdfbatch" and not p.startswith("pdfbatch.")] == []
    assert (ROOT / "tools" / "localstack.py").is_file() and not (ROOT / "src" / "tools").exists()


def test_the_package_imports_the_tooling_only_inside_the_commands_that_need_a_checkout() -> None:
    # GIVEN every module of the installed package
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        in_function = {
            id(node)
            for fn in ast.walk(tree)
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
            for node in ast.walk(fn)
        }
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            if any(n == "tools" or n.startswith("tools.") for n in names):
                found.append((path.relative_to(PACKAGE).as_posix(), id(node) in in_function))
    # THEN tools/ is imported only by the CLI, inside a command (after cli.common.dev_tooling), never at
    # import time: an installed pdfbatch without a checkout imports and runs what ships
    assert found, "the CLI's stack and demo commands import tools/"
    assert [(module, lazy) for module, lazy in found if not (module.startswith("cli/") and lazy)] == []


def _declared(*extras: str) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in extras:
        specs += project["optional-dependencies"][extra]
    return {canonicalize_name(Requirement(spec).name) for spec in specs}


def _third_party_imports(paths: list[Path]) -> dict[str, set[str]]:
    """Top-level modules outside the standard library and the project, and the files importing each."""
    found: dict[str, set[str]] = {}
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {
            id(inner)
            for block in ast.walk(tree)
            if isinstance(block, ast.If)
            and ast.unparse(block.test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"}
            for inner in ast.walk(block)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue  # for mypy only: never imported at run time
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in {"pdfbatch", "tools", "__future__"}:
                    found.setdefault(top, set()).add(path.relative_to(PACKAGE).as_posix())
    return found


def test_every_module_the_operator_cli_imports_is_declared_by_the_cli_extra_or_the_package() -> None:
    # GIVEN the modules behind `pdfbatch` (the CLI, its REST client and the invariant checker), and
    # which installed distribution provides each third-party module they import
    cli = [*sorted((PACKAGE / "cli").rglob("*.py")), PACKAGE / "api_client.py", PACKAGE / "invariants.py"]
    provides = importlib.metadata.packages_distributions()
    # WHEN each import is traced to its distribution
    missing = {
        top: sorted(files)
        for top, files in _third_party_imports(cli).items()
        if not {canonicalize_name(d) for d in provides.get(top, [top])} & _declared("cli")
    }
    # THEN `pip install 'pdfbatch[cli]'` installs them all (boto3 and rich were once left to chance)
    assert missing == {}


def test_every_module_the_package_imports_is_declared_by_it_or_one_of_its_extras() -> None:
    # GIVEN every module of the package and the distribution behind each third-party import
    provides = importlib.metadata.packages_distributions()
    declared = _declared("ocr", "cli")
    # WHEN traced  THEN none comes only from the development environment
    missing = {
        top: sorted(files)
        for top, files in _third_party_imports(sorted(PACKAGE.rglob("*.py"))).items()
        if not {canonicalize_name(d) for d in provides.get(top, [top])} & declared
    }
    assert missing == {}
