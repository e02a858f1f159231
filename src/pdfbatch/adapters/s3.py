"""S3 as the pipeline uses it: ranged reads of the ZIP, staging writes, server-side copies, presigned POST."""

from __future__ import annotations

import io
from typing import IO, Any

from botocore.exceptions import BotoCoreError, ClientError

from pdfbatch.errors import DependencyUnavailable, NotFound

_MISSING = {"NoSuchKey", "404", "NotFound", "NoSuchBucket"}


def _translate(exc: Exception) -> Exception:
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in _MISSING:
            return NotFound(f"s3 object not found ({code})")
        return DependencyUnavailable("s3", code)
    return DependencyUnavailable("s3", type(exc).__name__)


class S3Store:
    """ObjectStore over a boto3 S3 client (and an optional second client for browser-facing URLs)."""

    def __init__(self, client: Any, presign_client: Any | None = None) -> None:
        self.client = client
        self.presign_client = presign_client or client

    def head_size(self, bucket: str, key: str) -> int:
        """The object's size."""
        try:
            return int(self.client.head_object(Bucket=bucket, Key=key)["ContentLength"])
        except (ClientError, BotoCoreError) as exc:
            raise _translate(exc) from exc

    def open_reader(self, bucket: str, key: str, size: int | None = None) -> IO[bytes]:
        """A seekable, buffered reader that fetches byte ranges on demand."""
        from pdfbatch.archive import RangedReader

        if size is None:
            size = self.head_size(bucket, key)

        def fetch(start: int, end_inclusive: int) -> bytes:
            try:
                body = self.client.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{end_inclusive}")
                return bytes(body["Body"].read())
            except (ClientError, BotoCoreError) as exc:
                raise _translate(exc) from exc

        return io.BufferedReader(RangedReader(fetch, size), buffer_size=64 * 1024)

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

    def delete(self, bucket: str, key: str) -> None:
        """Delete (absent objects are fine)."""
        try:
            self.client.delete_object(Bucket=bucket, Key=key)
        except (ClientError, BotoCoreError) as exc:
            raise _translate(exc) from exc

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
