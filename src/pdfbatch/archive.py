"""ZIP inspection and safe, streaming extraction.

The ZIP is never held in memory: it is read through any seekable file (in production
``adapters.s3.RangedReader``, which keeps at most a couple of blocks of ranged GETs), ``zipfile``
reads the central directory through it, and each PDF entry is inflated on its own, under a hard
cap, when the caller asks for it.

Every entry name is untrusted text, for display only: nothing derives a path from it, and entries are
addressed by ``index``, their position in the central directory. Each name is decoded on its own
(``decode_name``): UTF-8 when the entry's flag (bit 11) says so *and* the bytes are UTF-8, cp437
otherwise, the encoding the ZIP specification (APPNOTE, appendix D) gives names without the flag.
cp437 rather than Latin-1 for a flag that lies: it is what the specification names, it is what
``zipfile`` shows for the same bytes unflagged, and it maps every byte >= 0x80 to a visible character,
where Latin-1 would turn 0x80-0x9F into invisible C1 controls. The raw bytes are kept too
(``Entry.raw_name``, the ledger's ``name_hex``), so the exact name is never lost to a guess.

``zipfile`` alone would fail the whole archive on one such name (it decodes flagged names as strict
UTF-8, in the central directory and again in each local header, and 3.12+ also decodes the Info-ZIP
Unicode Path extra field 0x7075 strictly). So before ``zipfile`` parses anything, the central
directory is walked once (the same walk that counts its records) and ``_NameFix`` presents ``zipfile``
a view of the file where the UTF-8 flag of exactly those entries is cleared (central record and
local header) and an undecodable 0x7075 field is renamed to an unknown tag: ``zipfile`` then reads
their names as cp437, the decoding chosen above, and never sees the bad bytes as UTF-8.

Limits (``pdfbatch.config.Limits``) and why each matters:

- ``max_zip_bytes`` (5 GiB): checked against the object size before any byte is read; it bounds
  the time and bytes one unzip run can spend, and a ZIP over it fails the batch (``zip_too_large``).
- ``max_entries`` (100,000, every entry, PDF or not): the central directory is the one thing read
  whole (about 100 bytes plus one ``ZipInfo`` per entry). Its records are counted by a streaming
  walk *before* ``zipfile`` parses them, so a directory of millions of records fails the batch
  (``too_many_entries``) without being loaded.
- ``max_pdf_bytes`` (100 MiB uncompressed, per PDF): one entry is held in memory while it is staged,
  and PDF parsing time grows with size. An entry declaring more is failed (``too_large``) without
  being inflated; while inflating, output past the *declared* size (a header that lies) stops the
  read at once, so no entry ever yields more than min(declared, limit) bytes.
- ``max_ratio`` (200, uncompressed / compressed): a zip bomb needs a huge ratio (deflate reaches
  ~1,000:1 on zeros); real PDFs are already compressed and rarely exceed 10:1. With the cap the total
  inflated output of a batch is bounded by ratio x ZIP size, not by what the headers claim.

What counts as a PDF entry, and nested ZIPs:

- A name ending ``.pdf`` (any case) is trusted by name, as before: its bytes are not looked at here (a
  ``.pdf`` that is no PDF fails ``malformed_pdf`` when it is read). Any other entry (not a folder,
  metadata or hidden file) is judged by its first bytes: ``%PDF-`` makes it a PDF entry (``resume``),
  a ZIP's local header makes one named ``.zip`` a nested ZIP, anything else is ``not_pdf`` (a ``.docx``
  is a ZIP by its bytes, and a document of its own, not a folder of PDFs). Looking costs one bounded
  read of a few bytes per such entry (never more than one inflate chunk).
- A nested ZIP one level deep is opened and its entries become entries of the batch, shown as
  ``inner.zip/cv.pdf`` and numbered after every entry of the outer ZIP (in directory order, so a re-run
  numbers them the same). The nested ZIP itself is listed ``ignored`` / ``nested_zip``. The limits are
  the outer ZIP's, shared: its entries count towards ``max_entries`` together with the outer ones (over
  it, the batch fails ``too_many_entries``), the nested ZIP is inflated (into memory, once to plan and
  once to read) only if it passes ``max_pdf_bytes`` and ``max_ratio`` as an entry, and each entry in it
  is held to ``max_ratio`` over the *outer* compressed bytes (its own ratio times the nested ZIP's).
  A nested ZIP that cannot be read is a failed entry (``corrupt_entry``, ``too_large``, ...), and a ZIP
  inside a nested ZIP is a failed entry ``nested_too_deep``: nothing deeper is opened.

Other rules that keep one hostile ZIP from hurting the function:

- Only stored and deflate entries are read. ``zipfile`` inflates bzip2 and LZMA with no bound on
  the output of one call (a 4 KiB bzip2 chunk becomes 1 GiB in memory before any check can run), and
  LZMA lets the archive choose its dictionary allocation. Those, deflate64 and the rest are failed as
  ``unsupported_compression``.
- Encrypted entries (flag bit 0, or strong encryption bit 6) are ``encrypted_zip_entry``.
- Entries whose data overlap each other, or lie outside the archive, reject the whole ZIP
  (``corrupt_zip``): that is the shape of a "quoted overlap" bomb, where thousands of entries
  re-read the same compressed bytes. Python 3.12+ ``zipfile`` also checks this; 3.11 does not.
- No ``zipfile``/``zlib`` exception escapes: the archive's are ``ArchiveRejected(BatchReason.CORRUPT_ZIP)``,
  an entry's are ``EntryRejected("corrupt_entry")``. Errors from ``fetch`` (e.g.
  ``DependencyUnavailable``) pass through untouched so the caller can retry.
"""

