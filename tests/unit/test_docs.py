"""The README and docs/ say where things are, and each of those places exists.

A wrong link is worse than a missing one: every relative link of README.md and docs/*.md names a file
that exists and, with a #fragment, a heading of that file; docs/RESULTS.md's outcome table lists every
reason under the outcome it belongs to; and docs/ARCHITECTURE.md's rule -> module -> test table names
modules, functions, port methods and tests that exist.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from pdfbatch import ports
from pdfbatch.model import REASON_OUTCOME, Outcome

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
README_LIMIT = 8 * 1024

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _slug(heading: str) -> str:
    # GitHub's anchors: lower case, punctuation but '-' and '_' dropped, each space a '-'.
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.+?)\s*#*$", text, re.M)}


def _links(path: Path) -> list[str]:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    return [m.group(1) for m in _LINK.finditer(text)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_names_a_file_and_heading_that_exist(doc: Path) -> None:
    # GIVEN every link of the document that points inside the repository
    broken = []
    for link in _links(doc):
        if re.match(r"^[a-z]+:", link):
            continue
        target, _, fragment = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        # THEN its file exists, and its fragment is one of that file's headings
        if not path.exists():
            broken.append(f"{link}: no such file")
        elif fragment and path.suffix == ".md" and fragment not in _anchors(path):
            broken.append(f"{link}: no heading #{fragment} in {path.relative_to(ROOT)}")
    assert not broken, broken


def test_the_readme_stays_short() -> None:
    # THEN the README is what it does and how to run it; the rest lives in docs/
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes (limit {README_LIMIT}): move detail to docs/"


def _outcome_table() -> dict[str, str]:
    """reason -> outcome, as docs/RESULTS.md's "Outcomes and reasons" table lists them."""
    text = (ROOT / "docs" / "RESULTS.md").read_text(encoding="utf-8")
    section = text.split("## Outcomes and reasons", 1)[1].split("\n## ", 1)[0]
    table: dict[str, str] = {}
    outcome = ""
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3 or cells[0] in ("outcome", "---"):
            continue
        if cells[0]:
            outcome = re.findall(r"`([a-z_]+)`", cells[0])[0]
        for reason in re.findall(r"`([a-z_]+)`", cells[1]):
            table[reason] = outcome
    return table


def test_the_outcome_table_lists_every_reason_under_its_outcome() -> None:
    # GIVEN the reasons the code records and the outcome each belongs to
    expected = {str(reason): str(outcome) for reason, outcome in REASON_OUTCOME.items()}
    # WHEN docs/RESULTS.md's table is read
    table = _outcome_table()
    # THEN it lists each of them, under its outcome, and no reason the code does not know
    assert table == expected
    assert {str(o) for o in Outcome} <= set(table.values())


_ROW_TEST = re.compile(r"`((?:unit|integration|e2e)/test_\w+\.py)?(?:::(\w+))?`")
_ROW_FILE = re.compile(r"`([\w/]+\.(?:py|yaml))`")


def _architecture_rows() -> list[tuple[str, str]]:
    """(home, proven by) of each row of docs/ARCHITECTURE.md's "One home per rule" table."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## One home per rule", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and cells[0] not in ("rule", "---"):
            rows.append((cells[1], cells[2]))
    return rows


def test_the_architecture_table_names_tests_that_exist() -> None:
    # GIVEN every test the rule table cites (`file.py::name`, or `::name` for the file cited before it)
    rows = _architecture_rows()
    assert len(rows) > 30
    missing = []
    for _, proven_by in rows:
        current = ""
        for m in _ROW_TEST.finditer(proven_by):
            file, name = m.group(1), m.group(2)
            if not file and not name:
                continue
            current = file or current
            path = ROOT / "tests" / current
            # THEN the file exists, and so does the named test in it
            if not path.exists():
                missing.append(current)
            elif name and not re.search(rf"^(async )?def {name}\(", path.read_text(encoding="utf-8"), re.M):
                missing.append(f"{current}::{name}")
    assert not missing, missing


def test_the_architecture_table_names_modules_that_exist() -> None:
    # GIVEN every file a row names as the rule's home
    missing = []
    for home, _ in _architecture_rows():
        for name in _ROW_FILE.findall(home):
            # THEN it is a module of the package, or a file of the repository
            if not (ROOT / "src" / "pdfbatch" / name).exists() and not (ROOT / name).exists():
                missing.append(name)
    assert not missing, missing


_QUALIFIED = re.compile(r"`((?:[a-z_]+\.)+)([A-Za-z_]+)`")
_PORT = re.compile(r"`([A-Z]\w+)\.([a-z_]+)`")
_PACKAGES = ("pdfbatch.", "pdfbatch.services.", "pdfbatch.adapters.", "pdfbatch.pdf.", "")


def _resolves(module: str, name: str) -> bool:
    for package in _PACKAGES:
        try:
            found = importlib.import_module(package + module)
        except ImportError:
            continue
        if hasattr(found, name):
            return True
    return False


def test_the_architecture_table_names_functions_and_port_methods_that_exist() -> None:
    # GIVEN every `module.name` and `Port.method` a row names as the rule's home
    missing = []
    for home, _ in _architecture_rows():
        for module, name in _QUALIFIED.findall(home):
            if name in ("py", "yaml"):
                continue  # a file, checked above
            # THEN the module exists (in the package, or one of its subpackages) and has that name
            if not _resolves(module.rstrip("."), name):
                missing.append(f"{module}{name}")
        for port, method in _PORT.findall(home):
            protocol = getattr(ports, port, None)
            if protocol is not None and not hasattr(protocol, method):
                missing.append(f"{port}.{method}")
    assert not missing, missing
