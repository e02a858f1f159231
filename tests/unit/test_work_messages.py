"""A work message's body, whatever arrives on a queue: the task it names, or InvalidInput; never a crash.

Every consumer (process_pdf, ocr_pdf, unzip's dead letters, `pdfbatch dlq`) parses a body through
FileTask.from_body, so a body that raises anything else would fail a whole SQS batch instead of one
message. The expected task is the one the body was made from, not what the parser says.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.examples import examples
from pdfbatch.errors import InvalidInput
from pdfbatch.model import FileTask

batch_ids = st.text(alphabet="0123456789abcdef", min_size=32, max_size=32)
tasks = st.builds(
    FileTask,
    batch_id=batch_ids,
    index=st.integers(0, 2**31),
    staging_key=st.text(max_size=60),
    bucket=st.text(min_size=1, max_size=20),
)
odd_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # inf and nan included: JSON's Infinity and NaN, which json.loads accepts
    st.text(max_size=30),
    st.sampled_from(["9" * 5000, "-1", "1e400", ""]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


@st.composite
def bodies(draw: st.DrawFn) -> str | bytes | None:
    """Bodies a queue may hold: a real task with fields replaced or removed, JSON of any shape, deep
    nesting, bytes that are not UTF-8, nothing at all."""
    kind = draw(st.sampled_from(["task", "json", "deep", "bytes", "text", "none"]))
    if kind == "task":
        message = draw(tasks).to_message()
        for field in draw(st.sets(st.sampled_from(sorted(message)))):
            if draw(st.booleans()):
                del message[field]
            else:
                message[field] = draw(odd_values)
        return json.dumps(message, allow_nan=True)
    if kind == "json":
        return json.dumps(draw(st.recursive(odd_values, lambda c: st.lists(c, max_size=3), max_leaves=8)))
    if kind == "deep":
        depth = draw(st.integers(1, 100_000))
        return draw(st.sampled_from(["[", '{"a":'])) * depth
    if kind == "bytes":
        return draw(st.binary(max_size=60))
    if kind == "text":
        return draw(st.text(max_size=60))
    return None


@settings(max_examples=examples(300), deadline=None)
@given(task=tasks)
def test_a_task_reads_back_from_its_own_message(task: FileTask) -> None:
    # GIVEN the body a producer sends WHEN a consumer parses it THEN it names the same file
    assert FileTask.from_body(json.dumps(task.to_message())) == task
    assert FileTask.from_body(json.dumps(task.to_message()).encode()) == task


@settings(max_examples=examples(500), deadline=None)
@given(body=bodies())
def test_any_body_is_a_task_or_invalid_input(body: str | bytes | None) -> None:
    # WHEN any body is parsed THEN it is a well-formed task or InvalidInput, nothing else escapes
    try:
        task = FileTask.from_body(body)
    except InvalidInput:
        return
    assert task.index >= 0 and len(task.batch_id) == 32


@pytest.mark.parametrize(
    "body",
    [
        '{"batchId": "' + "a" * 32 + '", "index": Infinity, "key": "k", "bucket": "b"}',
        '{"batchId": "' + "a" * 32 + '", "index": -Infinity, "key": "k", "bucket": "b"}',
        "[" * 100_000,
    ],
)
def test_bodies_that_crashed_the_parser_are_invalid_input(body: str) -> None:
    # (found by test_any_body_is_a_task_or_invalid_input: int(inf) raised OverflowError, deep nesting
    # RecursionError, both past the parser's except list)
    with pytest.raises(InvalidInput):
        FileTask.from_body(body)
