"""archive.py (and adapters.s3.RangedReader, the file it reads through in production): which entries
count, which limits refuse what, and that nothing hostile gets inflated."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import textwrap
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.examples import examples
from fixtures.zips import (
    BZIP2,
    DEFLATE64,
    DEFLATED,
    LZMA,
    STORED,
    TRICKY,
    TRICKY_NESTED,
    GiB,
    MiB,
    RawEntry,
    bad_crc_zip,
    corrupt_deflate_zip,
    encrypted_entry_zip,
    lying_header_zip,
    make_zip,
    many_entries_zip,
    not_a_zip,
    overlapping_zip,
    pdf_bytes,
    raw_zip,
    short_entry_zip,
    tricky_zip,
    truncated_zip,
    unicode_path_extra,
    write_big_zip,
    zip_bomb_bytes,
    zipfile_zip,
)
from pdfbatch import archive
from pdfbatch.adapters.s3 import RangedReader
from pdfbatch.archive import Entry, Plan, inspect, open_archive, read_entry
from pdfbatch.config import Limits
from pdfbatch.errors import ArchiveRejected, DependencyUnavailable, EntryRejected
from pdfbatch.model import Reason

LIMITS = Limits()


class CountingFetch:
    """A fetch over bytes in memory that records every range asked for."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.ranges: list[tuple[int, int]] = []

    def __call__(self, start: int, end_inclusive: int) -> bytes:
        self.ranges.append((start, end_inclusive))
        return self.data[start : end_inclusive + 1]


def ranged(data: bytes, **kwargs: int) -> tuple[RangedReader, CountingFetch]:
    fetch = CountingFetch(data)
    return RangedReader(fetch, len(data), **kwargs), fetch


def plan_of(data: bytes, limits: Limits = LIMITS) -> Plan:
    return inspect(io.BytesIO(data), limits)


def by_name(plan: Plan, name: str) -> Entry:
    (entry,) = [e for e in plan.entries if e.name == name]
    return entry


def rejected_reason(fn: Callable[[], object]) -> str:
    with pytest.raises((ArchiveRejected, EntryRejected)) as info:
        fn()
    assert isinstance(info.value, ArchiveRejected | EntryRejected)
    return info.value.reason


# --- Which entries count -------------------------------------------------------------------------


def test_every_odd_name_is_classified_and_kept_exactly_as_written() -> None:
    # GIVEN a ZIP with traversal, absolute, backslash, non-ASCII, duplicate, metadata and dir names
    data = tricky_zip()

    # WHEN it is inspected
    plan = plan_of(data)

    # THEN each entry has the kind and reason of the table, in central directory order, and the nested
    # ZIP's entries follow them
    assert [e.index for e in plan.entries] == list(range(len(TRICKY) + len(TRICKY_NESTED)))
    for entry, (name, _, kind, reason) in zip(plan.entries, TRICKY, strict=False):
        shown = name.decode("cp437") if isinstance(name, bytes) else name
        assert (entry.name, entry.kind, entry.reason) == (shown, kind, reason)
    assert [(e.index, e.name, e.kind, e.reason) for e in plan.entries[len(TRICKY) :]] == TRICKY_NESTED
    # AND only PDF entries count; the rest are listed
    everything = [row[2] for row in TRICKY] + [row[2] for row in TRICKY_NESTED]
    assert plan.total_files == len(plan.pdf_entries) == everything.count("pdf")
    assert len(plan.ignored) == everything.count("ignored")
    assert set(plan.entries) == set(plan.pdf_entries) | set(plan.ignored)


def test_name_without_utf8_flag_is_decoded_as_cp437_like_zipfile() -> None:
    # GIVEN an entry whose name bytes are not flagged UTF-8
    data = make_zip([(b"caf\x82.pdf", pdf_bytes())])

    # WHEN inspected THEN the name is what zipfile shows
    assert plan_of(data).entries[0].name == "café.pdf" == zipfile.ZipFile(io.BytesIO(data)).namelist()[0]


@pytest.mark.parametrize(
    ("raw", "flags", "shown"),
    [
        (b"Jos\xe9.pdf", 0x800, "Jos\u0398.pdf"),  # flagged UTF-8, but Latin-1 bytes: cp437
        (b"\xff\xfe\x80.pdf", 0x800, "\u00a0\u25a0\u00c7.pdf"),  # not UTF-8 at all: cp437
        (b"\xed\xa0\x80.pdf", 0x800, "\u03c6\u00e1\u00c7.pdf"),  # an encoded surrogate is not UTF-8
        ("Jos\u00e9.pdf".encode(), 0x800, "Jos\u00e9.pdf"),  # flagged and valid: UTF-8
        ("Jos\u00e9.pdf".encode(), 0, "Jos\u251c\u2310.pdf"),  # UTF-8 bytes without the flag: cp437
    ],
)
def test_each_name_is_decoded_on_its_own_and_a_bad_one_fails_nothing(
    raw: bytes, flags: int, shown: str
) -> None:
    # GIVEN an entry whose name bytes may contradict its UTF-8 flag, between two ordinary entries
    data = raw_zip(
        [
            RawEntry("before.pdf", pdf_bytes("before")),
            RawEntry(raw, pdf_bytes("odd"), flags=flags),
            RawEntry("after.pdf", pdf_bytes("after")),
        ]
    )

    # WHEN it is inspected and every PDF read
    with open_archive(io.BytesIO(data), LIMITS) as opened:
        plan = opened.plan
        contents = [opened.read(e) for e in plan.pdf_entries]

    # THEN the ZIP is not corrupt: the odd name is decoded (UTF-8 if flagged and valid, else cp437),
    # its raw bytes are kept, and its entry is a PDF read like the others
    assert [e.name for e in plan.entries] == ["before.pdf", shown, "after.pdf"]
    assert [e.raw_name for e in plan.entries] == [b"before.pdf", raw, b"after.pdf"]
    assert archive.decode_name(raw, flags) == shown
    assert contents == [pdf_bytes("before"), pdf_bytes("odd"), pdf_bytes("after")]


