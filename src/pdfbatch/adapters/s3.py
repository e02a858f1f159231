"""S3 as the pipeline uses it: ranged reads of the ZIP, staging writes, server-side copies, presigned POST.

``RangedReader`` is how the ZIP is read without holding it: a seekable file over ranged GETs.
"""

from __future__ import annotations

import errno
import io
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from pdfbatch.errors import DependencyUnavailable, NotFound, ObjectChanged
from pdfbatch.ports import StoredVersion

if TYPE_CHECKING:
    from typing_extensions import Buffer

DEFAULT_BLOCK_SIZE = 4 * 1024 * 1024

Fetch = Callable[[int, int], bytes]
"""``fetch(start, end_inclusive) -> bytes``: exactly ``end_inclusive - start + 1`` bytes."""

_MISSING = {"NoSuchKey", "404", "NotFound", "NoSuchBucket", "NoSuchVersion"}
_CHANGED = {"PreconditionFailed", "412"}  # If-Match no longer holds (HEAD answers with the bare status)


def _translate(exc: Exception) -> Exception:
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in _MISSING:
            return NotFound(f"s3 object not found ({code})")
        if code in _CHANGED:
            return ObjectChanged(f"s3 object changed since it was notified ({code})")
        return DependencyUnavailable("s3", code)
    return DependencyUnavailable("s3", type(exc).__name__)


def pinned(version_id: str | None, etag: str | None) -> dict[str, str]:
    """The arguments that pin a GET or HEAD to one object: its version, or failing that its ETag.

    A version id names immutable bytes; If-Match makes S3 refuse (412) once the key holds other ones.
    S3 events carry the ETag without quotes; If-Match wants the quoted entity tag.
    """
    if version_id:
        return {"VersionId": version_id}
    if etag:
        return {"IfMatch": etag if etag.startswith('"') else f'"{etag}"'}
    return {}


