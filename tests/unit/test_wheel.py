"""What the wheel ships (issue 23): the pdfbatch package and none of the checkout's tooling, read from
pyproject's setuptools settings as a build reads them (nothing is built)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import setuptools

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