def test_unicode_path_field_that_is_not_utf8_fails_nothing() -> None:
    # GIVEN an entry with an Info-ZIP Unicode Path field (0x7075) whose "UTF-8" name is Latin-1,
    # which zipfile 3.12+ decodes strictly (and would fail the whole archive on)
    data = raw_zip(
        [
            RawEntry(b"cv.pdf", pdf_bytes("cv"), extra=unicode_path_extra(b"cv.pdf", b"Jos\xe9.pdf")),
            RawEntry("after.pdf", pdf_bytes("after")),
        ]
    )

    # WHEN inspected and read THEN both entries are there under their central directory names
    with open_archive(io.BytesIO(data), LIMITS) as opened:
        assert [e.name for e in opened.plan.entries] == ["cv.pdf", "after.pdf"]
        assert [opened.read(e) for e in opened.plan.pdf_entries] == [pdf_bytes("cv"), pdf_bytes("after")]


def test_duplicate_names_are_distinct_entries_read_by_index() -> None:
    # GIVEN two entries with the same name and different contents
    data = make_zip([("dup.pdf", pdf_bytes("one")), ("dup.pdf", pdf_bytes("two"))])

    # WHEN both are read
    with open_archive(io.BytesIO(data), LIMITS) as opened:
        contents = [opened.read(e) for e in opened.plan.pdf_entries]

    # THEN each index yields its own content
    assert contents == [pdf_bytes("one"), pdf_bytes("two")]


def test_zero_byte_pdf_is_counted_and_reads_empty() -> None:
    # GIVEN an empty .pdf entry (stored and deflated)
    for method in (STORED, DEFLATED):
        data = make_zip([("empty.pdf", b"")], method)

        # WHEN inspected and read
        with open_archive(io.BytesIO(data), LIMITS) as opened:
            (entry,) = opened.plan.pdf_entries

            # THEN it counts (the PDF step will fail it) and reads as no bytes
            assert entry.reason is None
            assert opened.read(entry) == b""


def test_archive_written_by_zipfile_is_classified_the_same() -> None:
    # GIVEN a ZIP produced by the standard library, directories included
    data = zipfile_zip(
        [("a/", b""), ("a/one.pdf", pdf_bytes("1")), ("a/two.PDF", pdf_bytes("2")), ("b.txt", b"t")]
    )

    # WHEN inspected and the PDFs read
    with open_archive(io.BytesIO(data), LIMITS) as opened:
        plan = opened.plan
        contents = [opened.read(e) for e in plan.pdf_entries]

    # THEN the directory and the text file are ignored, both PDFs read back intact
    assert [(e.kind, e.reason) for e in plan.entries] == [
        ("ignored", Reason.DIRECTORY),
        ("pdf", None),
        ("pdf", None),
        ("ignored", Reason.NOT_PDF),
    ]
    assert contents == [pdf_bytes("1"), pdf_bytes("2")]


def test_empty_zip_has_no_files() -> None:
    # GIVEN a valid ZIP with no entries WHEN inspected THEN the plan is empty, not an error
    plan = plan_of(make_zip([]))
    assert (plan.entries, plan.total_files) == ((), 0)


# --- Limits ---------------------------------------------------------------------------------------


def test_zip_over_max_size_is_refused_before_any_byte_is_read() -> None:
    # GIVEN a reader over a ZIP larger than the limit
    reader, fetch = ranged(make_zip([("a.pdf", pdf_bytes())]))
    small = Limits(max_zip_bytes=reader.size - 1)

    # WHEN inspected, with the size known or not
    with_size = rejected_reason(lambda: inspect(reader, small, size=reader.size))
    without_size = rejected_reason(lambda: inspect(reader, small))

    # THEN the batch fails zip_too_large and nothing was fetched
    assert with_size == without_size == "zip_too_large"
    assert fetch.ranges == []


def test_more_entries_than_max_entries_fail_the_whole_batch() -> None:
    # GIVEN a ZIP of 50 entries
    data = many_entries_zip(50)

    # WHEN the limit is 49 THEN the batch fails; at 50 it passes
    assert rejected_reason(lambda: plan_of(data, Limits(max_entries=49))) == "too_many_entries"
    assert plan_of(data, Limits(max_entries=50)).total_files == 50


def test_ignored_entries_count_towards_max_entries() -> None:
    # GIVEN one PDF and three ignored entries WHEN max_entries is 3 THEN the batch fails
    data = make_zip([("a.pdf", pdf_bytes()), ("b.txt", b""), ("c/", b""), ("._d.pdf", b"")])
    assert rejected_reason(lambda: plan_of(data, Limits(max_entries=3))) == "too_many_entries"


def test_too_many_entries_is_found_before_zipfile_parses_the_directory() -> None:
    # GIVEN 20,000 entries and a limit of 100, read through small blocks
    reader, _ = ranged(many_entries_zip(20_000), block_size=64 * 1024)

    # WHEN inspected THEN it fails after reading only the start of the directory
    assert rejected_reason(lambda: inspect(reader, Limits(max_entries=100))) == "too_many_entries"
    assert reader.bytes_fetched < 3 * 1024 * 1024  # the directory alone is ~1 MiB; not all of it parsed


def test_pdf_over_max_pdf_bytes_fails_too_large_and_others_go_on() -> None:
    # GIVEN a 2 MiB PDF (hard to compress) next to a small one, and a 1 MiB limit
    big = pdf_bytes() + os.urandom(2 * MiB)
    data = make_zip([("big.pdf", big), ("small.pdf", pdf_bytes()), ("big.txt", b"text " + big)])

    # WHEN inspected
    plan = plan_of(data, Limits(max_pdf_bytes=MiB))

    # THEN the big PDF is counted as failed too_large; the small one is fine; non-PDFs are not judged
    # (big.txt's bytes are no PDF: as a PDF not named .pdf, it would be too_large as well)
    assert by_name(plan, "big.pdf").reason == Reason.TOO_LARGE
    assert by_name(plan, "small.pdf").reason is None
    assert by_name(plan, "big.txt").reason == Reason.NOT_PDF
    assert plan.total_files == 2