from __future__ import annotations

import bisect
import copy
import io
import struct
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from types import TracebackType
from typing import IO, TYPE_CHECKING, BinaryIO, Literal, Protocol

from pdfbatch.config import Limits
from pdfbatch.errors import ArchiveRejected, EntryRejected, PdfBatchError
from pdfbatch.model import BatchReason, Reason

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = [
    "ArchiveRejected",
    "Entry",
    "EntryRejected",
    "OpenedArchive",
    "Plan",
    "classify_name",
    "decode_name",
    "inspect",
    "open_archive",
    "open_entry",
    "read_entry",
]

MiB = 1024 * 1024
_CHUNK = 1 * MiB  # inflate this much at a time: zipfile's deflate output per call is bounded by it

EntryKind = Literal["pdf", "ignored"]

_READABLE_METHODS = frozenset({zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED})
_FLAG_ENCRYPTED = 0x01
_FLAG_PATCHED = 0x20
_FLAG_STRONG_ENCRYPTION = 0x40

_EOCD = struct.Struct("<4s4H2LH")  # end of central directory, 22 bytes
_EOCD_SIG = b"PK\x05\x06"
_EOCD64_LOCATOR = struct.Struct("<4sLQL")  # 20 bytes
_EOCD64_LOCATOR_SIG = b"PK\x06\x07"
_EOCD64 = struct.Struct("<4sQ2H2L4Q")  # 56 bytes
_EOCD64_SIG = b"PK\x06\x06"
# Central directory record: signature, flags, and the lengths of name, extra field and comment.
_CD_HEADER = struct.Struct("<4s4xH18xHHH12x")
_CD_SIG = b"PK\x01\x02"
_LOCAL_HEADER_SIZE = 30
_FLAG_UTF8 = 0x800  # general purpose bit 11: name (and comment) in UTF-8
_CD_FLAG_HIGH_BYTE = 9  # the byte of bit 11 in a central record: flags at offset 8, little-endian
_LOCAL_FLAG_HIGH_BYTE = 7  # and in a local header: flags at offset 6
_UNICODE_PATH = 0x7075  # Info-ZIP Unicode Path extra field: version (1), CRC-32 of the name, UTF-8 name
_MAX_COMMENT = 0xFFFF

# What zipfile and zlib raise on malformed input: UnicodeDecodeError (a ValueError) for a name
# flagged UTF-8 that is not, EOFError for data cut short, NotImplementedError/RuntimeError for
# features (patched data, encryption) that a corrupted flag can switch on.
_ZIP_ERRORS: tuple[type[Exception], ...] = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    struct.error,
    ValueError,
    OverflowError,
    NotImplementedError,
    RuntimeError,
)


class Readable(Protocol):
    """What inspection needs from a file: a seekable byte reader."""

    def read(self, n: int = -1, /) -> bytes: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...

    def tell(self) -> int: ...


