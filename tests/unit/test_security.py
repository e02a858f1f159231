"""Security rules at unit level: unguessable batch ids, a status API that never answers for a guessed id,
and properties of ZIP inspection and email extraction over arbitrary input."""

from __future__ import annotations

import ast
import io
import json
import re
import secrets
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures import pdfs
from fixtures.apigw import TEST_API_KEY, Context, api_event, load_handler
from fixtures.examples import examples
from fixtures.pipeline import drain, upload
from fixtures.zips import make_zip, pdf_bytes
from pdfbatch import archive, pdf
from pdfbatch.config import Limits, Settings, parse_mysql_url
from pdfbatch.errors import ArchiveRejected, ConfigError, EntryRejected
from pdfbatch.model import Reason
from pdfbatch.pdf import emails as pdf_emails
from pdfbatch.services import batches, staging
from pdfbatch.services.deps import Deps

# --- batch ids ---------------------------------------------------------------------------------


def test_batch_ids_come_from_the_os_csprng_with_128_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the secrets module's generator, observed
    asked: list[int | None] = []
    real = secrets.token_hex

    def spy(nbytes: int | None = None) -> str:
        asked.append(nbytes)
        return real(nbytes)

    monkeypatch.setattr(batches.secrets, "token_hex", spy)
    # WHEN batch ids are made
    ids = [batches.new_batch_id() for _ in range(2000)]
    # THEN each is one 16-byte (128-bit) draw from secrets, 32 hex characters, all distinct
    assert asked == [16] * 2000
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids) and len(set(ids)) == 2000
    # AND every one of the 128 bits varies (none is a constant, a counter's high bits or a timestamp)
    for bit in range(128):
        ones = sum(int(i, 16) >> bit & 1 for i in ids)
        assert 800 < ones < 1200, bit


def _guesses(real: str) -> list[str]:
    n = int(real, 16)
    return [
        f"{(n + 1) % 2**128:032x}",  # the next one
        f"{(n - 1) % 2**128:032x}",  # the previous one
        real[:31],  # a prefix
        real[:16] + "0" * 16,  # same high half
        real + "0",  # longer
        real.upper(),  # another case
        f" {real}",
        f"{real}%",
        real[:31] + "%",
        real[:31] + "_",
        "%" * 32,
        "_" * 32,
        "*",
        "0" * 32,
        "f" * 32,
        f"../batches/{real}",
    ]


def test_status_api_never_answers_for_a_guessed_id(deps: Deps) -> None:
    # GIVEN a batch with files whose names are personal
    report = staging.stage_zip(
        deps, upload(deps, make_zip([("Jane Doe CV.pdf", pdfs.text_pdf(["nothing"])), ("x.pdf", b"junk")]))
    )
    drain(deps)
    real = report.batch_id
    status = load_handler("status")

    def get(path: str) -> dict[str, Any]:
        return status.handler(api_event("GET", path), Context())

    # sanity: the real id answers
    assert get(f"/batches/{real}")["statusCode"] == 200
    # WHEN ids near it, prefixes, patterns and other shapes are tried, for status and files
    for guess in _guesses(real):
        for path in (f"/batches/{guess}", f"/batches/{guess}/files"):
            resp = get(path)
            # THEN the answer is a 4xx that holds nothing of the batch
            assert resp["statusCode"] in (400, 403, 404), (guess, resp["statusCode"])
            body = resp["body"] or ""
            assert real not in body and "Jane" not in body, guess
            assert json.loads(body)["error"]


def test_status_api_without_the_api_key_answers_nothing(deps: Deps) -> None:
    report = staging.stage_zip(deps, upload(deps, make_zip([("a.pdf", pdfs.text_pdf(["x"]))])))
    status = load_handler("status")
    for key in (None, "", "wrong", TEST_API_KEY[:-1]):
        resp = status.handler(api_event("GET", f"/batches/{report.batch_id}", api_key=key), Context())
        assert resp["statusCode"] in (401, 403) and report.batch_id not in (resp["body"] or "")


# --- properties -----------------------------------------------------------------------------------