def test_pdf_over_max_ratio_fails_too_large() -> None:
    # GIVEN a PDF of 100 KiB of spaces (deflates far beyond 50:1) and one of random bytes
    data = make_zip(
        [("airy.pdf", pdf_bytes() + b" " * 100_000), ("dense.pdf", pdf_bytes() + os.urandom(10_000))]
    )

    # WHEN inspected with max_ratio 50
    plan = plan_of(data, Limits(max_ratio=50))

    # THEN only the airy one is refused
    assert by_name(plan, "airy.pdf").reason == Reason.TOO_LARGE
    assert by_name(plan, "dense.pdf").reason is None


def test_declared_size_with_no_compressed_bytes_fails_too_large() -> None:
    # GIVEN an entry declaring content but storing zero compressed bytes (an infinite ratio)
    data = raw_zip([RawEntry("nothing.pdf", b"", payload=b"", file_size=10_000)])

    # WHEN inspected THEN it is refused without a division by zero
    assert plan_of(data).entries[0].reason == Reason.TOO_LARGE


def test_encrypted_entry_fails_encrypted_zip_entry() -> None:
    # GIVEN a ZIP with one entry flagged encrypted
    with open_archive(io.BytesIO(encrypted_entry_zip()), LIMITS) as opened:
        # WHEN inspected
        secret = by_name(opened.plan, "secret.pdf")

        # THEN that entry is counted and failed; opening it says why; the other reads fine
        assert (secret.kind, secret.reason) == ("pdf", Reason.ENCRYPTED_ZIP_ENTRY)
        assert rejected_reason(lambda: opened.read(secret)) == Reason.ENCRYPTED_ZIP_ENTRY
        assert opened.read(by_name(opened.plan, "ok.pdf")) == pdf_bytes("ok")


def test_only_stored_and_deflate_are_read() -> None:
    # GIVEN PDFs compressed with deflate, bzip2, LZMA and deflate64
    plan = plan_of(
        raw_zip([RawEntry(f"{m}.pdf", pdf_bytes(), m) for m in (DEFLATED, BZIP2, LZMA, DEFLATE64)])
    )

    # WHEN inspected THEN everything but deflate is unsupported_compression
    assert [e.reason for e in plan.entries] == [None] + [Reason.UNSUPPORTED_COMPRESSION] * 3


# --- Broken archives -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [truncated_zip(), b"PK\x05\x06", b"PK\x05\x06" + bytes(18)[:-1], b"PK\x03\x04" + bytes(100)],
    ids=["truncated", "signature-only", "short-end-record", "local-header-only"],
)
def test_what_is_not_a_readable_zip_fails_corrupt_zip(data: bytes) -> None:
    # GIVEN bytes that begin as a ZIP but are not a whole one WHEN inspected THEN the batch fails corrupt_zip
    assert rejected_reason(lambda: plan_of(data)) == "corrupt_zip"


@pytest.mark.parametrize(
    ("data", "looks_like"),
    [
        (not_a_zip(), "a PDF"),
        (b"", "empty"),
        (b"\x1f\x8b\x08\x00" + bytes(40), "gzip"),
        (b"hello, this is a text file\n" * 10, "unknown bytes"),
    ],
    ids=["pdf", "empty", "gzip", "text"],
)
def test_what_is_not_a_zip_by_its_bytes_fails_not_a_zip_saying_what_it_looks_like(
    data: bytes, looks_like: str
) -> None:
    # GIVEN an upload whose bytes are no ZIP (whatever its name) WHEN inspected
    with pytest.raises(ArchiveRejected) as refused:
        plan_of(data)
    # THEN the batch fails not_a_zip, and the detail (for the log) says what it looks like
    assert (refused.value.reason, str(refused.value)) == ("not_a_zip", looks_like)


def test_a_zip_with_bytes_before_it_is_still_a_zip() -> None:
    # GIVEN a self-extracting archive: a stub, then a ZIP (zipfile reads it; so does unzip)
    data = b"MZ" + bytes(1000) + make_zip([("a.pdf", pdf_bytes())])
    # THEN its entries are read, not refused as not_a_zip
    assert [e.name for e in plan_of(data).pdf_entries] == ["a.pdf"]


def test_central_directory_offset_past_its_end_record_fails_corrupt_zip() -> None:
    # GIVEN a ZIP whose end record claims a directory larger than the file
    data = bytearray(make_zip([("a.pdf", pdf_bytes())]))
    data[-10:-6] = (10**6).to_bytes(4, "little")  # central directory size

    # WHEN inspected THEN corrupt_zip
    assert rejected_reason(lambda: plan_of(bytes(data))) == "corrupt_zip"


def test_entries_sharing_compressed_data_fail_the_zip() -> None:
    # GIVEN a quoted-overlap bomb: four central records over one entry's data
    # WHEN inspected THEN the whole ZIP is refused (3.11's zipfile would happily read each)
    assert rejected_reason(lambda: plan_of(overlapping_zip())) == "corrupt_zip"


@pytest.mark.parametrize(
    "data", [bad_crc_zip(), corrupt_deflate_zip(), short_entry_zip()], ids=["bad-crc", "bad-deflate", "short"]
)
def test_entry_with_bad_content_fails_corrupt_entry_when_read(data: bytes) -> None:
    # GIVEN an entry whose directory record looks fine but whose data is wrong
    with open_archive(io.BytesIO(data), LIMITS) as opened:
        (entry,) = opened.plan.pdf_entries
        assert entry.reason is None

        # WHEN read THEN it fails corrupt_entry, never a raw zipfile/zlib error
        assert rejected_reason(lambda: opened.read(entry)) == Reason.CORRUPT_ENTRY


