"""Scanned résumés, generated: text PDFs drawn by fpdf2, rendered to raster by pdfium, made to look scanned
(skewed up to ±2°, light noise, JPEG quality 60) and wrapped back into image-only PDFs (no text layer).

Everything is deterministic from a seed, so an accuracy figure is about the same documents every run.
Used by the tests (tests/fixtures/scans.py), the OCR benchmark (bench/ocr.py) and, later, the demo ZIP.
Where the address sits follows what résumés do: mostly on the contact line of page 1's header band, some
in a contact section lower on page 1, some on page 2 (the first page names the person, not the address).
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache

import pypdfium2 as pdfium
from fpdf import FPDF
from fpdf.enums import TextMode
from PIL import Image, ImageChops

from tools import samples

_EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
A4 = (595.28, 841.89)  # points
DPIS = (150, 200, 300)
# Where a header band ends: every "header" layout below keeps its address above this line (in points from
# the top); the OCR reader's own band is its own setting, the fixture only promises where it draws.
HEADER_BOTTOM_PT = 170.0

_DOMAINS = (
    "example.com",
    "example.org",
    "example.net",
    "mail.example.co.uk",
    "uni-example.de",
    "example-corp.fr",
    "post.example.io",
    "example.me",
    "students.example.edu",
    "example.com.au",
)
_MIDDLE = "ABCDEFGHJKLMNPRSTW"
_CITIES = ("Lyon, France", "Leeds, UK", "Austin, TX", "Berlin, Germany", "Toronto, ON", "Porto, Portugal")
_ROLES = ("Software Engineer", "Data Analyst", "Product Designer", "Site Reliability Engineer", "Accountant")
_WORK = (
    "Led the migration of {n} services to a managed platform, cutting costs by {p}%.",
    "Built reporting pipelines processing {n} million rows a day with Python and SQL.",
    "Mentored {n} junior colleagues; ran weekly design reviews and on-call rotations.",
    "Reduced page load time by {p}% through caching and query tuning.",
    "Owned the release process for {n} teams; introduced automated rollbacks.",
    "Negotiated supplier contracts worth {n}00k EUR and reconciled quarterly accounts.",
    "Designed the onboarding flow used by {n}0,000 customers a month.",
    "Wrote the incident playbooks and cut mean time to recovery by {p}%.",
)
_SKILLS = ("Python, SQL, AWS, Terraform", "Excel, SAP, IFRS reporting", "Figma, user research, prototyping")


@dataclass(frozen=True)
class ScanDoc:
    """One scanned PDF and the address a person reading it sees."""

    name: str
    data: bytes  # an image-only PDF
    email: str  # lowercase, as pdf.find_emails returns it
    where: str  # "header" (page 1, above HEADER_BOTTOM_PT), "lower" (page 1, below it) or "page2"
    layout: str
    dpi: int
    angles: tuple[float, ...]  # per page, degrees
    pages: int


# --- people and addresses ----------------------------------------------------------------------------


def _person(rng: random.Random) -> tuple[str, str]:
    first = rng.choice(samples.FIRST)
    last = rng.choice([*samples.LAST, "O'Neill", "van Rossum", "McCarthy"])
    return first, last


def address(rng: random.Random, first: str, last: str) -> str:
    """A realistic, RFC 5322-legal address for ``first last``: dots, digits, plus tags, underscores,
    hyphens and the odd apostrophe, as people pick them (lowercase, as most are typed)."""
    f = first.lower()
    last_l = last.lower().replace(" ", "")
    plain = last_l.replace("'", "").replace("-", "")
    m = rng.choice(_MIDDLE).lower()
    year = rng.randint(1968, 2004)
    local = rng.choice(
        (
            f"{f}.{plain}",
            f"{f}.{plain}",
            f"{f[0]}{plain}",
            f"{f}_{plain}",
            f"{f}.{plain}{rng.randint(1, 99)}",
            f"{f}{plain}{year}",
            f"{f}.{plain}+jobs",
            f"{f}-{plain}",
            f"{plain}.{f[0]}",
            f"{f[0]}.{m}.{plain}",
            f"{f}.{last_l}",  # keeps an apostrophe or hyphen (o'neill, berners-lee) where the name has one
            f"{plain}{str(year)[2:]}",
        )
    )
    return f"{local}@{rng.choice(_DOMAINS)}"


def _phone(rng: random.Random) -> str:
    country = rng.choice((33, 44, 49, 1))
    return f"+{country} {rng.randint(100, 999)} {rng.randint(100, 999)} {rng.randint(1000, 9999)}"


# --- the text résumé -------------------------------------------------------------------------------


def _body(pdf: FPDF, rng: random.Random, y: float, bottom: float, font: str) -> None:
    """Sections of experience lines from ``y`` down to ``bottom`` (points)."""
    while y < bottom - 40:
        pdf.set_font(font, "B", 12)
        pdf.text(50, y, rng.choice(("Experience", "Projects", "Education", "Volunteering")))
        y += 18
        pdf.set_font(font, "", 10)
        for _ in range(rng.randint(3, 7)):
            if y >= bottom - 14:
                break
            line = rng.choice(_WORK).format(n=rng.randint(2, 40), p=rng.randint(10, 60))
            pdf.text(60, y, f"{rng.randint(2008, 2024)}  {line}")
            y += 14
        y += 10


def resume_text_pdf(rng: random.Random) -> tuple[bytes, str, str, str]:
    """A résumé as a word processor would print it: (pdf, address, where, layout)."""
    first, last = _person(rng)
    name = f"{first} {last}"
    email = address(rng, first, last)
    shown = email if rng.random() > 0.1 else email.capitalize()  # some type the first letter in capitals
    font = rng.choice(("Helvetica", "Helvetica", "Times", "Courier"))
    size = rng.choice((9, 10, 10, 11, 12))
    layout = rng.choices(("line", "stacked", "right", "lower", "page2"), weights=(30, 20, 20, 15, 15))[0]
    pdf = FPDF(unit="pt", format="A4")
    pdf.set_creation_date(_EPOCH)
    pdf.set_auto_page_break(False)
    pdf.add_page()
    pdf.set_font(font, "B", rng.choice((18, 20, 24)))
    pdf.text(50, 70, name)
    pdf.set_font(font, "", 12)
    pdf.text(50, 92, rng.choice(_ROLES))
    pdf.set_font(font, "", size)
    phone, city = _phone(rng), rng.choice(_CITIES)
    where = "header"
    if layout == "line":
        pdf.text(50, 118, f"{shown}  |  {phone}  |  {city}")
    elif layout == "stacked":
        for i, line in enumerate((f"Email: {shown}", f"Phone: {phone}", f"Address: {city}")):
            pdf.text(50, 116 + i * (size + 4), line)
    elif layout == "right":
        for i, line in enumerate((shown, phone, city)):
            pdf.text(A4[0] - 50 - pdf.get_string_width(line), 64 + i * (size + 4), line)
    else:
        pdf.text(50, 118, f"{phone}  |  {city}")
    pdf.line(50, 140, A4[0] - 50, 140)
    lower_y = A4[1] - 90
    _body(pdf, rng, 165, lower_y if layout == "lower" else A4[1] - 50, font)
    if layout == "lower":
        where = "lower"
        pdf.set_font(font, "B", 12)
        pdf.text(50, lower_y, "Contact")
        pdf.set_font(font, "", size)
        pdf.text(60, lower_y + 18, f"Write to {shown} or call {phone}.")
    elif layout == "page2":
        where = "page2"
        pdf.add_page()
        pdf.set_font(font, "", size)
        _body(pdf, rng, 60, A4[1] - 160, font)
        pdf.set_font(font, "B", 12)
        pdf.text(50, A4[1] - 130, "References and contact")
        pdf.set_font(font, "", size)
        pdf.text(60, A4[1] - 112, f"{name}, {shown}")
    return bytes(pdf.output()), email.lower(), where, layout


# --- the scanner ---------------------------------------------------------------------------------------


def _scanned_page(image: Image.Image, angle: float, rng: random.Random, noise: int) -> Image.Image:
    """Skew, grey paper and light noise: what a sheet fed through an office scanner looks like."""
    image = image.rotate(angle, resample=Image.Resampling.BILINEAR, expand=False, fillcolor=255)
    image = image.point(lambda v: 24 + v * 222 // 255)  # ink is not black, paper is not white
    if noise:
        grain = Image.frombytes("L", image.size, rng.randbytes(image.size[0] * image.size[1]))
        grain = grain.point(lambda v: v * (2 * noise + 1) // 256)  # uniform 0..2*noise
        image = ImageChops.add(image, grain, offset=-noise)
    return image


def rasterize(
    pdf: bytes, *, dpi: int, seed: int, max_angle: float = 2.0, quality: int = 60, noise: int = 12
) -> tuple[bytes, tuple[float, ...]]:
    """``pdf`` rendered at ``dpi``, each page skewed by its own angle in ±``max_angle``, noisy, JPEG'd at
    ``quality`` and put back on an A4 page as the only content: (image-only PDF, angles)."""
    rng = random.Random(seed)
    out = FPDF(unit="pt", format="A4")
    out.set_creation_date(_EPOCH)
    out.set_auto_page_break(False)
    angles = []
    for image in _rendered(pdf, dpi):
        angle = round(rng.uniform(-max_angle, max_angle), 2)
        angles.append(angle)
        image = _scanned_page(image, angle, rng, noise)
        jpeg = io.BytesIO()
        image.save(jpeg, "JPEG", quality=quality)
        out.add_page()
        out.image(jpeg, x=0, y=0, w=A4[0], h=A4[1])
    return bytes(out.output()), tuple(angles)


def _rendered(pdf: bytes, dpi: int) -> Iterator[Image.Image]:
    """Each page of ``pdf`` rendered at ``dpi``, in grey."""
    doc = pdfium.PdfDocument(pdf)
    try:
        for index in range(len(doc)):
            page = doc[index]
            try:
                yield page.render(scale=dpi / 72, grayscale=True).to_pil().convert("L")
            finally:
                page.close()
    finally:
        doc.close()


def scan_doc(seed: int, dpi: int) -> ScanDoc:
    """One scanned résumé, all of it (person, address, layout, skew, noise) drawn from ``seed``."""
    rng = random.Random(seed)
    pdf, email, where, layout = resume_text_pdf(rng)
    data, angles = rasterize(pdf, dpi=dpi, seed=rng.randrange(2**32))
    return ScanDoc(
        name=f"scan-{seed}-{dpi}dpi-{layout}.pdf",
        data=data,
        email=email,
        where=where,
        layout=layout,
        dpi=dpi,
        angles=angles,
        pages=len(angles),
    )


@cache
def scan_set(per_dpi: int, seed: int = 1, dpis: Sequence[int] = DPIS) -> tuple[ScanDoc, ...]:
    """``per_dpi`` scanned résumés at each resolution, each a different person and layout."""
    return tuple(
        scan_doc(seed * 100_003 + i * len(dpis) + k, dpi)
        for i in range(per_dpi)
        for k, dpi in enumerate(dpis)
    )


@cache
def long_scan(pages: int = 30, email_page: int | None = None, dpi: int = 200, seed: int = 7) -> ScanDoc:
    """A long scanned document (a manual, a contract): ``pages`` full pages of text, the address on
    ``email_page`` (1-based) or nowhere; for the lane's throughput and page-limit tests."""
    rng = random.Random(seed)
    first, last = _person(rng)
    email = address(rng, first, last)
    text = samples.manual(pages, email, email_page) if email_page else samples.manual(pages, email, pages + 1)
    data, angles = rasterize(text, dpi=dpi, seed=rng.randrange(2**32))
    return ScanDoc(
        name=f"long-scan-{pages}p-{seed}.pdf",
        data=data,
        email=email if email_page else "",
        where=f"page{email_page}" if email_page else "none",
        layout="manual",
        dpi=dpi,
        angles=angles,
        pages=pages,
    )


