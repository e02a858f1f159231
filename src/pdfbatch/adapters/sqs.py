"""The work queue (one message per staged PDF, sent ten at a time; visibility changed to back off or
release a message) and its dead-letter queue, as `pdfbatch dlq` lists and redrives it."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from pdfbatch.errors import DependencyUnavailable
from pdfbatch.model import FileTask
from pdfbatch.ports import DeadLetter

_ATTEMPTS = 5  # sends of the entries SendMessageBatch refused (the call itself is retried by botocore)


def send_json(client: Any, queue_url: str, message: Mapping[str, Any]) -> None:
    """Send one JSON message (a callback replay); DependencyUnavailable when SQS refuses it."""
    try:
        client.send_message(QueueUrl=queue_url, MessageBody=json.dumps(dict(message), sort_keys=True))
    except (ClientError, BotoCoreError) as exc:
        code = exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else ""
        raise DependencyUnavailable("sqs", str(code) or type(exc).__name__) from exc


class SqsQueue:
    """WorkQueue over a boto3 SQS client; entries a SendMessageBatch refused are re-sent, then it fails."""

    def __init__(self, client: Any, queue_url: str, sleep: Any = time.sleep) -> None:
        self.client = client
        self.queue_url = queue_url
        self._sleep = sleep

    def send_tasks(self, tasks: Sequence[FileTask]) -> None:
        """Send every task; raise DependencyUnavailable if some are still refused after re-sending them."""
        for start in range(0, len(tasks), 10):
            self._send_ten(tasks[start : start + 10])

    def send_json(self, message: Mapping[str, Any], delay_seconds: int = 0) -> None:
        """Send one JSON message after ``delay_seconds`` (at most 900); DependencyUnavailable if refused."""
        try:
            self.client.send_message(
                QueueUrl=self.queue_url,
                MessageBody=json.dumps(dict(message), sort_keys=True),
                DelaySeconds=max(0, min(int(delay_seconds), 900)),
            )
        except (ClientError, BotoCoreError) as exc:
            code = exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else ""
            raise DependencyUnavailable("sqs", str(code) or type(exc).__name__) from exc

    def change_visibility(self, receipt_handle: str, delay_seconds: int) -> None:
        """Hide a received message for ``delay_seconds`` more (0: visible now; SQS caps it at 12 hours)."""
        try:
            self.client.change_message_visibility(
                QueueUrl=self.queue_url,
                ReceiptHandle=receipt_handle,
                VisibilityTimeout=max(0, min(int(delay_seconds), 43_200)),
            )
        except (ClientError, BotoCoreError) as exc:
            code = exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else ""
            raise DependencyUnavailable("sqs", str(code) or type(exc).__name__) from exc

    def _send_ten(self, tasks: Sequence[FileTask]) -> None:
        pending = {str(i): t for i, t in enumerate(tasks)}
        for attempt in range(_ATTEMPTS):
            entries = [
                {"Id": entry_id, "MessageBody": json.dumps(task.to_message(), separators=(",", ":"))}
                for entry_id, task in pending.items()
            ]
            try:
                response = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            except (ClientError, BotoCoreError) as exc:
                # The client's own retries (botocore's standard mode, see bootstrap) are spent already.
                raise DependencyUnavailable("sqs", type(exc).__name__) from exc
            # SendMessageBatch answers 200 even when some entries were refused.
            failed = response.get("Failed") or []
            sender_faults = [f for f in failed if f.get("SenderFault")]
            if sender_faults:
                raise DependencyUnavailable("sqs", f"message refused: {sender_faults[0].get('Code')}")
            pending = {f["Id"]: pending[f["Id"]] for f in failed}
            if not pending:
                return
            self._sleep(0.1 * 2**attempt)
        raise DependencyUnavailable("sqs", f"{len(pending)} messages not accepted")


class SqsDeadLetters:
    """DeadLetters over a boto3 SQS client: what `pdfbatch dlq` lists and redrives."""

    def __init__(self, client: Any, queue_url: str) -> None:
        self.client = client
        self.queue_url = queue_url

    def _call(self, method: str, **kwargs: Any) -> Any:
        try:
            return getattr(self.client, method)(QueueUrl=self.queue_url, **kwargs)
        except (ClientError, BotoCoreError) as exc:
            code = exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else ""
            raise DependencyUnavailable("sqs", str(code) or type(exc).__name__) from exc

    def approximate_count(self) -> int:
        """Visible plus in-flight messages."""
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        attrs = self._call("get_queue_attributes", AttributeNames=names).get("Attributes", {})
        return sum(int(attrs.get(n, 0)) for n in names)

    def receive(self, max_messages: int, visibility_timeout: int) -> list[DeadLetter]:
        """Up to ten messages, hidden for ``visibility_timeout`` seconds (no long polling)."""
        response = self._call(
            "receive_message",
            MaxNumberOfMessages=max(1, min(max_messages, 10)),
            VisibilityTimeout=visibility_timeout,
            WaitTimeSeconds=0,
            AttributeNames=["All"],
        )
        letters = []
        for m in response.get("Messages", []):
            attrs = m.get("Attributes", {})
            sent = attrs.get("SentTimestamp")
            letters.append(
                DeadLetter(
                    message_id=m["MessageId"],
                    receipt_handle=m["ReceiptHandle"],
                    body=m.get("Body", ""),
                    receive_count=int(attrs.get("ApproximateReceiveCount", 0)),
                    sent_at=int(sent) / 1000.0 if sent else None,
                )
            )
        return letters

    def release(self, letters: Sequence[DeadLetter]) -> None:
        """Visible again now."""
        for start in range(0, len(letters), 10):
            entries = [
                {"Id": str(i), "ReceiptHandle": letter.receipt_handle, "VisibilityTimeout": 0}
                for i, letter in enumerate(letters[start : start + 10])
            ]
            self._call("change_message_visibility_batch", Entries=entries)

    def delete(self, letters: Sequence[DeadLetter]) -> None:
        """Deleted; raises when SQS refuses any."""
        for start in range(0, len(letters), 10):
            entries = [
                {"Id": str(i), "ReceiptHandle": letter.receipt_handle}
                for i, letter in enumerate(letters[start : start + 10])
            ]
            failed = self._call("delete_message_batch", Entries=entries).get("Failed") or []
            if failed:
                detail = f"{len(failed)} messages not deleted: {failed[0].get('Code')}"
                raise DependencyUnavailable("sqs", detail)