# --- The plan: every entry, classified --------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One entry of the ZIP as its central directory describes it."""

    index: int  # position in the central directory: the entry's identity
    name: str  # decode_name(raw_name, its flags); for display only, never a path
    kind: EntryKind
    reason: Reason | None  # None for a readable PDF; why it is ignored, or why the PDF failed
    compressed_size: int
    file_size: int
    crc: int
    raw_name: bytes = b""  # the name's bytes exactly as written in the central directory
    # An entry of a nested ZIP: the index of the outer entry holding it, and the entry as the nested
    # ZIP's own directory describes it (its index there, its name there); None for an outer entry.
    container: int | None = None
    member: Entry | None = None


@dataclass(frozen=True)
class Plan:
    """The classified entries of one ZIP."""

    entries: tuple[Entry, ...]
    pdf_entries: tuple[Entry, ...]  # counted, including those failed at inspection
    ignored: tuple[Entry, ...]  # listed, never counted

    @classmethod
    def of(cls, entries: tuple[Entry, ...]) -> Plan:
        """A plan over ``entries`` (in index order)."""
        return cls(
            entries=entries,
            pdf_entries=tuple(e for e in entries if e.kind == "pdf"),
            ignored=tuple(e for e in entries if e.kind == "ignored"),
        )

    @property
    def total_files(self) -> int:
        """How many entries count towards the batch."""
        return len(self.pdf_entries)


def decode_name(raw: bytes, flags: int) -> str:
    """How an entry name is shown: UTF-8 if flagged (bit 11) and valid, else cp437 (never fails)."""
    if flags & _FLAG_UTF8 and _is_utf8(raw):
        return raw.decode("utf-8")
    return raw.decode("cp437")  # every byte has a character: this cannot fail


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")  # strict: no surrogates, no overlong forms
    except UnicodeDecodeError:
        return False
    return True


def classify_name(name: str) -> Reason | None:
    """Why an entry with this name is ignored, or None when it is a PDF entry by its name (``not_pdf``
    is the name's verdict only: the entry's first bytes may still make it a PDF or a nested ZIP)."""
    # Both separators count: some Windows tools write backslashes. This is classification only.
    basename = name.replace("\\", "/").rsplit("/", 1)[-1]
    if name.endswith(("/", "\\")):
        return Reason.DIRECTORY
    if "__MACOSX" in name.replace("\\", "/").split("/") or basename.startswith("._"):
        return Reason.MACOS_METADATA
    if basename.startswith("."):
        return Reason.HIDDEN_FILE
    if not basename.lower().endswith(".pdf"):
        return Reason.NOT_PDF
    return None


def _pdf_problem(info: zipfile.ZipInfo, limits: Limits) -> Reason | None:
    """Why a PDF entry cannot be read, judged from the central directory alone."""
    if info.flag_bits & (_FLAG_ENCRYPTED | _FLAG_STRONG_ENCRYPTION):
        return Reason.ENCRYPTED_ZIP_ENTRY
    if info.compress_type not in _READABLE_METHODS or info.flag_bits & _FLAG_PATCHED:
        return Reason.UNSUPPORTED_COMPRESSION
    if info.file_size > limits.max_pdf_bytes:
        return Reason.TOO_LARGE
    if info.file_size > 0 and (
        info.compress_size == 0 or info.file_size / info.compress_size > limits.max_ratio
    ):
        return Reason.TOO_LARGE
    return None


def _entry(index: int, info: zipfile.ZipInfo, limits: Limits) -> Entry:
    # zipfile's .filename is cut at a NUL byte (and may come from an extra field): orig_filename is what
    # the central record holds, decoded by zipfile as decode_name would once _NameFix has cleared the
    # flag of names that are not UTF-8 (so the two always agree, and encoding gives the bytes back).
    name = info.orig_filename
    raw = name.encode("utf-8" if info.flag_bits & _FLAG_UTF8 else "cp437")
    ignored = classify_name(name)
    return Entry(
        index=index,
        name=name,
        kind="ignored" if ignored is not None else "pdf",
        reason=ignored if ignored is not None else _pdf_problem(info, limits),
        compressed_size=info.compress_size,
        file_size=info.file_size,
        crc=info.CRC,
        raw_name=raw,
    )


# --- Opening the archive -----------------------------------------------------------------------