def _scanned_images(pdf: bytes, dpi: int, seed: int) -> list[Image.Image]:
    """Each page of ``pdf`` as the scanner gives it back (see rasterize), uncompressed."""
    rng = random.Random(seed)
    return [_scanned_page(image, round(rng.uniform(-1.0, 1.0), 2), rng, 8) for image in _rendered(pdf, dpi)]


def tesseract_pdf(pdf: bytes, *, dpi: int = 200, seed: int = 5, tesseract: str = "tesseract") -> bytes:
    """``pdf`` scanned, then made searchable by Tesseract's own PDF renderer (``tesseract img out pdf``):
    each page image with Tesseract's invisible (render mode 3) text layer over it, as OCRmyPDF, Acrobat's
    "make searchable" and scanner firmware write them. Needs the tesseract command line."""
    images = _scanned_images(pdf, dpi, seed)
    with tempfile.TemporaryDirectory() as tmp:
        names = []
        for index, image in enumerate(images):  # JPEG, as scanners write: Tesseract embeds it as it is
            names.append(os.path.join(tmp, f"page{index}.jpg"))
            image.save(names[-1], "JPEG", quality=70, dpi=(dpi, dpi))
        listing = os.path.join(tmp, "pages.txt")
        with open(listing, "w") as f:
            f.write("\n".join(names) + "\n")
        out = os.path.join(tmp, "out")
        subprocess.run(  # noqa: S603 - a fixed command line on files this function wrote
            [tesseract, listing, out, "--dpi", str(dpi), "-l", "eng", "pdf"],
            check=True,
            capture_output=True,
            env={**os.environ, "OMP_THREAD_LIMIT": "1"},
        )
        with open(out + ".pdf", "rb") as f:
            return f.read()