def test_local_header_sizes_are_not_trusted_over_the_central_directory() -> None:
    # GIVEN an entry whose local header claims 1 GiB while the central directory is honest
    data = raw_zip([RawEntry("a.pdf", pdf_bytes(), local_file_size=GiB)])

    # WHEN read THEN the honest content comes back
    with open_archive(io.BytesIO(data), LIMITS) as opened:
        assert opened.read(opened.plan.entries[0]) == pdf_bytes()


# --- Zip bombs ------------------------------------------------------------------------------------


def test_zip_bomb_is_refused_at_inspection_without_inflating() -> None:
    # GIVEN a 2 MB ZIP whose PDF entry inflates to 2 GiB, behind a counting ranged reader
    reader, fetch = ranged(zip_bomb_bytes(2 * GiB))

    # WHEN inspected, even with a per-PDF limit that would allow 2 GiB
    plan = inspect(reader, Limits(max_pdf_bytes=4 * GiB))

    # THEN the bomb fails too_large on its ratio, the other PDF goes on
    assert [e.reason for e in plan.entries] == [Reason.TOO_LARGE, None]
    # AND only the directory end of the file was fetched (nothing was inflated)
    assert reader.bytes_fetched < 100 * 1024 and len(fetch.ranges) <= 2


def test_zip64_entry_declaring_more_than_4gib_is_read_and_refused() -> None:
    # GIVEN a ZIP64 entry declaring 5 GiB
    plan = plan_of(zip_bomb_bytes(5 * GiB, honest_crc=False))

    # WHEN inspected THEN the size is read from the ZIP64 extra field and refused
    bomb = plan.entries[0]
    assert (bomb.file_size, bomb.reason) == (5 * GiB, Reason.TOO_LARGE)


def test_lying_header_entry_is_stopped_while_inflating() -> None:
    # GIVEN an entry declaring 1,000 bytes (harmless ratio) whose data inflates to 64 MiB
    data = lying_header_zip(64 * MiB, declared=1000)
    # (zipfile alone silently returns the first 1,000 bytes: its CRC is forged to match them)
    assert len(zipfile.ZipFile(io.BytesIO(data)).read("liar.pdf")) == 1000
    reader, _ = ranged(data)

    with open_archive(reader, LIMITS) as opened:
        liar = by_name(opened.plan, "liar.pdf")
        assert liar.reason is None  # nothing in the directory gives it away

        # WHEN read
        reason = rejected_reason(lambda: opened.read(liar))

        # THEN it stops at the first chunk past the declared size: too_large, little fetched
        assert reason == Reason.TOO_LARGE
        assert reader.bytes_fetched < 2 * MiB
        # AND the next entry still reads
        assert opened.read(by_name(opened.plan, "ok.pdf")) == pdf_bytes()


def test_open_entry_rechecks_the_limits_it_is_given() -> None:
    # GIVEN a plan made under generous limits
    data = make_zip([("a.pdf", pdf_bytes() * 100)])
    with open_archive(io.BytesIO(data), LIMITS) as opened:
        (entry,) = opened.plan.pdf_entries

        # WHEN the entry is opened under a smaller per-PDF limit THEN it is refused before inflating
        assert (
            rejected_reason(lambda: read_entry(opened.zip, entry, Limits(max_pdf_bytes=100))) == "too_large"
        )


# --- Reading entries -------------------------------------------------------------------------------