class OpenedArchive:
    """An open ZIP and its plan; entries are read one at a time with ``open``/``read``."""

    def __init__(self, zf: zipfile.ZipFile, plan: Plan, limits: Limits) -> None:
        self.zip = zf
        self.plan = plan
        self.limits = limits
        self._nested: tuple[int, zipfile.ZipFile] | None = None  # the last nested ZIP opened, kept open

    def open(self, entry: Entry) -> BinaryIO:
        """Stream one PDF entry (see ``open_entry``), of this ZIP or of a nested one."""
        return open_entry(*self._source(entry))

    def read(self, entry: Entry) -> bytes:
        """All bytes of one PDF entry (see ``read_entry``)."""
        return read_entry(*self._source(entry))

    def _source(self, entry: Entry) -> tuple[zipfile.ZipFile, Entry, Limits]:
        """The ZIP an entry is read from, the entry as that ZIP's directory describes it, its limits."""
        if entry.container is None or entry.member is None:
            return self.zip, entry, self.limits
        if entry.kind != "pdf" or entry.reason is not None:  # refused as open_entry would, never inflated
            return self.zip, entry, self.limits
        container = self.plan.entries[entry.container]
        return self._nested_zip(container), entry.member, _inner_limits(self.limits, container)

    def _nested_zip(self, container: Entry) -> zipfile.ZipFile:
        # Entries are read in plan order, so those of one nested ZIP come together: one inflate each.
        if self._nested is None or self._nested[0] != container.index:
            self._close_nested()
            try:
                zf, _ = _inflate_nested(self.zip, container, self.limits, self.limits.max_entries)
            except ArchiveRejected as exc:  # it opened when planned: the bytes changed under us
                raise EntryRejected(Reason.CORRUPT_ENTRY, str(exc)) from exc
            except PdfBatchError:
                raise
            except _ZIP_ERRORS as exc:
                raise EntryRejected(Reason.CORRUPT_ENTRY, f"{type(exc).__name__}: {exc}") from exc
            self._nested = (container.index, zf)
        return self._nested[1]

    def _close_nested(self) -> None:
        if self._nested is not None:
            self._nested[1].close()
            self._nested = None

    def close(self) -> None:
        """Close the ZipFile (a file object passed in stays open: it belongs to the caller)."""
        self._close_nested()
        self.zip.close()

    def __enter__(self) -> OpenedArchive:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def open_archive(fileobj: Readable, limits: Limits, size: int | None = None) -> OpenedArchive:
    """Check the whole ZIP, read its central directory once and classify every entry.

    ``size`` is the object's size when the caller knows it (e.g. S3 ContentLength), so a ZIP over
    ``max_zip_bytes`` is refused before any byte is read. Raises ``ArchiveRejected`` with
    ``zip_too_large``, ``too_many_entries`` or ``corrupt_zip``.
    """
    if size is not None and size > limits.max_zip_bytes:
        raise ArchiveRejected(BatchReason.ZIP_TOO_LARGE, f"{size} bytes > {limits.max_zip_bytes}")
    try:
        actual = fileobj.seek(0, io.SEEK_END)
        if actual > limits.max_zip_bytes:
            raise ArchiveRejected(BatchReason.ZIP_TOO_LARGE, f"{actual} bytes > {limits.max_zip_bytes}")
        zf, infos = _open_zip(fileobj, actual, limits.max_entries)
        plan = _plan(zf, infos, limits)
    except PdfBatchError:
        raise
    except _ZIP_ERRORS as exc:
        raise ArchiveRejected(BatchReason.CORRUPT_ZIP, f"{type(exc).__name__}: {exc}") from exc
    return OpenedArchive(zf, plan, limits)


def _open_zip(
    fileobj: Readable, size: int, max_entries: int
) -> tuple[zipfile.ZipFile, list[zipfile.ZipInfo]]:
    """Open a ZIP whose directory holds at most ``max_entries`` records (raises ``ArchiveRejected``)."""
    if not looks_like_zip(fileobj, size):
        raise ArchiveRejected(BatchReason.NOT_A_ZIP, what_it_is(fileobj))
    cd_start, cd_size = _find_central_directory(fileobj, size)
    walk = _walk_directory(fileobj, cd_start, cd_size, max_entries)
    view: Readable = fileobj
    if walk.fixes:
        view = _NameFix(fileobj, walk.fixes)
    zf = zipfile.ZipFile(view)
    infos = zf.infolist()
    if len(infos) > max_entries:  # cannot happen after the walk; kept as a backstop
        raise ArchiveRejected(BatchReason.TOO_MANY_ENTRIES)
    _check_layout(infos, zf.start_dir)
    if isinstance(view, _NameFix):
        # Their local headers too, where zipfile decodes the name again when an entry is opened.
        view.add(infos[i].header_offset + _LOCAL_FLAG_HIGH_BYTE for i in walk.unflag if i < len(infos))
    return zf, infos


