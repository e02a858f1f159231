"""The soak's input, generated from its seed: one big ZIP, two small ones, their users and the oracle.

The big ZIP (``pdfs`` PDF entries) holds, shuffled: résumés of users without a PDF (to be linked), second
résumés of some of them (one of the pair is linked, the other finds the user linked), résumés of users who
already have a PDF, decoys (an address one character away from a user's, a user's name without an address,
strangers), blank scans and scanned résumés of users (the OCR lane under the same faults), damaged and
locked files (a user's address inside, never to be linked), entries the ZIP itself damages (encrypted flag,
bad CRC, deflate64), and the junk real ZIPs carry.

The small ZIPs share some PDFs byte for byte with the big one (so two batches race for the same final
key): ``reused`` goes through a presigned POST that is then posted again with ``reused_second`` (the same
names over other users' résumés), ``dropped`` is put straight into uploads/ twice.

``owners`` is the oracle: for each PDF's sha256, the email of the user it visibly and uniquely names, or
None. Addresses and names are generated (samples.person), never real.
"""

from __future__ import annotations

import hashlib
import random
import zlib
from dataclasses import dataclass, field

from tools import samples, scans

from fixtures import pdfs, zips

Entry = tuple[str, bytes]


@dataclass
class SoakCorpus:
    """Everything the soak uploads, the users to seed, and what each PDF names."""

    big: list[Entry] = field(default_factory=list)
    reused: list[Entry] = field(default_factory=list)  # first ZIP through the presigned POST
    reused_second: list[Entry] = field(default_factory=list)  # posted again through the same POST
    dropped: list[Entry] = field(default_factory=list)  # put into uploads/ twice
    users: list[str] = field(default_factory=list)  # seeded without a PDF
    linked_users: list[str] = field(default_factory=list)  # seeded with a PDF already on file
    owners: dict[str, str | None] = field(default_factory=dict)  # sha256 -> email it names, or None
    broken_entries: set[str] = field(default_factory=set)  # entries written damaged into the ZIP

    def zip_bytes(self, entries: list[Entry]) -> bytes:
        """A ZIP of ``entries`` (those in broken_entries damaged as the ZIP stores them)."""
        return zips.raw_zip(_raw(name, data, name in self.broken_entries) for name, data in entries)

    @property
    def pdf_count(self) -> int:
        """PDF entries of the big ZIP (what it counts towards totalFiles)."""
        return sum(1 for name, _ in self.big if is_pdf(name))


def _raw(name: str, data: bytes, broken: bool) -> zips.RawEntry:
    if not broken:
        return zips.RawEntry(name, data)
    kind = name.rsplit("/", 2)[-2]
    if kind == "encrypted-entry":
        return zips.RawEntry(name, data, flags=0x1)
    if kind == "bad-crc":
        return zips.RawEntry(name, data, crc=zlib.crc32(data) ^ 0xFFFF)
    return zips.RawEntry(name, data, zips.DEFLATE64)


def sha(data: bytes) -> str:
    """The sha256 the pipeline records for an entry's bytes."""
    return hashlib.sha256(data).hexdigest()


def is_pdf(name: str) -> bool:
    """Counted as a PDF by unzip (the corpus only uses names whose kind is plain)."""
    base = name.rsplit("/", 1)[-1]
    return name.lower().endswith(".pdf") and not name.startswith("__MACOSX/") and not base.startswith(".")