def test_open_entry_streams_in_small_reads() -> None:
    # GIVEN a 1 MiB deflated PDF
    content = pdf_bytes() + os.urandom(MiB // 2).hex().encode()
    with open_archive(io.BytesIO(make_zip([("a.pdf", content)])), LIMITS) as opened:
        # WHEN read 10,000 bytes at a time
        with opened.open(opened.plan.entries[0]) as stream:
            chunks = iter(lambda: stream.read(10_000), b"")
            got = b"".join(chunks)

    # THEN the content is intact
    assert got == content


def test_ignored_or_foreign_entries_cannot_be_opened() -> None:
    # GIVEN an archive with one ignored entry
    with open_archive(io.BytesIO(make_zip([("a.txt", b"x"), ("b.pdf", pdf_bytes())])), LIMITS) as opened:
        text, pdf = opened.plan.entries
        stranger = Entry(7, "b.pdf", "pdf", None, 1, 1, 0)

        # WHEN opened THEN it is a programming error, not a ledger outcome
        with pytest.raises(ValueError):
            opened.open(text)
        with pytest.raises(ValueError):
            opened.open(stranger)
        assert opened.read(pdf) == pdf_bytes()


# --- RangedReader ---------------------------------------------------------------------------------


def test_central_directory_of_10000_entries_takes_two_requests() -> None:
    # GIVEN a 10,000-entry ZIP behind a counting fetch
    data = many_entries_zip(10_000)
    reader, fetch = ranged(data)

    # WHEN inspected
    plan = inspect(reader, LIMITS, size=len(data))

    # THEN every entry is there, from a tail request and one for the directory
    assert plan.total_files == 10_000
    assert len(fetch.ranges) <= 2, fetch.ranges
    print(
        f"10,000 entries: {len(fetch.ranges)} requests, {reader.bytes_fetched} of {len(data)} bytes fetched"
    )


def test_sequential_entry_reads_fetch_each_byte_about_once() -> None:
    # GIVEN 200 PDFs of 20 KiB behind 256 KiB blocks
    data = make_zip([(f"{i}.pdf", os.urandom(20 * 1024)) for i in range(200)], STORED)
    reader, fetch = ranged(data, block_size=256 * 1024)

    # WHEN every entry is read in order
    with open_archive(reader, LIMITS) as opened:
        for entry in opened.plan.pdf_entries:
            opened.read(entry)

    # THEN the archive is fetched in block-sized requests, barely more than once
    assert reader.bytes_fetched < 1.2 * len(data)
    assert len(fetch.ranges) < 2 * len(data) / (256 * 1024) + 4


@settings(max_examples=examples(200), deadline=None)
@given(
    size=st.integers(0, 5000),
    block=st.integers(1, 700),
    ops=st.lists(
        st.tuples(st.sampled_from([0, 1, 2]), st.integers(-6000, 6000), st.integers(-1, 3000)), max_size=30
    ),
)
def test_ranged_reader_reads_like_a_file_with_bounded_cache(
    size: int, block: int, ops: list[tuple[int, int, int]]
) -> None:
    # GIVEN a ranged reader and an in-memory file over the same bytes
    data = bytes(i % 251 for i in range(size))
    reader, _ = ranged(data, block_size=block, max_blocks=2)
    oracle = io.BytesIO(data)

    for whence, offset, n in ops:
        # WHEN both seek and read the same way
        target = offset + (0, oracle.tell(), size)[whence]
        if target < 0:  # a real file refuses (BytesIO clamps): so does the reader, keeping its place
            with pytest.raises(OSError):
                reader.seek(offset, whence)
            continue
        assert reader.seek(offset, whence) == oracle.seek(target) == target

        # THEN they return the same bytes and positions, and never cache more than two blocks
        assert reader.read(n) == oracle.read(n)
        assert reader.tell() == oracle.tell()
        assert sum(len(b) for _, b in reader._blocks) <= 2 * block


def test_ranged_reader_under_a_buffered_reader_works_for_zipfile() -> None:
    # GIVEN the reader wrapped the way the S3 adapter wraps it
    data = make_zip([("a.pdf", pdf_bytes("a")), ("b.pdf", pdf_bytes("b"))])
    raw, _ = ranged(data)

    # WHEN inspected and read THEN it behaves like a plain file
    with open_archive(io.BufferedReader(raw, buffer_size=64 * 1024), LIMITS) as opened:
        assert [opened.read(e) for e in opened.plan.pdf_entries] == [pdf_bytes("a"), pdf_bytes("b")]


def test_short_fetch_is_a_retryable_dependency_error() -> None:
    # GIVEN a fetch that returns fewer bytes than asked (the object changed under us)
    reader = RangedReader(lambda start, end: b"x", 100)

    # WHEN read THEN DependencyUnavailable, which the caller lets SQS/S3 retry
    with pytest.raises(DependencyUnavailable):
        reader.read(10)


def test_fetch_errors_pass_through_inspect_untranslated() -> None:
    # GIVEN a fetch that fails like an unreachable S3
    def down(start: int, end: int) -> bytes:
        raise DependencyUnavailable("s3", "timeout")

    # WHEN inspected THEN the dependency error propagates, not corrupt_zip
    with pytest.raises(DependencyUnavailable):
        inspect(RangedReader(down, 1000), LIMITS)


# --- ZIP64 ----------------------------------------------------------------------------------------


def test_zip64_directory_of_10000_entries_is_read() -> None:
    # GIVEN a 10,000-entry ZIP written with ZIP64 end records and extra fields
    plan = plan_of(many_entries_zip(10_000, force_zip64=True))

    # WHEN inspected THEN every entry is found with its real sizes
    assert plan.total_files == 10_000
    assert {e.file_size for e in plan.entries} == {len(pdf_bytes("many"))}


@pytest.mark.slow
def test_more_than_65535_entries_are_counted_through_zip64() -> None:
    # GIVEN 70,000 entries (more than a classic end record can count)
    data = many_entries_zip(70_000)

    # WHEN inspected THEN all are counted, and the entry limit still applies
    assert plan_of(data).total_files == 70_000
    assert rejected_reason(lambda: plan_of(data, Limits(max_entries=65_535))) == "too_many_entries"


# --- Memory ---------------------------------------------------------------------------------------

_MEMORY_SCRIPT = textwrap.dedent(
    """
    import json, os, resource, sys
    from pdfbatch.adapters.s3 import RangedReader
    from pdfbatch.archive import open_archive
    from pdfbatch.config import Limits

    fd = os.open(sys.argv[1], os.O_RDONLY)
    size = os.fstat(fd).st_size
    reader = RangedReader(lambda start, end: os.pread(fd, end - start + 1, start), size)

    def peak():
        # VmHWM is this process's own peak; ru_maxrss would carry the parent's across fork+exec.
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    before = peak()
    total = 0
    with open_archive(reader, Limits(), size=size) as opened:
        for entry in opened.plan.pdf_entries:
            if entry.index % 2:
                total += len(opened.read(entry))
            else:
                with opened.open(entry) as stream:
                    while chunk := stream.read(64 * 1024):
                        total += len(chunk)
    print(json.dumps({"before": before, "after": peak(), "total": total, "size": size,
                      "requests": reader.requests, "fetched": reader.bytes_fetched}))
    """
)


@pytest.mark.slow
def test_reading_a_200mb_zip_member_by_member_keeps_memory_flat(tmp_path: Path) -> None:
    # GIVEN a ~190 MB ZIP on disk of 4 MiB entries, half stored random bytes, half deflated text
    path = tmp_path / "big.zip"
    count = write_big_zip(path, total=240 * MiB, entry_size=4 * MiB)

    # WHEN a fresh process reads every entry through a RangedReader over the file
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(archive.__file__).parents[1]), *sys.path])}
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_SCRIPT, str(path)], capture_output=True, text=True, check=True, env=env
    )
    stats = json.loads(out.stdout)

    # THEN every byte came out, and peak RSS grew by a few blocks and one entry, not by the ZIP
    growth = stats["after"] - stats["before"]
    print(f"{count} entries, {stats['size'] / MiB:.0f} MiB zip: peak RSS {stats['before'] / MiB:.1f} MiB")
    print(f"-> {stats['after'] / MiB:.1f} MiB (+{growth / MiB:.1f}), {stats['requests']} requests")
    assert stats["total"] == count * 4 * MiB
    assert growth < 48 * MiB