_PDF_HEAD = b"%PDF-"
_ENTRY_ZIP_HEADS = (b"PK\x03\x04", b"PK\x05\x06")  # a ZIP stored as an entry starts with one of these


def _head(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """The first bytes of an entry whose name says nothing (b"" when it cannot be read as it stands)."""
    if (
        info.file_size < len(_PDF_HEAD)
        or info.flag_bits & (_FLAG_ENCRYPTED | _FLAG_STRONG_ENCRYPTION | _FLAG_PATCHED)
        or info.compress_type not in _READABLE_METHODS
    ):
        return b""
    try:
        with zf.open(info) as stream:
            return stream.read(8)  # a bounded read: zipfile inflates at most one small chunk for it
    except _ZIP_ERRORS:
        return b""  # a damaged entry with no PDF name stays not_pdf, as it was before any look


def _sniffed(zf: zipfile.ZipFile, info: zipfile.ZipInfo, entry: Entry, limits: Limits) -> tuple[Entry, bool]:
    """An entry named as no PDF, judged by its bytes: (the entry, whether it is a nested ZIP)."""
    if entry.reason != Reason.NOT_PDF:
        return entry, False
    head = _head(zf, info)
    if head.startswith(_PDF_HEAD):
        return replace(entry, kind="pdf", reason=_pdf_problem(info, limits)), False
    # Named .zip too: Word, Excel, OpenDocument and EPUB files are ZIPs by their bytes, and are documents
    # of their own (listed not_pdf), not folders of PDFs.
    return entry, head[:4] in _ENTRY_ZIP_HEADS and entry.name.lower().endswith(".zip")


def _inner_limits(limits: Limits, container: Entry) -> Limits:
    """The limits an entry of a nested ZIP is read under: the ratio is over the outer compressed bytes."""
    ratio = container.file_size / container.compressed_size if container.compressed_size else 1.0
    return replace(limits, max_ratio=limits.max_ratio / max(1.0, ratio))


def _plan(zf: zipfile.ZipFile, infos: list[zipfile.ZipInfo], limits: Limits) -> Plan:
    """Classify every entry, and those of each nested ZIP (numbered after the outer ones)."""
    outer: list[Entry] = []
    nested: list[Entry] = []
    for i, info in enumerate(infos):
        entry, is_zip = _sniffed(zf, info, _entry(i, info, limits), limits)
        if is_zip:
            entry, inner = _open_nested(zf, info, entry, limits, len(infos) + len(nested))
            nested += inner
        outer.append(entry)
    return Plan.of(tuple(outer + nested))


def _open_nested(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, entry: Entry, limits: Limits, first_index: int
) -> tuple[Entry, list[Entry]]:
    """A nested ZIP: (its own entry, its entries as entries of the batch from ``first_index`` on)."""
    problem = _pdf_problem(info, limits)  # as an entry, under the entry limits: never inflated past them
    if problem is not None:
        return replace(entry, kind="pdf", reason=problem), []
    try:
        inner_zf, inner_infos = _inflate_nested(zf, entry, limits, limits.max_entries - first_index)
    except EntryRejected as exc:
        return replace(entry, kind="pdf", reason=Reason(exc.reason)), []
    except ArchiveRejected as exc:
        if exc.reason == BatchReason.TOO_MANY_ENTRIES:
            raise  # the limit is the batch's, whichever ZIP holds the entries
        return replace(entry, kind="pdf", reason=Reason.CORRUPT_ENTRY), []
    except _ZIP_ERRORS:
        return replace(entry, kind="pdf", reason=Reason.CORRUPT_ENTRY), []
    inner_limits = _inner_limits(limits, entry)
    members = []
    with inner_zf:
        for j, inner_info in enumerate(inner_infos):
            member, is_zip = _sniffed(inner_zf, inner_info, _entry(j, inner_info, inner_limits), inner_limits)
            if is_zip:
                member = replace(member, kind="pdf", reason=Reason.NESTED_TOO_DEEP)
            members.append(
                replace(
                    member,
                    index=first_index + j,
                    name=f"{entry.name}/{member.name}",
                    raw_name=entry.raw_name + b"/" + member.raw_name,
                    container=entry.index,
                    member=member,
                )
            )
    return replace(entry, reason=Reason.NESTED_ZIP), members


def _inflate_nested(
    zf: zipfile.ZipFile, entry: Entry, limits: Limits, max_entries: int
) -> tuple[zipfile.ZipFile, list[zipfile.ZipInfo]]:
    """Inflate a nested ZIP (bounded as a PDF entry is) and open it from memory."""
    data = read_entry(zf, replace(entry, kind="pdf", reason=None), limits)
    return _open_zip(io.BytesIO(data), len(data), max(0, max_entries))


_ZIP_HEADS = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")  # an entry, an empty ZIP, a spanned one
# What an upload that is not a ZIP most often is: named in the log line of its not_a_zip batch.
_KNOWN_HEADS = (
    (b"%PDF-", "a PDF"),
    (b"\x1f\x8b", "gzip"),
    (b"Rar!", "RAR"),
    (b"7z\xbc\xaf", "7-Zip"),
    (b"\x89PNG", "PNG"),
    (b"\xff\xd8\xff", "JPEG"),
)


def looks_like_zip(fp: Readable, size: int) -> bool:
    """A ZIP by its bytes, not its name: a local header (or an empty ZIP's end record) at its start, or
    an end of central directory record in its last 64 KiB (a ZIP with data before it, as in a
    self-extracting archive). A damaged ZIP still looks like one (it fails ``corrupt_zip`` after)."""
    # The tail first: _find_central_directory reads the same bytes next (one ranged GET for both), and
    # only a ZIP without an end record costs a read of its first bytes.
    tail_start = max(0, size - _EOCD.size - _MAX_COMMENT)
    fp.seek(tail_start)
    if _EOCD_SIG in fp.read(size - tail_start):
        return True
    fp.seek(0)
    return fp.read(4) in _ZIP_HEADS


def what_it_is(fp: Readable) -> str:
    """A few words on what an upload that is not a ZIP looks like (for the log; its name is not read)."""
    fp.seek(0)
    head = fp.read(8)
    if not head:
        return "empty"
    return next((what for magic, what in _KNOWN_HEADS if head.startswith(magic)), "unknown bytes")


def inspect(fileobj: Readable, limits: Limits, size: int | None = None) -> Plan:
    """Classify every entry of the ZIP from its central directory; no entry is inflated."""
    with open_archive(fileobj, limits, size) as opened:
        return opened.plan


def _corrupt(detail: str) -> ArchiveRejected:
    return ArchiveRejected(BatchReason.CORRUPT_ZIP, detail)


def _find_central_directory(fp: Readable, size: int) -> tuple[int, int]:
    """Locate the central directory the way zipfile does; return (start, size)."""
    if size < _EOCD.size:
        raise _corrupt("too short to be a ZIP")
    tail_start = max(0, size - _EOCD.size - _MAX_COMMENT)
    fp.seek(tail_start)
    tail = fp.read(size - tail_start)
    # zipfile first tries a record with no comment at the very end, then searches backwards.
    if tail[-_EOCD.size : -_EOCD.size + 4] == _EOCD_SIG and tail[-2:] == b"\0\0":
        pos = len(tail) - _EOCD.size
    else:
        pos = tail.rfind(_EOCD_SIG)
        if pos < 0 or pos + _EOCD.size > len(tail):
            raise _corrupt("no end of central directory record")
    _, _, _, _, _, cd_size, _, _ = _EOCD.unpack_from(tail, pos)
    eocd = tail_start + pos
    cd_end = eocd
    if eocd >= _EOCD64_LOCATOR.size:
        fp.seek(eocd - _EOCD64_LOCATOR.size)
        locator = fp.read(_EOCD64_LOCATOR.size)
        if len(locator) == _EOCD64_LOCATOR.size and locator[:4] == _EOCD64_LOCATOR_SIG:
            _, disk, _, disks = _EOCD64_LOCATOR.unpack(locator)
            if disk != 0 or disks > 1:
                raise _corrupt("multi-disk ZIP")
            rec_start = eocd - _EOCD64_LOCATOR.size - _EOCD64.size
            if rec_start >= 0:
                fp.seek(rec_start)
                rec = fp.read(_EOCD64.size)
                if len(rec) == _EOCD64.size and rec[:4] == _EOCD64_SIG:
                    cd_size = _EOCD64.unpack(rec)[8]
                    cd_end = rec_start
    # Like zipfile: the directory ends where the end records begin (data may be prepended).
    cd_start = cd_end - cd_size
    if cd_start < 0:
        raise _corrupt("central directory larger than the file")
    return cd_start, cd_size


@dataclass
class _Walk:
    """What one pass over the central directory found."""

    count: int = 0
    unflag: list[int] = dataclass_field(default_factory=list)  # indices flagged UTF-8, names not UTF-8
    fixes: dict[int, int] = dataclass_field(default_factory=dict)  # file position -> AND mask to apply


def _walk_directory(fp: Readable, start: int, size: int, max_entries: int) -> _Walk:
    """Walk the central directory's records without keeping them; refuse more than ``max_entries``.

    zipfile parses every record in the directory whatever count the end record claims, so the
    count that matters is this one. The same pass finds the names zipfile could not decode (flagged
    UTF-8 but not UTF-8, or an undecodable Unicode Path field) and the bytes ``_NameFix`` changes.
    """
    walk = _Walk()
    offset = 0
    buf = b""
    buf_start = 0  # directory offset of buf[0]

    def have(n: int) -> bytes:
        """The directory's bytes from ``offset`` to ``offset + n`` (reading on as needed)."""
        nonlocal buf, buf_start
        need = offset + n - buf_start
        if need > len(buf):
            fp.seek(start + buf_start + len(buf))
            more = fp.read(min(max(need - len(buf), _CHUNK), size - buf_start - len(buf)))
            buf = buf[offset - buf_start :] + more
            buf_start = offset
            if len(buf) < n:
                raise _corrupt("truncated central directory")
        return buf[offset - buf_start : offset - buf_start + n]

    while offset < size:
        if walk.count >= max_entries:
            raise ArchiveRejected(BatchReason.TOO_MANY_ENTRIES, f"more than {max_entries} entries")
        sig, flags, n_name, n_extra, n_comment = _CD_HEADER.unpack(have(_CD_HEADER.size))
        if sig != _CD_SIG:
            raise _corrupt("bad central directory record")
        if flags & _FLAG_UTF8 or n_extra:
            record = have(_CD_HEADER.size + n_name + n_extra)
            name = record[_CD_HEADER.size : _CD_HEADER.size + n_name]
            if flags & _FLAG_UTF8 and not _is_utf8(name):
                walk.unflag.append(walk.count)
                walk.fixes[start + offset + _CD_FLAG_HIGH_BYTE] = ~(_FLAG_UTF8 >> 8) & 0xFF
            extra_at = start + offset + _CD_HEADER.size + n_name
            for pos in _bad_unicode_paths(record[_CD_HEADER.size + n_name :], name):
                walk.fixes[extra_at + pos] = 0  # the field's tag becomes 0x0000: unknown, skipped
                walk.fixes[extra_at + pos + 1] = 0
        offset += _CD_HEADER.size + n_name + n_extra + n_comment
        walk.count += 1
    return walk


def _bad_unicode_paths(extra: bytes, name: bytes) -> list[int]:
    """Offsets of Unicode Path fields (0x7075) that zipfile 3.12+ would fail the whole archive on."""
    found = []
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, pos)
        data = extra[pos + 4 : pos + 4 + length]
        # zipfile reads the field when its version is 1 and its CRC is the name's, and then insists
        # on UTF-8; a structurally broken extra field fails it anyway (corrupt_zip), so leave those.
        if tag == _UNICODE_PATH and len(data) >= 5 and pos + 4 + length <= len(extra):
            version, crc = struct.unpack_from("<BL", data)
            if version == 1 and crc == zlib.crc32(name) and not _is_utf8(data[5:]):
                found.append(pos)
        pos += 4 + length
    return found


