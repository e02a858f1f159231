"""Make LocalStack's SQS event source mappings honour ScalingConfig.MaximumConcurrency."""

# LocalStack community polls a standard queue, invokes the function for one batch, waits for the answer,
# sleeps the poll interval (1 s) and only then polls again: one batch at a time per mapping, whatever
# MaximumConcurrency or the reserved concurrency say. On AWS up to MaximumConcurrency batches run at once.
# This patch (applied when the executor plugin loads, i.e. when the Lambda provider starts, before any
# mapping exists) keeps LocalStack's receive/filter/delete code and only changes the dispatch: while a slot
# of MaximumConcurrency is free it receives the next batch and hands it to a pool, draining the queue before
# going back to LocalStack's poll loop. FIFO queues and mappings without MaximumConcurrency are untouched.
#
# The idle start. After an empty poll LocalStack backs off exponentially (up to 10 s,
# LAMBDA_EVENT_SOURCE_MAPPING_MAX_BACKOFF_ON_EMPTY_POLL_SEC), so the first file of a batch uploaded to an
# idle stack waited 0.2-7.2 s before anything picked it up (measured, issue 15). On AWS the pollers
# long-poll and a message is picked up at once. Here an idle mapping long-polls too: it asks for one
# message with a long wait (IDLE_WAIT_SECONDS, returning as soon as one arrives), then drains the queue
# with the mapping's own batch size and window. Nothing is received that is not handled, so receive
# counts (and with them the redrive policy and the retry delays) are unchanged.

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from localstack.services.lambda_.event_source_mapping import esm_worker_factory
from localstack.services.lambda_.event_source_mapping.pollers.poller import EmptyPollResultsException
from localstack.services.lambda_.event_source_mapping.pollers.sqs_poller import SqsPoller

LOG = logging.getLogger(__name__)
_STATE = "_pdfbatch_concurrency"
# How long one idle receive waits for a message; a disabled or deleted mapping stops within this.
IDLE_WAIT_SECONDS = 2
_applied = False
_apply_lock = threading.Lock()


class _Dispatch:
    """Per-poller pool and slots; touched by the poller thread and the pool's workers."""

    def __init__(self, limit: int, stop: threading.Event, name: str) -> None:
        self.limit = limit
        # The EsmWorker's shutdown event: set when the mapping is disabled, deleted or updated.
        self.stop = stop
        self.slots = threading.BoundedSemaphore(limit)
        self.pool = ThreadPoolExecutor(max_workers=limit, thread_name_prefix=f"esm-{name[:8]}")
        self.active = False  # True only inside our poll loop, on the poller thread
        self.held = False  # a slot taken before receiving, not yet handed to a batch


def _acquire(dispatch: _Dispatch) -> bool:
    # Wait for a slot, but notice a stopped mapping instead of blocking its poller thread forever.
    while not dispatch.stop.is_set():
        if dispatch.slots.acquire(timeout=0.5):
            return True
    return False


def apply() -> None:
    """Patch SqsPoller and EsmWorkerFactory once per process."""
    global _applied
    with _apply_lock:
        if _applied:
            return
        _applied = True

    original_poll = SqsPoller.poll_events
    original_handle = SqsPoller.handle_messages
    original_close = SqsPoller.close
    original_get_worker = esm_worker_factory.EsmWorkerFactory.get_esm_worker

    def get_esm_worker(self: Any) -> Any:
        worker = original_get_worker(self)
        limit = (self.esm_config.get("ScalingConfig") or {}).get("MaximumConcurrency")
        if isinstance(worker.poller, SqsPoller) and limit:
            dispatch = _Dispatch(int(limit), worker._shutdown_event, str(worker.uuid))
            setattr(worker.poller, _STATE, dispatch)
            LOG.info("SQS mapping %s: up to %d batches at once", worker.uuid, dispatch.limit)
        return worker

    def poll_events(self: SqsPoller) -> None:
        dispatch: _Dispatch | None = getattr(self, _STATE, None)
        if dispatch is None or self.is_fifo_queue:
            return original_poll(self)
        received = False
        dispatch.active = True
        try:
            while _acquire(dispatch):
                dispatch.held = True
                try:
                    if received:
                        original_poll(self)  # receives one batch; handle_messages below submits it
                    else:
                        idle_poll(self, dispatch)
                except EmptyPollResultsException:
                    if received:
                        return  # drained: back to LocalStack's loop and its poll interval
                    raise  # the mapping stopped while idle
                finally:
                    if dispatch.held:  # the receive failed or was filtered away before dispatch
                        dispatch.held = False
                        dispatch.slots.release()
                received = True
        finally:
            dispatch.active = False

    def idle_poll(self: SqsPoller, dispatch: _Dispatch) -> None:
        """Long-poll for one message until one arrives or the mapping stops (see IDLE_WAIT_SECONDS)."""
        batch_size, window = self.batch_size, self.maximum_batching_window
        try:
            # LocalStack's receive returns when batch_size messages are there or the window ends:
            # asking for one makes it return on the first message, as a long poll on AWS does.
            self.batch_size, self.maximum_batching_window = 1, IDLE_WAIT_SECONDS
            while True:
                try:
                    original_poll(self)
                    return
                except EmptyPollResultsException:
                    if dispatch.stop.is_set():
                        raise
        finally:
            self.batch_size, self.maximum_batching_window = batch_size, window

    def handle_messages(self: SqsPoller, messages: Any) -> None:
        dispatch: _Dispatch | None = getattr(self, _STATE, None)
        if dispatch is None or not dispatch.active:
            return original_handle(self, messages)
        if dispatch.held:
            dispatch.held = False
        elif not _acquire(dispatch):
            return  # mapping stopped: the messages become visible again after the visibility timeout

        def run() -> None:
            try:
                original_handle(self, messages)
            except Exception as exc:  # noqa: BLE001 - same handling as LocalStack's own poll_events
                LOG.warning("Polling or batch processing failed: %s", exc)
            finally:
                dispatch.slots.release()

        try:
            dispatch.pool.submit(run)
        except RuntimeError:  # pool shut down by close(): give the slot back, messages reappear later
            dispatch.slots.release()

    def close(self: SqsPoller) -> None:
        original_close(self)
        dispatch: _Dispatch | None = getattr(self, _STATE, None)
        if dispatch is not None:
            dispatch.pool.shutdown(wait=False)

    SqsPoller.poll_events = poll_events  # type: ignore[method-assign]
    SqsPoller.handle_messages = handle_messages  # type: ignore[method-assign]
    SqsPoller.close = close  # type: ignore[method-assign,assignment]
    esm_worker_factory.EsmWorkerFactory.get_esm_worker = get_esm_worker  # type: ignore[method-assign]
    LOG.info("Patched SQS event source mappings to honour ScalingConfig.MaximumConcurrency")