class S3Store:
    """ObjectStore over a boto3 S3 client (and an optional second client for browser-facing URLs)."""

    def __init__(self, client: Any, presign_client: Any | None = None) -> None:
        self.client = client
        self.presign_client = presign_client or client

    def head_size(
        self, bucket: str, key: str, *, version_id: str | None = None, etag: str | None = None
    ) -> int:
        """The object's size (of the version or ETag given, if any)."""
        try:
            head = self.client.head_object(Bucket=bucket, Key=key, **pinned(version_id, etag))
            return int(head["ContentLength"])
        except (ClientError, BotoCoreError) as exc:
            raise _translate(exc) from exc

    def open_reader(
        self,
        bucket: str,
        key: str,
        size: int | None = None,
        *,
        version_id: str | None = None,
        etag: str | None = None,
    ) -> IO[bytes]:
        """A seekable, buffered reader that fetches byte ranges on demand, each pinned to one object."""
        pin = pinned(version_id, etag)
        if size is None:
            size = self.head_size(bucket, key, version_id=version_id, etag=etag)

        def fetch(start: int, end_inclusive: int) -> bytes:
            try:
                body = self.client.get_object(
                    Bucket=bucket, Key=key, Range=f"bytes={start}-{end_inclusive}", **pin
                )
                return bytes(body["Body"].read())
            except (ClientError, BotoCoreError) as exc:
                raise _translate(exc) from exc

        return io.BufferedReader(RangedReader(fetch, size), buffer_size=64 * 1024)

    def list_versions(self, bucket: str, prefix: str) -> Iterator[StoredVersion]:
        """Every version and delete marker under ``prefix``, by key and newest first within a key."""
        try:
            pages = self.client.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix)
            for page in pages:
                # One page lists a key's versions, then its delete markers: merge them, newest first.
                found = [
                    StoredVersion(
                        key=v["Key"],
                        version_id=str(v.get("VersionId") or "null"),
                        size=int(v.get("Size", 0)),
                        last_modified=v["LastModified"].timestamp(),
                        is_latest=bool(v.get("IsLatest")),
                        is_delete_marker=marker,
                    )
                    for field, marker in (("Versions", False), ("DeleteMarkers", True))
                    for v in page.get(field, [])
                ]
                found.sort(key=lambda v: (v.key, not v.is_latest, -v.last_modified))
                yield from found
        except (ClientError, BotoCoreError) as exc:
            raise _translate(exc) from exc

    def get_bytes(self, bucket: str, key: str) -> bytes:
        """The whole object."""
        try:
            return bytes(self.client.get_object(Bucket=bucket, Key=key)["Body"].read())
        except (ClientError, BotoCoreError) as exc:
            raise _translate(exc) from exc

    def put_bytes(self, bucket: str, key: str, data: bytes, content_type: str) -> None:
        """Write an object."""
        try:
            self.client.put_object(Bucket=bucket, Key=key, Body=data, ContentType=content_type)
        except (ClientError, BotoCoreError) as exc:
            raise _translate(exc) from exc

    def copy(self, bucket: str, source_key: str, dest_key: str) -> None:
        """Server-side copy: the PDF never passes through the function again."""
        try:
            self.client.copy_object(
                Bucket=bucket,
                Key=dest_key,
                CopySource={"Bucket": bucket, "Key": source_key},
                ContentType="application/pdf",
                MetadataDirective="REPLACE",
            )
        except (ClientError, BotoCoreError) as exc:
            raise _translate(exc) from exc

    def delete(self, bucket: str, key: str, version_id: str | None = None) -> None:
        """Delete, or with ``version_id`` remove that version for good (absent objects are fine)."""
        try:
            if version_id:
                self.client.delete_object(Bucket=bucket, Key=key, VersionId=version_id)
            else:
                self.client.delete_object(Bucket=bucket, Key=key)
        except (ClientError, BotoCoreError) as exc:
            raise _translate(exc) from exc

    def delete_many(self, bucket: str, keys: Sequence[str]) -> list[str]:
        """DeleteObjects for ``keys``, 1,000 a request (S3's limit); quiet: only failures come back, per
        key, on an HTTP 200."""
        refused: list[str] = []
        for start in range(0, len(keys), 1000):
            try:
                answer = self.client.delete_objects(
                    Bucket=bucket,
                    Delete={"Objects": [{"Key": k} for k in keys[start : start + 1000]], "Quiet": True},
                )
            except (ClientError, BotoCoreError) as exc:
                raise _translate(exc) from exc
            refused += [str(e.get("Key", "")) for e in answer.get("Errors", [])]
        return refused

    def presigned_post(self, bucket: str, key: str, max_bytes: int, expires_in: int) -> dict[str, Any]:
        """A presigned POST for exactly ``key`` whose policy caps the size."""
        try:
            return dict(
                self.presign_client.generate_presigned_post(
                    Bucket=bucket,
                    Key=key,
                    Fields={"Content-Type": "application/zip"},
                    Conditions=[["content-length-range", 1, max_bytes], {"Content-Type": "application/zip"}],
                    ExpiresIn=expires_in,
                )
            )
        except (ClientError, BotoCoreError) as exc:
            raise _translate(exc) from exc

    def presigned_get(self, bucket: str, key: str, expires_in: int) -> str:
        """A presigned GET of ``key`` (signed locally: no request is made)."""
        try:
            return str(
                self.presign_client.generate_presigned_url(
                    "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=expires_in
                )
            )
        except (ClientError, BotoCoreError) as exc:
            raise _translate(exc) from exc