class _NameFix:
    """A view of the ZIP where a few bytes read differently: ``fixes`` maps a position to an AND mask.

    Only built for an archive with names ``zipfile`` could not decode; reads pass through otherwise
    unchanged (seek and tell are the file's own).
    """

    def __init__(self, fp: Readable, fixes: dict[int, int]) -> None:
        self._fp = fp
        self._masks = dict(fixes)
        self._positions = sorted(self._masks)

    def add(self, positions: Iterable[int]) -> None:
        """Clear the UTF-8 flag at these local header positions too."""
        for pos in positions:
            self._masks[pos] = ~(_FLAG_UTF8 >> 8) & 0xFF
        self._positions = sorted(self._masks)

    def read(self, n: int = -1, /) -> bytes:
        at = self._fp.tell()
        data = self._fp.read(n)
        lo = bisect.bisect_left(self._positions, at)
        hi = bisect.bisect_left(self._positions, at + len(data))
        if lo == hi:
            return data
        out = bytearray(data)
        for pos in self._positions[lo:hi]:
            out[pos - at] &= self._masks[pos]
        return bytes(out)

    def seek(self, offset: int, whence: int = 0, /) -> int:
        return self._fp.seek(offset, whence)

    def tell(self) -> int:
        return self._fp.tell()

    def seekable(self) -> bool:
        return True


