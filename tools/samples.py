"""Generated sample corpora (demo, e2e, bench): every PDF is drawn by code with fpdf2, none is shipped."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

_EPOCH = datetime(2024, 1, 1, tzinfo=UTC)

FIRST = [
    "Ada",
    "Grace",
    "Alan",
    "Edsger",
    "Barbara",
    "Donald",
    "Frances",
    "Ken",
    "Radia",
    "Tim",
    "Margaret",
    "John",
    "Katherine",
    "Linus",
    "Hedy",
    "Dennis",
    "Sophie",
    "Claude",
    "Annie",
    "Niklaus",
]
LAST = [
    "Lovelace",
    "Hopper",
    "Turing",
    "Dijkstra",
    "Liskov",
    "Knuth",
    "Allen",
    "Thompson",
    "Perlman",
    "Berners-Lee",
    "Hamilton",
    "Backus",
    "Johnson",
    "Torvalds",
    "Lamarr",
    "Ritchie",
    "Wilson",
    "Shannon",
    "Easley",
    "Wirth",
]


def _pdf() -> object:
    from fpdf import FPDF

    pdf = FPDF(unit="pt", format="A4")
    pdf.set_creation_date(_EPOCH)
    pdf.set_auto_page_break(False)
    pdf.set_font("Helvetica", size=11)
    return pdf


def text_pdf(pages: Sequence[Sequence[str]], *, owner: str | None = None, user: str | None = None) -> bytes:
    """A PDF with one page per list of lines; optionally encrypted (AES-256)."""
    from fpdf.enums import EncryptionMethod

    pdf = _pdf()
    for lines in pages or [[]]:
        pdf.add_page()  # type: ignore[attr-defined]
        y = 60.0
        for line in lines:
            if line:
                pdf.text(50, y, line)  # type: ignore[attr-defined]
            y += 14
    if owner is not None:
        pdf.set_encryption(  # type: ignore[attr-defined]
            owner_password=owner, user_password=user or "", encryption_method=EncryptionMethod.AES_256
        )
    return bytes(pdf.output())  # type: ignore[attr-defined]


def resume(name: str, email: str, *extra: str) -> bytes:
    """A one-page résumé with the email on its contact line."""
    return text_pdf(
        [
            [
                name,
                "Software Engineer",
                f"Email: {email}  |  Phone: +33 6 12 34 56 78",
                "",
                "Experience",
                "2019-2024  Platform engineering, payments and data pipelines.",
                "2015-2019  Backend developer, APIs and batch processing.",
                "",
                "Skills: Python, SQL, AWS",
                *extra,
            ]
        ]
    )


def manual(pages: int, email: str, email_page: int = 1) -> bytes:
    """A long manual whose support address is on ``email_page`` (1-based)."""
    body = [
        f"Section {{n}}.{i}: operating instructions, safety notes and maintenance intervals."
        for i in range(30)
    ]
    doc = []
    for n in range(1, pages + 1):
        lines = [f"Product manual - page {n}", *(line.format(n=n) for line in body)]
        if n == email_page:
            lines.insert(1, f"Support contact: {email}")
        doc.append(lines)
    return text_pdf(doc)


def image_only() -> bytes:
    """A 'scanned' page: shapes only, no text layer."""
    pdf = _pdf()
    pdf.add_page()  # type: ignore[attr-defined]
    pdf.rect(40, 40, 300, 200, style="F")  # type: ignore[attr-defined]
    pdf.ellipse(60, 300, 120, 80, style="F")  # type: ignore[attr-defined]
    return bytes(pdf.output())  # type: ignore[attr-defined]


def person(i: int) -> tuple[str, str]:
    """A deterministic (name, email) for demo user ``i``."""
    first, last = FIRST[i % len(FIRST)], LAST[(i // len(FIRST) + i) % len(LAST)]
    return f"{first} {last}", f"{first.lower()}.{last.lower().replace('-', '')}{i}@demo.pdfbatch.test"


@dataclass
class Corpus:
    """A sample ZIP's entries, the users it expects, and what each PDF entry should end as."""

    entries: list[tuple[str, bytes]] = field(default_factory=list)
    users: list[str] = field(default_factory=list)  # emails to seed with pdf_url NULL
    linked_users: list[str] = field(default_factory=list)  # emails to seed with a pdf_url already set
    expected: dict[str, tuple[str, str]] = field(default_factory=dict)  # entry name -> (outcome, reason)

    def add(self, name: str, data: bytes, outcome: str | None = None, reason: str | None = None) -> None:
        """Add an entry and, for PDFs, its expected (outcome, reason)."""
        self.entries.append((name, data))
        if outcome and reason:
            self.expected[name] = (outcome, reason)

    def zip_bytes(self) -> bytes:
        """The ZIP in memory (small corpora)."""
        buf = io.BytesIO()
        self.write_zip(buf)
        return buf.getvalue()

    def write_zip(self, target: Path | io.BytesIO, compression: int = zipfile.ZIP_DEFLATED) -> None:
        """Write the ZIP to a path or buffer."""
        with zipfile.ZipFile(target, "w", compression) as zf:
            for name, data in self.entries:
                zf.writestr(zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0)), data, compression)


def bench_corpus(resumes: int = 300, manuals: int = 20, manual_pages: int = 100) -> Corpus:
    """300 résumés + 20 manuals of 100 pages (email on page 1), all of known users."""
    c = Corpus()
    for i in range(resumes):
        name, email = person(1000 + i)
        c.users.append(email)
        c.add(f"resumes/{i:04d}.pdf", resume(name, email), "linked", "matched")
    for i in range(manuals):
        name, email = person(5000 + i)
        c.users.append(email)
        c.add(f"manuals/{i:03d}.pdf", manual(manual_pages, email, 1), "linked", "matched")
    return c


def small_corpus(n: int, start: int = 20000) -> Iterable[tuple[str, bytes, str]]:
    """``n`` small résumés (name, bytes, email) for scale runs."""
    for i in range(n):
        name, email = person(start + i)
        yield f"r/{i:06d}.pdf", resume(name, email), email


def png() -> bytes:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * 8 for _ in range(8))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )
