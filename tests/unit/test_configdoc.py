"""docs/CONFIGURATION.md says what src/pdfbatch/config.py reads, as tools/configdoc.py renders it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tools import configdoc

ROOT = Path(__file__).resolve().parents[2]
_VAR = re.compile(r"\b(?:PDFBATCH|AWS)_[A-Z0-9_]*[A-Z0-9]\b")


def test_the_configuration_doc_is_what_config_py_renders() -> None:
    # GIVEN the doc as committed
    doc = configdoc.DOC.read_text(encoding="utf-8")
    # THEN its generated tables are exactly what config.py renders now
    assert configdoc.updated(doc) == doc, "docs/CONFIGURATION.md is out of date: run `make docs`"


def test_every_variable_from_env_reads_is_named_by_its_fields_comment() -> None:
    # THEN no variable is read without a field comment that documents it
    assert configdoc.check_coverage() == []


def test_a_variable_added_to_config_py_without_regenerating_is_caught() -> None:
    # GIVEN config.py with one more documented field, and one more variable read but not documented
    source = configdoc.CONFIG.read_text(encoding="utf-8")
    field = '    stage_prefix: str = ""  # PDFBATCH_STAGE_PREFIX: where staged copies go\n'
    source = source.replace('    bucket: str = ""  #', field + '    bucket: str = ""  #', 1)
    read = 'bucket=e.get("PDFBATCH_BUCKET", ""),'
    source = source.replace(read, 'bucket=e.get("PDFBATCH_BUCKET", e.get("PDFBATCH_X", "")),', 1)
    doc = configdoc.DOC.read_text(encoding="utf-8")
    # WHEN the doc is rendered from it
    fresh = configdoc.updated(doc, source)
    # THEN the doc as committed no longer matches, and the undocumented variable is named
    assert fresh != doc
    assert "| `PDFBATCH_STAGE_PREFIX` | empty | `stage_prefix` | where staged copies go |" in fresh
    assert configdoc.check_coverage(source) == ["PDFBATCH_X"]


def test_every_variable_the_doc_names_is_read_by_the_code() -> None:
    # GIVEN every variable docs/CONFIGURATION.md names, in its tables and notes
    named = set(_VAR.findall(configdoc.DOC.read_text(encoding="utf-8")))
    # WHEN the code is searched for each (a renamed variable leaves its old name behind in the doc)
    code = subprocess.run(
        ["git", "grep", "-h", "-o", "-E", r"\b(PDFBATCH|AWS)_[A-Z0-9_]*[A-Z0-9]\b", "--", "src", "functions"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    # THEN each is read somewhere
    assert sorted(named - set(code)) == []