def _check_layout(infos: list[zipfile.ZipInfo], cd_start: int) -> None:
    """Refuse entries whose data overlap or fall outside the archive (quoted-overlap bombs)."""
    spans = sorted((info.header_offset, info.compress_size) for info in infos)
    for i, (offset, compressed) in enumerate(spans):
        limit = spans[i + 1][0] if i + 1 < len(spans) else cd_start
        if offset < 0 or offset + _LOCAL_HEADER_SIZE + compressed > limit:
            raise _corrupt("entries overlap or lie outside the archive")


# --- Reading one entry -------------------------------------------------------------------------


class _BoundedEntry(io.RawIOBase):
    """Inflate one entry, refusing any byte past its declared size, a bad CRC and any library error."""

    def __init__(self, stream: IO[bytes], declared: int, crc: int) -> None:
        super().__init__()
        self._stream = stream
        self._declared = declared
        self._expected_crc = crc
        self._crc = 0
        self._total = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Buffer) -> int:
        with memoryview(buffer) as raw, raw.cast("B") as view:
            # Always a bounded read: ZipExtFile.read(-1) would inflate without limit.
            data = self._read(min(len(view), _CHUNK))
            view[: len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        out = io.BytesIO()  # getvalue() hands over its buffer without a copy
        while data := self._read(_CHUNK):
            out.write(data)
        return out.getvalue()

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()

    def _read(self, n: int) -> bytes:
        if n <= 0:
            return b""
        try:
            data = self._stream.read(n)
        except PdfBatchError:
            raise
        except _ZIP_ERRORS as exc:
            raise EntryRejected(Reason.CORRUPT_ENTRY, f"{type(exc).__name__}: {exc}") from exc
        self._total += len(data)
        if self._total > self._declared:
            raise EntryRejected(Reason.TOO_LARGE, f"inflates past its declared {self._declared} bytes")
        if data:
            self._crc = zlib.crc32(data, self._crc)
        elif self._total < self._declared:
            raise EntryRejected(Reason.CORRUPT_ENTRY, f"ends at {self._total} of {self._declared} bytes")
        elif self._crc != self._expected_crc:
            raise EntryRejected(Reason.CORRUPT_ENTRY, "CRC mismatch")
        return data


def open_entry(zf: zipfile.ZipFile, entry: Entry, limits: Limits) -> BinaryIO:
    """Stream one PDF entry; reading raises ``EntryRejected`` (too_large, corrupt_entry, ...).

    Output never exceeds the entry's declared size, itself at most ``max_pdf_bytes``: the first
    byte past it stops the read. The limits are checked again here from the central directory.
    """
    if entry.kind != "pdf":
        raise ValueError(f"entry {entry.index} is not a PDF entry")
    if entry.reason is not None:
        raise EntryRejected(entry.reason)
    infos = zf.infolist()
    if not 0 <= entry.index < len(infos) or infos[entry.index].orig_filename != entry.name:
        raise ValueError(f"entry {entry.index} is not from this archive")
    info = infos[entry.index]
    problem = _pdf_problem(info, limits)
    if problem is not None:
        raise EntryRejected(problem)
    # zipfile silently truncates output at file_size, and checks the CRC in the same call that
    # yields the excess byte, so a lying header would pass (forged CRC) or look merely corrupt.
    # Give zipfile room past the declared size and let _BoundedEntry judge size and CRC itself:
    # ZipExtFile skips its CRC check for a ZipInfo without a CRC attribute.
    roomy = copy.copy(info)
    roomy.file_size = info.file_size + 2 * _CHUNK
    del roomy.CRC
    try:
        stream = zf.open(roomy)
    except PdfBatchError:
        raise
    except _ZIP_ERRORS as exc:
        raise EntryRejected(Reason.CORRUPT_ENTRY, f"{type(exc).__name__}: {exc}") from exc
    return io.BufferedReader(_BoundedEntry(stream, info.file_size, info.CRC), buffer_size=_CHUNK)


def read_entry(zf: zipfile.ZipFile, entry: Entry, limits: Limits) -> bytes:
    """All bytes of one PDF entry; at most this entry is held in memory."""
    with open_entry(zf, entry, limits) as stream:
        return stream.read()