_LIMITS = Limits(max_entries=200)
_BASE = make_zip(
    [("a.pdf", pdf_bytes("a") * 20), ("b/c.PDF", pdf_bytes("b")), ("__MACOSX/._a.pdf", b"m"), ("d.txt", b"d")]
)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.one_of(
        st.binary(max_size=600),
        st.lists(st.tuples(st.integers(0, len(_BASE) - 1), st.integers(0, 255)), min_size=1, max_size=6).map(
            lambda edits: bytes(b if i not in dict(edits) else dict(edits)[i] for i, b in enumerate(_BASE))
        ),
        st.integers(1, len(_BASE) - 1).map(lambda n: _BASE[:n]),
    )
)
def test_any_bytes_are_rejected_or_every_entry_is_accounted_for_exactly_once(data: bytes) -> None:
    # GIVEN arbitrary bytes, a mutated ZIP or a truncated one
    # WHEN inspected
    try:
        opened = archive.open_archive(io.BytesIO(data), _LIMITS, size=len(data))
    except ArchiveRejected as exc:
        # THEN either the whole upload is refused with a batch reason
        assert exc.reason in {"corrupt_zip", "not_a_zip", "too_many_entries", "zip_too_large"}
        return
    with opened:
        plan = opened.plan
        # OR every entry is either a counted PDF or ignored, exactly once, in index order
        assert [e.index for e in plan.entries] == list(range(len(plan.entries)))
        assert sorted(e.index for e in (*plan.pdf_entries, *plan.ignored)) == [e.index for e in plan.entries]
        assert all(e.reason is not None for e in plan.ignored)
        # AND each PDF entry reads whole or ends with a ledger reason: none escapes unaccounted
        for entry in plan.pdf_entries:
            try:
                content = opened.read(entry)
            except EntryRejected as exc:
                assert exc.reason in set(Reason)
                continue
            assert len(content) == entry.file_size


_TEXT = st.text(
    alphabet=st.one_of(st.sampled_from("@.-_+'<>()[],;:\n mailto%é日😀\u00ad\u200b"), st.characters()),
    max_size=300,
)


@settings(max_examples=examples(200), deadline=None)
@given(text=_TEXT)
def test_found_emails_are_valid_lowercase_addresses_that_occur_in_the_text(text: str) -> None:
    found = pdf.find_emails(text)
    haystack = text.translate(pdf_emails._ARTEFACTS).lower()
    assert len(found) == len(set(found))
    for email in found:
        local, _, domain = email.partition("@")
        assert email == email.lower() and email in haystack
        assert local and not local.startswith(".") and not local.endswith(".") and ".." not in local
        assert "." in domain and all(label and len(label) <= 63 for label in domain.split("."))
        assert len(local) <= 64 and len(domain) <= 253


# --- SQL is parameterised ---------------------------------------------------------------------------

_SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|WHERE|CREATE|DROP|ALTER|USE|VALUES)\b")
# What may be formatted into SQL text: identifiers that config._IDENT validated, and code constants.
_IDENTIFIERS = {
    "p.database",  # parse_mysql_url
    "u.id_column",
    "u.email_column",
    "u.pdf_url_column",
    "quote_table(u.table)",  # UsersTable, from _ident() (adapters/users_table.quote_table)
    "table",
    "column",
    "definition",  # adapters/mysql.ADDED_COLUMNS, a constant of the code
    "_RECORD_SET",  # adapters/ledger: the SET list record() and link() share, a constant of the code
    "_TRACE_SELECT",  # adapters/ledger: the trace reads' SELECT ... FROM, a constant of the code
    "owner",  # adapters/ledger: " AND b.tenant = %s" or "", the tenant itself a parameter
    "', '.join(['%s'] * len(named))",  # one %s placeholder per named hash, the hashes parameters
    "' AND '.join(where)",  # adapters/ledger list_batches: constant clauses, each value a %s
    "' UNION '.join(parts)",  # the trace's parts, each built only of the constants above
}


def test_sql_text_interpolates_only_validated_identifiers_never_values() -> None:
    # GIVEN every Python source of the package, and of the tooling that creates the dev schema (tools/)
    offenders = []
    root = Path(__file__).resolve().parents[2]
    for path in sorted([*(root / "src" / "pdfbatch").rglob("*.py"), *(root / "tools").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            # WHEN a string that reads as SQL is built by formatting
            if isinstance(node, ast.JoinedStr):
                text = "".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
                if _SQL.search(text):
                    exprs = {ast.unparse(v.value) for v in node.values if isinstance(v, ast.FormattedValue)}
                    offenders += [f"{path.name}:{node.lineno}: {e}" for e in sorted(exprs - _IDENTIFIERS)]
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod | ast.Add):
                side = node.left if isinstance(node.left, ast.Constant) else node.right
                if (
                    isinstance(side, ast.Constant)
                    and _SQL.search(str(side.value))
                    and "%s" not in str(side.value)
                ):
                    offenders.append(f"{path.name}:{node.lineno}: SQL built with {type(node.op).__name__}")
    # THEN only validated identifiers are ever formatted in; every value is a %s parameter
    assert offenders == []


@pytest.mark.parametrize("value", ["users`; DROP TABLE users; --", "users WHERE 1=1", "a b", "`id`", "x'y"])
def test_configured_table_and_column_names_must_be_plain_identifiers(value: str) -> None:
    for name in ("PDFBATCH_USERS_TABLE", "PDFBATCH_USERS_EMAIL_COLUMN", "PDFBATCH_USERS_PDF_URL_COLUMN"):
        with pytest.raises(ConfigError, match=name):
            Settings.from_env({name: value})
    with pytest.raises(ConfigError):
        parse_mysql_url(f"mysql://root@127.0.0.1:3306/{value}")