# --- PDFs by their bytes, and nested ZIPs ----------------------------------------------------------


def test_entry_whose_bytes_are_a_pdf_is_read_whatever_its_name() -> None:
    # GIVEN a ZIP with a PDF named without .pdf (stored and deflated), a text file and a PDF-named text
    entries = [
        RawEntry("resume", pdf_bytes("resume"), STORED),
        RawEntry("cv.bak", pdf_bytes("bak"), DEFLATED),
        RawEntry("notes.txt", b"hello, not a pdf", DEFLATED),
        RawEntry("fake.pdf", b"hello, trusted by name", DEFLATED),
    ]

    # WHEN it is inspected and its PDF entries read
    with open_archive(io.BytesIO(raw_zip(entries)), LIMITS) as opened:
        plan = opened.plan
        contents = {e.name: opened.read(e) for e in plan.pdf_entries}

    # THEN the bytes decide for names that say nothing, and a .pdf name is trusted (read, then judged)
    assert [(e.name, e.kind, e.reason) for e in plan.entries] == [
        ("resume", "pdf", None),
        ("cv.bak", "pdf", None),
        ("notes.txt", "ignored", Reason.NOT_PDF),
        ("fake.pdf", "pdf", None),
    ]
    assert contents == {
        "resume": pdf_bytes("resume"),
        "cv.bak": pdf_bytes("bak"),
        "fake.pdf": b"hello, trusted by name",
    }


def test_a_pdf_without_its_name_is_held_to_the_same_limits() -> None:
    # GIVEN an unnamed PDF over max_pdf_bytes and an encrypted one (whose bytes cannot be looked at)
    big = pdf_bytes("big") + b" " * 5000
    data = raw_zip([RawEntry("big", big, STORED), RawEntry("secret", pdf_bytes("s"), flags=0x1)])

    # WHEN inspected with a 1 KiB PDF limit
    plan = plan_of(data, Limits(max_pdf_bytes=1024))

    # THEN the big one is a PDF refused too_large, and the encrypted one is no PDF anyone can tell
    assert [(e.name, e.kind, e.reason) for e in plan.entries] == [
        ("big", "pdf", Reason.TOO_LARGE),
        ("secret", "ignored", Reason.NOT_PDF),
    ]


def _dept_zip() -> bytes:
    deeper = make_zip([("lost.pdf", pdf_bytes("lost"))])
    return make_zip(
        [
            ("cv.pdf", pdf_bytes("cv")),
            ("notes.txt", b"hello"),
            ("resume", pdf_bytes("unnamed")),
            ("deeper.zip", deeper),
            ("folder/", b""),
        ]
    )


def test_pdfs_in_a_nested_zip_are_read_with_their_path_and_deeper_zips_are_failed() -> None:
    # GIVEN a ZIP holding a PDF and a department ZIP, itself holding PDFs, a text, a folder and a ZIP
    data = make_zip([("a.pdf", pdf_bytes("a")), ("dept.zip", _dept_zip())])

    # WHEN it is inspected and every readable PDF entry read
    with open_archive(io.BytesIO(data), LIMITS) as opened:
        plan = opened.plan
        contents = {e.name: opened.read(e) for e in plan.pdf_entries if e.reason is None}
        deeper = rejected_reason(lambda: opened.read(by_name(plan, "dept.zip/deeper.zip")))

    # THEN the nested ZIP is listed, its entries follow the outer ones with their path, one level only
    assert [(e.index, e.name, e.kind, e.reason) for e in plan.entries] == [
        (0, "a.pdf", "pdf", None),
        (1, "dept.zip", "ignored", Reason.NESTED_ZIP),
        (2, "dept.zip/cv.pdf", "pdf", None),
        (3, "dept.zip/notes.txt", "ignored", Reason.NOT_PDF),
        (4, "dept.zip/resume", "pdf", None),
        (5, "dept.zip/deeper.zip", "pdf", Reason.NESTED_TOO_DEEP),
        (6, "dept.zip/folder/", "ignored", Reason.DIRECTORY),
    ]
    assert by_name(plan, "dept.zip/cv.pdf").raw_name == b"dept.zip/cv.pdf"
    assert contents == {
        "a.pdf": pdf_bytes("a"),
        "dept.zip/cv.pdf": pdf_bytes("cv"),
        "dept.zip/resume": pdf_bytes("unnamed"),
    }
    # AND an entry that failed at inspection cannot be opened
    assert deeper == "nested_too_deep"


def test_nested_entries_count_towards_max_entries() -> None:
    # GIVEN a ZIP of 2 entries whose nested ZIP holds 5 (7 entries in all)
    data = make_zip([("a.pdf", pdf_bytes("a")), ("dept.zip", _dept_zip())])

    # WHEN inspected under a limit of 6, then of 7
    # THEN the batch is refused at 6, as for 7 entries in one ZIP, and read at 7
    assert rejected_reason(lambda: plan_of(data, Limits(max_entries=6))) == "too_many_entries"
    assert plan_of(data, Limits(max_entries=7)).total_files == 4


def test_nested_ratio_is_measured_over_the_outer_compressed_bytes() -> None:
    # GIVEN a nested ZIP that compresses a few times over (a stored entry of four letters), holding a PDF
    # that does too (four letters, deflated)
    rng = random.Random(24)
    letters = bytes(rng.choice(b"acgt") for _ in range(40_000))
    inner = raw_zip(
        [
            RawEntry("cv.pdf", pdf_bytes("cv") + letters[:20_000], DEFLATED),
            RawEntry("pad.txt", letters, STORED),
        ]
    )
    data = make_zip([("dept.zip", inner)], DEFLATED)
    plan = plan_of(data)
    outer, cv = by_name(plan, "dept.zip"), by_name(plan, "dept.zip/cv.pdf")
    r_outer = outer.file_size / outer.compressed_size
    r_inner = cv.file_size / cv.compressed_size
    assert r_outer > 1.5 and r_inner > 1.5 and cv.reason is None

    # WHEN the ratio limit is above each ratio on its own, but below their product
    limits = Limits(max_ratio=max(r_outer, r_inner) * 1.01)
    assert limits.max_ratio < r_outer * r_inner
    with open_archive(io.BytesIO(data), limits) as opened:
        cv = by_name(opened.plan, "dept.zip/cv.pdf")

        # THEN the nested ZIP is opened, and its PDF is too_large, as it would be if it were not nested
        assert by_name(opened.plan, "dept.zip").reason == Reason.NESTED_ZIP
        assert cv.reason == Reason.TOO_LARGE
        assert rejected_reason(lambda: opened.read(cv)) == "too_large"