class RangedReader(io.RawIOBase):
    """A seekable, read-only file over ``fetch(start, end_inclusive)`` of an object of known size.

    Small reads fetch a whole block (read-ahead) from the current position, clamped to the end of
    the object, and at most ``max_blocks`` blocks are kept, least recently used dropped first; a read
    of a block or more goes straight into the caller's buffer, one block-sized request at a time.
    So memory stays at ``max_blocks * block_size`` whatever the object size. ``requests`` and
    ``bytes_fetched`` count what was asked of ``fetch``. Not thread-safe (``zipfile`` serialises
    access to its file under a lock).
    """

    def __init__(
        self, fetch: Fetch, size: int, *, block_size: int = DEFAULT_BLOCK_SIZE, max_blocks: int = 2
    ) -> None:
        super().__init__()
        if size < 0 or block_size <= 0 or max_blocks <= 0:
            raise ValueError("size must be >= 0, block_size and max_blocks > 0")
        self._fetch = fetch
        self._size = size
        self._block_size = block_size
        self._max_blocks = max_blocks
        self._blocks: list[tuple[int, bytes]] = []  # (start, data), most recently used last
        self._pos = 0
        self.requests = 0
        self.bytes_fetched = 0

    @property
    def size(self) -> int:
        """Size of the object in bytes."""
        return self._size

    def readable(self) -> bool:
        """Always true."""
        return True

    def seekable(self) -> bool:
        """Always true."""
        return True

    def tell(self) -> int:
        """Current position."""
        self._checkClosed()
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET, /) -> int:
        """Move the position; like a real file, beyond the end is allowed and negative is OSError."""
        self._checkClosed()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._size + offset
        else:
            raise ValueError(f"invalid whence {whence!r}")
        if pos < 0:
            # zipfile relies on OSError here (it probes for records before the start of the file).
            raise OSError(errno.EINVAL, "negative seek position")
        self._pos = pos
        return pos

    def readinto(self, buffer: Buffer) -> int:
        """Fill ``buffer`` from the current position; short only at the end of the object."""
        self._checkClosed()
        with memoryview(buffer) as raw, raw.cast("B") as view:
            want = max(0, min(len(view), self._size - self._pos))
            done = 0
            while done < want:
                pos = self._pos + done
                block = self._cached(pos)
                if block is None:
                    if want - done >= self._block_size:
                        n = self._block_size
                        view[done : done + n] = self._get(pos, n)
                        done += n
                        continue
                    block = self._load(pos)
                start, data = block
                n = min(len(data) - (pos - start), want - done)
                view[done : done + n] = memoryview(data)[pos - start : pos - start + n]
                done += n
        self._pos += done
        return done

    def read(self, size: int | None = -1, /) -> bytes:
        """Read up to ``size`` bytes (all that is left when negative or None)."""
        self._checkClosed()
        left = max(0, self._size - self._pos)
        n = left if size is None or size < 0 else min(size, left)
        if n == 0:
            return b""
        block = self._cached(self._pos)
        if block is not None and self._pos + n <= block[0] + len(block[1]):
            off = self._pos - block[0]
            self._pos += n
            return block[1][off : off + n]
        buf = bytearray(n)
        got = self.readinto(buf)
        del buf[got:]
        return bytes(buf)

    def readall(self) -> bytes:
        """Read to the end of the object."""
        return self.read(-1)

    def close(self) -> None:
        """Drop the cached blocks."""
        self._blocks.clear()
        super().close()

    def _cached(self, pos: int) -> tuple[int, bytes] | None:
        for i, block in enumerate(self._blocks):
            if block[0] <= pos < block[0] + len(block[1]):
                if i != len(self._blocks) - 1:
                    self._blocks.append(self._blocks.pop(i))
                return block
        return None

    def _load(self, pos: int) -> tuple[int, bytes]:
        if len(self._blocks) >= self._max_blocks:
            self._blocks.pop(0)  # before fetching, so max_blocks is a bound even mid-request
        block = (pos, self._get(pos, min(self._block_size, self._size - pos)))
        self._blocks.append(block)
        return block

    def _get(self, start: int, n: int) -> bytes:
        data = self._fetch(start, start + n - 1)
        self.requests += 1
        self.bytes_fetched += len(data)
        if len(data) != n:
            # The object changed or the store misbehaved: a fresh attempt can fix it.
            raise DependencyUnavailable("object store", f"range {start}+{n} returned {len(data)} bytes")
        return data
