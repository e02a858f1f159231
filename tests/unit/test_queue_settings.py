"""Each queue has its own setting, and each lane backs its messages off on its own queue."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from pdfbatch.config import Settings
from pdfbatch.errors import DependencyUnavailable
from pdfbatch.model import FileTask, Lane
from pdfbatch.services import file_messages
from pdfbatch.services.deps import Deps
from pdfbatch.services.file_messages import FileMessage
from pdfbatch.services.redelivery import OutOfTime


class Recorded:
    """A queue that records the visibility changes made on it."""

    def __init__(self) -> None:
        self.delays: list[tuple[str, int]] = []

    def send_tasks(self, tasks: Any) -> None:
        raise AssertionError("a failed message is backed off, never sent")

    def change_visibility(self, receipt_handle: str, delay_seconds: int) -> None:
        self.delays.append((receipt_handle, delay_seconds))


def _message(receive_count: int) -> FileMessage:
    task = FileTask("b" * 32, 0, "staging/x/0.pdf", "bucket")
    return FileMessage("m1", json.dumps(task.to_message()), "rh", {"ApproximateReceiveCount": receive_count})


def _failing(task: FileTask) -> None:
    raise DependencyUnavailable("s3", "SlowDown")


def test_every_queue_is_read_from_its_own_variable() -> None:
    # GIVEN one URL per queue, each under its own variable
    env = {
        "PDFBATCH_WORK_QUEUE_URL": "http://q/work",
        "PDFBATCH_OCR_QUEUE_URL": "http://q/ocr",
        "PDFBATCH_CALLBACK_QUEUE_URL": "http://q/callbacks",
        "PDFBATCH_CALLBACK_SLOW_QUEUE_URL": "http://q/slow",
        "PDFBATCH_PARKED_QUEUE_URL": "http://q/parked",
    }
    # WHEN the settings are read THEN each lands in its own setting
    s = Settings.from_env(env)
    got = (
        s.work_queue_url,
        s.ocr_queue_url,
        s.callback_queue_url,
        s.callback_slow_queue_url,
        s.parked_queue_url,
    )
    assert got == ("http://q/work", "http://q/ocr", "http://q/callbacks", "http://q/slow", "http://q/parked")


@pytest.mark.parametrize("lane", [Lane.TEXT, Lane.OCR])
@pytest.mark.parametrize("last", [False, True])
def test_a_failed_message_is_backed_off_on_its_own_lanes_queue(deps: Deps, lane: Lane, last: bool) -> None:
    # GIVEN a work queue and an OCR queue, and a message whose file work fails
    work, ocr = Recorded(), Recorded()
    mine = replace(deps, queue=work, ocr_queue=ocr)  # type: ignore[arg-type]
    receive_count = mine.settings.max_receive_count if last else 1
    # WHEN it fails on this lane (a retry, or its last receive)
    with pytest.raises(DependencyUnavailable):
        file_messages.handle(mine, _message(receive_count), lane, _failing)
    # THEN only that lane's queue saw the backoff (0: released to the DLQ at once)
    own, other = (ocr, work) if lane == Lane.OCR else (work, ocr)
    assert len(own.delays) == 1 and other.delays == []
    assert (own.delays[0][1] == 0) == last


@pytest.mark.parametrize("lane", [Lane.TEXT, Lane.OCR])
def test_a_message_without_time_left_is_released_on_its_own_lanes_queue(deps: Deps, lane: Lane) -> None:
    # GIVEN a work queue and an OCR queue
    work, ocr = Recorded(), Recorded()
    mine = replace(deps, queue=work, ocr_queue=ocr)  # type: ignore[arg-type]
    # WHEN a message arrives with no time left for a file
    with pytest.raises(OutOfTime):
        file_messages.handle(mine, _message(1), lane, _failing, remaining_ms=0)
    # THEN it is released at once on its own lane's queue only
    own, other = (ocr, work) if lane == Lane.OCR else (work, ocr)
    assert own.delays == [("rh", 0)] and other.delays == []