@pytest.mark.parametrize(
    ("inner", "reason"),
    [
        (b"PK\x03\x04 not a zip after all" * 4, Reason.CORRUPT_ENTRY),
        (make_zip([("a.pdf", pdf_bytes("a"))])[:-30], Reason.CORRUPT_ENTRY),
    ],
    ids=["garbage_after_header", "truncated"],
)
def test_a_nested_zip_that_cannot_be_read_is_a_failed_entry(inner: bytes, reason: Reason) -> None:
    # GIVEN a ZIP holding what starts as a ZIP but is not a readable one
    data = make_zip([("a.pdf", pdf_bytes("a")), ("dept.zip", inner)])

    # WHEN inspected
    plan = plan_of(data)

    # THEN it counts as a failed entry (its PDFs would otherwise vanish unsaid) and the rest goes on
    assert [(e.name, e.kind, e.reason) for e in plan.entries] == [
        ("a.pdf", "pdf", None),
        ("dept.zip", "pdf", reason),
    ]


def test_a_document_that_is_a_zip_by_its_bytes_is_not_opened() -> None:
    # GIVEN a Word file (a ZIP by its bytes, holding a PDF even) and a damaged one
    docx = make_zip([("word/document.xml", b"<w:document/>"), ("word/media/cv.pdf", pdf_bytes("in"))])
    data = make_zip([("cv.docx", docx), ("notes/summary.docx", b"PK\x03\x04 not really a document")])

    # WHEN inspected
    plan = plan_of(data)

    # THEN both are documents of their own: listed not_pdf, nothing inside them becomes an entry
    assert [(e.name, e.kind, e.reason) for e in plan.entries] == [
        ("cv.docx", "ignored", Reason.NOT_PDF),
        ("notes/summary.docx", "ignored", Reason.NOT_PDF),
    ]


def test_a_nested_zip_over_max_pdf_bytes_is_never_inflated() -> None:
    # GIVEN a nested ZIP of 4 KiB and a 1 KiB entry limit
    data = make_zip([("dept.zip", make_zip([("cv.pdf", pdf_bytes("cv") + os.urandom(4096))], STORED))])

    # WHEN inspected
    plan = plan_of(data, Limits(max_pdf_bytes=1024))

    # THEN it fails too_large as a PDF of that size would, and none of its entries are listed
    assert [(e.name, e.kind, e.reason) for e in plan.entries] == [("dept.zip", "pdf", Reason.TOO_LARGE)]


# A ZIP tree: a leaf is ("pdf" | "text", name), a node is ("zip", name, children).
_LEAF_NAMES = st.sampled_from(["cv.pdf", "CV.PDF", "resume", "notes.txt", "x.zip", "a/b.pdf", "日本.bin"])
_TREES = st.recursive(
    st.tuples(st.sampled_from(["pdf", "text"]), _LEAF_NAMES),
    lambda kids: st.tuples(
        st.just("zip"), st.sampled_from(["dept.zip", "more", "x.ZIP"]), st.lists(kids, max_size=4)
    ),
    max_leaves=14,
)


def _build(nodes: list[tuple], method: int) -> bytes:
    out = []
    for i, node in enumerate(nodes):
        kind, name = node[0], node[1]
        if kind == "zip":
            data = _build(node[2], method)
        else:
            data = pdf_bytes(f"{name}{i}") if kind == "pdf" else b"plain text " + name.encode()
        out.append(RawEntry(name, data, method))
    return raw_zip(out)


def _expect(nodes: list[tuple], depth: int, prefix: str) -> list[tuple[str, str, str | None]]:
    """The oracle, from the tree alone: (path, kind, reason) of every entry, in the rule's order."""
    here: list[tuple[str, str, str | None]] = []
    later: list[tuple[str, str, str | None]] = []
    for node in nodes:
        kind, name = node[0], prefix + node[1]
        named_pdf = node[1].lower().endswith(".pdf")
        if kind == "pdf" or named_pdf:
            here.append((name, "pdf", None))  # a PDF by its bytes, or trusted by its name
        elif kind == "text" or not node[1].lower().endswith(".zip"):
            here.append((name, "ignored", "not_pdf"))  # a ZIP not named .zip: a .docx, say
        elif depth == 0:
            here.append((name, "ignored", "nested_zip"))
            later += _expect(node[2], 1, name + "/")
        else:
            here.append((name, "pdf", "nested_too_deep"))
    return here + later


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=st.lists(_TREES, max_size=6), method=st.sampled_from([STORED, DEFLATED]))
def test_any_zip_tree_gives_each_entry_one_outcome_to_depth_one_and_nested_too_deep_below(
    tree: list[tuple], method: int
) -> None:
    # GIVEN a ZIP of PDFs, texts and ZIPs nested to any depth, named truthfully or not (a ZIP is opened
    # only when named .zip)
    data = _build(tree, method)

    # WHEN it is inspected and every readable PDF entry read
    with open_archive(io.BytesIO(data), LIMITS) as opened:
        plan = opened.plan
        contents = [opened.read(e) for e in plan.pdf_entries if e.reason is None]

    # THEN every entry to depth one is there once, with its path; a ZIP deeper is one failed entry
    expected = _expect(tree, 0, "")
    assert [(e.name, e.kind, e.reason) for e in plan.entries] == expected
    assert [e.index for e in plan.entries] == list(range(len(expected)))
    # AND the totals are those of the tree, and each readable entry reads back
    assert plan.total_files == sum(1 for _, kind, _ in expected if kind == "pdf")
    assert len(plan.ignored) == sum(1 for _, kind, _ in expected if kind == "ignored")
    assert len(contents) == sum(1 for _, kind, reason in expected if kind == "pdf" and reason is None)