def build(seed: int, pdf_count: int) -> SoakCorpus:
    """The corpus of one soak run: ``pdf_count`` PDFs in the big ZIP (at least 100), drawn from ``seed``."""
    rng = random.Random(seed)
    c = SoakCorpus()
    people = iter(range(100_000 + (seed % 1000) * 10_000, 10**9))

    def person() -> tuple[str, str]:
        return samples.person(next(people))

    def add(target: list[Entry], name: str, data: bytes, owner: str | None) -> None:
        target.append((name, data))
        c.owners.setdefault(sha(data), owner)

    share = {k: max(1, round(pdf_count * f)) for k, f in _MIX.items()}
    share["resume"] = (
        pdf_count - sum(v for k, v in share.items()) - 2 * share["zip_damage"] - len(_SCANNED_RESUME_SEEDS)
    )
    resumed: list[tuple[str, str]] = []
    for i in range(share["resume"]):
        name, email = person()
        c.users.append(email)
        resumed.append((name, email))
        add(c.big, f"resumes/{i:05d}.pdf", samples.resume(name, email), email)
    for i, (name, email) in enumerate(rng.sample(resumed, share["second_resume"])):
        add(c.big, f"updated/{i:05d}.pdf", samples.resume(name, email, "Updated: 2025"), email)
    for i in range(share["already_linked"]):
        name, email = person()
        c.linked_users.append(email)
        add(c.big, f"on-file/{i:05d}.pdf", samples.resume(name, email), email)
    for i, (name, email) in enumerate(rng.sample(resumed, share["near_miss"])):
        local, domain = email.split("@")
        add(c.big, f"near-miss/{i:05d}.pdf", samples.resume(name, f"{local}x@{domain}"), None)
    for i, (name, _) in enumerate(rng.sample(resumed, share["name_only"])):
        add(c.big, f"name-only/{i:05d}.pdf", samples.text_pdf([[f"Reference letter for {name}"]]), None)
    for i in range(share["stranger"]):
        add(
            c.big,
            f"strangers/{i:05d}.pdf",
            samples.resume("Pat Stranger", f"pat{i}@nowhere.example.net"),
            None,
        )
    for i in range(share["via_agency"]):
        name, email = person()
        c.users.append(email)
        doc = samples.text_pdf([[f"Forwarded by talent{i}@agency.example.org", name, f"Contact: {email}"]])
        add(c.big, f"agency/{i:05d}.pdf", doc, email)
    scan = pdfs.image_only_pdf()
    for i in range(share["scan"]):
        add(c.big, f"scans/{i:05d}.pdf", scan, None)
    for i, scan_seed in enumerate(_SCANNED_RESUME_SEEDS):
        doc = scans.scan_doc(scan_seed, 300)
        c.users.append(doc.email)
        add(c.big, f"scanned/{i:05d}.pdf", doc.data, doc.email)
    for i in range(share["damaged"]):
        name, email = person()
        c.users.append(email)  # the address is there, but a damaged file is never linked
        add(c.big, f"damaged/{i:05d}.pdf", pdfs.truncated_pdf(email), None)
    for i in range(share["locked"]):
        name, email = person()
        c.users.append(email)
        add(c.big, f"locked/{i:05d}.pdf", pdfs.password_pdf(f"Contact: {email}"), None)
    for kind in ("encrypted-entry", "bad-crc", "deflate64"):
        for i in range(share["zip_damage"]):
            name, email = person()
            c.users.append(email)
            entry = f"zip/{kind}/{i:05d}.pdf"
            c.broken_entries.add(entry)
            add(c.big, entry, samples.resume(name, email), None)
    for name, data in _JUNK:
        c.big.append((name, data))
    rng.shuffle(c.big)

    # The small ZIPs: a few PDFs identical to the big ZIP's, and résumés of their own users.
    shared = rng.sample([e for e in c.big if e[0].startswith("resumes/")], 8)
    for i, (_, data) in enumerate(shared):
        c.reused.append((f"cv/{i:03d}.pdf", data))
    for i in range(len(shared), 20):
        name, email = person()
        c.users.append(email)
        add(c.reused, f"cv/{i:03d}.pdf", samples.resume(name, email), email)
    for i in range(20):
        name, email = person()
        c.users.append(email)
        add(c.reused_second, f"cv/{i:03d}.pdf", samples.resume(name, email, "Second upload"), email)
    for i, (_, data) in enumerate(rng.sample([e for e in c.big if e[0].startswith("resumes/")], 5)):
        c.dropped.append((f"drop/{i:03d}.pdf", data))
    for i in range(5, 15):
        name, email = person()
        c.users.append(email)
        add(c.dropped, f"drop/{i:03d}.pdf", samples.resume(name, email), email)
    return c


# Scanned résumés that name a user: header layouts at 300 dpi that Tesseract reads whole (the demo's and
# the OCR e2e test's), so the oracle can demand they are linked, already linked, or failed (a scan's OCR
# may time out under the soak's load): never no match, never another user.
_SCANNED_RESUME_SEEDS = (20, 22, 23, 27)
# Fractions of the big ZIP's PDFs; plain résumés fill the rest.
_MIX = {
    "second_resume": 0.05,
    "already_linked": 0.03,
    "near_miss": 0.03,
    "name_only": 0.02,
    "stranger": 0.02,
    "via_agency": 0.01,
    "scan": 0.01,
    "damaged": 0.005,
    "locked": 0.005,
    "zip_damage": 0.002,  # per kind of damage
}
_JUNK: tuple[Entry, ...] = (
    ("__MACOSX/resumes/._00001.pdf", b"\x00\x05\x16\x07AppleDouble"),
    ("resumes/.DS_Store", b"\x00\x00\x00\x01Bud1"),
    ("README.txt", b"Exported from the HR system."),
    ("notes/summary.docx", b"PK\x03\x04 not really a document"),
)