def sandwich(pdf: bytes, layer: str, *, under: bool = False, dpi: int = 200, seed: int = 9) -> bytes:
    """A hand-built searchable scan: page 1 of ``pdf`` scanned as the page image, and ``layer`` as its
    text layer in the header band, invisible (render mode 3) over the image, or (``under``) drawn in
    black under it, as a producer that stacks the picture last writes it. The layer may say something
    other than the picture: what a person reads is the picture."""
    image = _scanned_images(pdf, dpi, seed)[0]
    jpeg = io.BytesIO()
    image.save(jpeg, "JPEG", quality=75)
    out = FPDF(unit="pt", format="A4")
    out.set_creation_date(_EPOCH)
    out.set_auto_page_break(False)
    out.add_page()
    out.set_font("Helvetica", "", 11)
    if under:
        out.text(50, 118, layer)
        out.image(jpeg, x=0, y=0, w=A4[0], h=A4[1])
    else:
        out.image(jpeg, x=0, y=0, w=A4[0], h=A4[1])
        out.text_mode = TextMode.INVISIBLE
        out.text(50, 118, layer)
    return bytes(out.output())


def blank_scan(dpi: int = 150, seed: int = 3) -> bytes:
    """A scanned blank sheet: noise and paper tone, no text at all."""
    pdf = FPDF(unit="pt", format="A4")
    pdf.set_creation_date(_EPOCH)
    pdf.add_page()
    return rasterize(bytes(pdf.output()), dpi=dpi, seed=seed)[0]