# --- Properties -----------------------------------------------------------------------------------

_TOKENS = st.sampled_from(
    ["a", "Z", "0", " ", "-", "_", ".", "/", "\\", "..", "~", "é", "日本", "ß", "\u202e", "__MACOSX", "._",
     ".pdf", ".PDF", ".Pdf", ".pDf", ".zip", ".txt", "pdf"]
)  # fmt: skip
_NAMES = st.one_of(st.lists(_TOKENS, max_size=8).map("".join), st.text(max_size=20))


def _counted(name: str) -> bool:
    """Independent statement of the rule for an entry whose bytes are a PDF: any name but a folder's,
    metadata's or a hidden file's (a .pdf name is not needed: the bytes say PDF)."""
    parts = name.replace("\\", "/").split("/")
    base = parts[-1]
    return not name.endswith(("/", "\\")) and not base.startswith(".") and "__MACOSX" not in parts


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(_NAMES, max_size=25), method=st.sampled_from([STORED, DEFLATED]))
def test_any_entry_list_counts_each_pdf_entry_exactly_once(names: list[str], method: int) -> None:
    # GIVEN a ZIP of arbitrary names (duplicates, separators, unicode, case variants)
    data = make_zip([(name, pdf_bytes(str(i))) for i, name in enumerate(names)], method)

    # WHEN inspected
    plan = plan_of(data)

    # THEN indices are 0..n-1, names are kept, and exactly the non-metadata, non-folder entries count
    assert [e.index for e in plan.entries] == list(range(len(names)))
    assert [e.name for e in plan.entries] == names
    assert [e.index for e in plan.pdf_entries] == [i for i, n in enumerate(names) if _counted(n)]
    assert plan.total_files + len(plan.ignored) == len(names)
    assert all(e.reason is None for e in plan.pdf_entries)
    assert all(e.reason is not None for e in plan.ignored)


@settings(max_examples=examples(300), deadline=None)
@given(data=st.one_of(st.binary(max_size=2000), st.binary(max_size=200).map(lambda b: b + b"PK\x05\x06" + b)))
def test_random_bytes_never_crash_inspect(data: bytes) -> None:
    # GIVEN arbitrary bytes WHEN inspected THEN the only possible error is ArchiveRejected
    try:
        inspect(io.BytesIO(data), LIMITS)
    except ArchiveRejected as exc:
        assert exc.reason in {"corrupt_zip", "not_a_zip", "too_many_entries", "zip_too_large"}


_VALID = (
    make_zip(
        [("a.pdf", pdf_bytes("a") * 30), ("b.pdf", pdf_bytes("b")), ("c.txt", b"c"), ("d.pdf", b"")], DEFLATED
    )
    + make_zip([], STORED)[:0]
)


@settings(max_examples=examples(400), deadline=None)
@given(
    edits=st.lists(st.tuples(st.integers(0, len(_VALID) - 1), st.integers(0, 255)), min_size=1, max_size=4)
)
def test_corrupted_zip_only_raises_typed_errors(edits: list[tuple[int, int]]) -> None:
    # GIVEN a valid ZIP with a few bytes overwritten anywhere (headers, data, directory)
    data = bytearray(_VALID)
    for pos, value in edits:
        data[pos] = value

    # WHEN inspected and every PDF entry read
    try:
        opened = open_archive(io.BytesIO(bytes(data)), LIMITS)
    except ArchiveRejected:
        return
    with opened:
        for entry in opened.plan.pdf_entries:
            try:
                content = opened.read(entry)
            except EntryRejected as exc:
                # THEN failures are ledger reasons
                assert exc.reason in set(Reason)
                continue
            # THEN what does read never exceeds its declared size
            assert len(content) == entry.file_size
            assert zlib.crc32(content) == entry.crc


_NAME_BYTES = st.one_of(
    st.binary(max_size=40),
    st.binary(max_size=30).map(lambda b: b + b".pdf"),
    st.text(max_size=20).map(lambda t: t.encode("utf-8", "surrogatepass") + b".pdf"),
)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    names=st.lists(st.tuples(_NAME_BYTES, st.sampled_from([0, 0x800])), max_size=12),
    method=st.sampled_from([STORED, DEFLATED]),
)
def test_arbitrary_name_bytes_with_or_without_the_utf8_flag_never_fail_the_zip(
    names: list[tuple[bytes, int]], method: int
) -> None:
    # GIVEN a ZIP whose entry names are arbitrary bytes, each flagged UTF-8 or not
    data = raw_zip(
        RawEntry(raw, pdf_bytes(str(i)), method, flags=flags) for i, (raw, flags) in enumerate(names)
    )

    # WHEN it is inspected and every readable PDF entry read
    with open_archive(io.BytesIO(data), LIMITS) as opened:
        plan = opened.plan
        contents = {e.index: opened.read(e) for e in plan.pdf_entries}

    # THEN every entry is there once, in order, with its raw bytes and the name the rule decodes
    assert [e.index for e in plan.entries] == list(range(len(names)))
    assert [e.raw_name for e in plan.entries] == [raw for raw, _ in names]
    assert [e.name for e in plan.entries] == [archive.decode_name(raw, f) for raw, f in names]
    # AND classification follows the decoded name, and each PDF entry reads back its own content
    assert [e.index for e in plan.pdf_entries] == [e.index for e in plan.entries if _counted(e.name)]
    assert contents == {e.index: pdf_bytes(str(e.index)) for e in plan.pdf_entries}
