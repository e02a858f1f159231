"""ZIP inspection and safe, streaming extraction.

The ZIP is never held in memory: it is read through any seekable file (in production
``adapters.s3.RangedReader``, which keeps at most a couple of blocks of ranged GETs), ``zipfile``
reads the central directory through it, and each PDF entry is inflated on its own, under a hard
cap, when the caller asks for it.

Every entry name is untrusted text: it is kept exactly as written (decoded as ``zipfile`` does:
UTF-8 when the entry's flag says so, cp437 otherwise) for display, and nothing derives a path from
it. Entries are addressed by ``index``, their position in the central directory.

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

import copy
import io
import struct
import zipfile
import zlib
from dataclasses import dataclass
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
_CD_HEADER = struct.Struct("<4s24xHHH12x")  # central directory record: signature and 3 lengths
_CD_SIG = b"PK\x01\x02"
_LOCAL_HEADER_SIZE = 30
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
    name: str  # exactly as written in the ZIP; for display only, never a path
    kind: EntryKind
    reason: Reason | None  # None for a readable PDF; why it is ignored, or why the PDF failed
    compressed_size: int
    file_size: int
    crc: int


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


def classify_name(name: str) -> Reason | None:
    """Why an entry with this name is ignored, or None when it is a PDF entry."""
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
    name = info.orig_filename  # zipfile's .filename is cut at a NUL byte; show what is really there
    ignored = classify_name(name)
    return Entry(
        index=index,
        name=name,
        kind="ignored" if ignored is not None else "pdf",
        reason=ignored if ignored is not None else _pdf_problem(info, limits),
        compressed_size=info.compress_size,
        file_size=info.file_size,
        crc=info.CRC,
    )


# --- Opening the archive -----------------------------------------------------------------------


class OpenedArchive:
    """An open ZIP and its plan; entries are read one at a time with ``open``/``read``."""

    def __init__(self, zf: zipfile.ZipFile, plan: Plan, limits: Limits) -> None:
        self.zip = zf
        self.plan = plan
        self.limits = limits

    def open(self, entry: Entry) -> BinaryIO:
        """Stream one PDF entry (see ``open_entry``)."""
        return open_entry(self.zip, entry, self.limits)

    def read(self, entry: Entry) -> bytes:
        """All bytes of one PDF entry (see ``read_entry``)."""
        return read_entry(self.zip, entry, self.limits)

    def close(self) -> None:
        """Close the ZipFile (a file object passed in stays open: it belongs to the caller)."""
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
        cd_start, cd_size = _find_central_directory(fileobj, actual)
        _count_records(fileobj, cd_start, cd_size, limits.max_entries)
        zf = zipfile.ZipFile(fileobj)
        infos = zf.infolist()
        if len(infos) > limits.max_entries:  # cannot happen after the walk; kept as a backstop
            raise ArchiveRejected(BatchReason.TOO_MANY_ENTRIES)
        _check_layout(infos, zf.start_dir)
        plan = Plan.of(tuple(_entry(i, info, limits) for i, info in enumerate(infos)))
    except PdfBatchError:
        raise
    except _ZIP_ERRORS as exc:
        raise ArchiveRejected(BatchReason.CORRUPT_ZIP, f"{type(exc).__name__}: {exc}") from exc
    return OpenedArchive(zf, plan, limits)


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


def _count_records(fp: Readable, start: int, size: int, max_entries: int) -> int:
    """Walk the central directory's records without keeping them; refuse more than ``max_entries``.

    zipfile parses every record in the directory whatever count the end record claims, so the
    count that matters is this one.
    """
    count = 0
    offset = 0
    buf = b""
    buf_start = 0  # directory offset of buf[0]
    while offset < size:
        if count >= max_entries:
            raise ArchiveRejected(BatchReason.TOO_MANY_ENTRIES, f"more than {max_entries} entries")
        need = offset + _CD_HEADER.size - buf_start
        if need > len(buf):
            fp.seek(start + buf_start + len(buf))
            more = fp.read(min(max(need - len(buf), _CHUNK), size - buf_start - len(buf)))
            buf = buf[offset - buf_start :] + more
            buf_start = offset
            if len(buf) < _CD_HEADER.size:
                raise _corrupt("truncated central directory")
        sig, n_name, n_extra, n_comment = _CD_HEADER.unpack_from(buf, offset - buf_start)
        if sig != _CD_SIG:
            raise _corrupt("bad central directory record")
        offset += _CD_HEADER.size + n_name + n_extra + n_comment
        count += 1
    return count


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
