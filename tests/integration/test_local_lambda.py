"""The local Lambda executor against a real LocalStack: isolation, errors, timeouts, crashes, concurrency."""

from __future__ import annotations

import base64
import io
import json
import textwrap
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

pytestmark = pytest.mark.integration

ROLE = "arn:aws:iam::000000000000:role/lambda-test"


@pytest.fixture()
def aws(localstack: str) -> Any:
    """A factory of boto3 clients bound to LocalStack."""

    make: Any = boto3.client  # service names are plain strings here, not the stubs' literals

    def client(service: str) -> Any:
        return make(
            service,
            endpoint_url=localstack,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )

    return client


@pytest.fixture()
def lambda_client(aws: Any) -> Iterator[Any]:
    """The Lambda client; functions created through `deploy` are deleted afterwards."""
    client = aws("lambda")
    client.created = []
    yield client
    for name in client.created:
        client.delete_function(FunctionName=name)


def _zip(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, source in files.items():
            archive.writestr(name, textwrap.dedent(source))
    return buffer.getvalue()


def deploy(client: Any, files: dict[str, str], timeout: int = 3, env: dict[str, str] | None = None) -> str:
    """Create a python3.13 function from `files` and wait until it is Active."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    client.create_function(
        FunctionName=name,
        Runtime="python3.13",
        Role=ROLE,
        Handler="handler.handler",
        Code={"ZipFile": _zip(files)},
        Timeout=timeout,
        Environment={"Variables": env or {}},
    )
    client.created.append(name)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state = client.get_function(FunctionName=name)["Configuration"]["State"]
        if state == "Active":
            return name
        assert state == "Pending", f"function ended in state {state}"
        time.sleep(0.1)
    raise AssertionError(f"{name} not Active after 30 s")


def invoke(client: Any, name: str, event: dict[str, Any] | None = None) -> tuple[dict[str, Any], Any, str]:
    """Invoke synchronously; return (payload, FunctionError or None, log tail)."""
    response = client.invoke(FunctionName=name, Payload=json.dumps(event or {}), LogType="Tail")
    logs = base64.b64decode(response.get("LogResult") or b"").decode()
    return json.loads(response["Payload"].read() or b"null"), response.get("FunctionError"), logs


ECHO = """
    import os
    import sys

    import helper

    print("cold start")

    def handler(event, context):
        print("handling", event["n"], file=sys.stderr)
        try:
            import pypdf  # in the dev venv, not in this zip
            pypdf_visible = True
        except ImportError:
            pypdf_visible = False
        return {
            "n": event["n"],
            "helper": helper.VALUE,
            "pypdf_visible": pypdf_visible,
            "request_id": context.aws_request_id,
            "arn": context.invoked_function_arn,
            "function_name": context.function_name,
            "memory": context.memory_limit_in_mb,
            "remaining_ms": context.get_remaining_time_in_millis(),
            "log_group": context.log_group_name,
            "log_stream": context.log_stream_name,
            "endpoint": os.environ.get("AWS_ENDPOINT_URL"),
        }
"""


def test_invoke_returns_handler_result_and_sees_only_its_zip(lambda_client: Any, aws: Any) -> None:
    # GIVEN a function whose zip holds a helper module but not pypdf (which the dev venv has)
    name = deploy(lambda_client, {"handler.py": ECHO, "helper.py": "VALUE = 42\n"})

    # WHEN it is invoked twice
    first, error, logs = invoke(lambda_client, name, {"n": 1})
    second, _, _ = invoke(lambda_client, name, {"n": 2})

    # THEN it returns the handler's result, imports from its zip only, and gets a full context
    assert error is None, first
    assert first["n"] == 1 and second["n"] == 2
    assert first["helper"] == 42
    assert first["pypdf_visible"] is False
    assert first["function_name"] == name
    assert first["arn"].endswith(f":function:{name}")
    assert first["request_id"] != second["request_id"]
    assert first["memory"] == "128"
    assert 0 < first["remaining_ms"] <= 3000
    assert first["log_group"] == f"/aws/lambda/{name}" and first["log_stream"]
    assert first["endpoint"].startswith("http://127.0.0.1:")
    # and what it printed (init output included, as on AWS) reaches the invoke's log tail and CloudWatch
    assert "cold start" in logs and "handling 1" in logs and f"END RequestId: {first['request_id']}" in logs
    cloudwatch = aws("logs")
    deadline = time.monotonic() + 10
    messages: list[str] = []
    while time.monotonic() < deadline and not any("handling 2" in m for m in messages):
        time.sleep(0.2)
        try:  # LocalStack writes CloudWatch logs in the background: the group may not exist yet
            found = cloudwatch.filter_log_events(logGroupName=f"/aws/lambda/{name}")["events"]
        except cloudwatch.exceptions.ResourceNotFoundException:
            continue
        messages = [event["message"] for event in found]
    assert any("handling 2" in m for m in messages)


def test_import_error_is_reported_as_import_module_error(lambda_client: Any) -> None:
    # GIVEN a function that imports a package its zip does not ship
    name = deploy(
        lambda_client, {"handler.py": "import pypdf\n\ndef handler(event, context):\n    return 1\n"}
    )

    # WHEN it is invoked
    payload, error, _ = invoke(lambda_client, name)

    # THEN Lambda's init error comes back, not a hang or a LocalStack error
    assert error == "Unhandled"
    assert payload["errorType"] == "Runtime.ImportModuleError"
    assert "No module named 'pypdf'" in payload["errorMessage"]


def test_handler_exception_is_reported_with_its_type(lambda_client: Any) -> None:
    # GIVEN a handler that raises
    source = "def handler(event, context):\n    raise ValueError('bad input')\n"
    name = deploy(lambda_client, {"handler.py": source})

    # WHEN it is invoked
    payload, error, logs = invoke(lambda_client, name)

    # THEN the error carries the exception's type and message, and the traceback is in the log
    assert error == "Unhandled"
    assert payload["errorType"] == "ValueError" and payload["errorMessage"] == "bad input"
    assert "[ERROR] ValueError: bad input" in logs


SLEEPER = """
    import os
    import time

    def handler(event, context):
        if event.get("exit"):
            os._exit(event["exit"])
        time.sleep(event.get("sleep", 0))
        return {"pid": os.getpid()}
"""


def test_timeout_is_reported_and_the_next_invoke_works(lambda_client: Any) -> None:
    # GIVEN a function with a 1 s timeout
    name = deploy(lambda_client, {"handler.py": SLEEPER}, timeout=1)

    # WHEN one invocation runs past it
    started = time.monotonic()
    payload, error, logs = invoke(lambda_client, name, {"sleep": 30})
    took = time.monotonic() - started

    # THEN it is stopped at the timeout and reported as such
    assert error == "Unhandled"
    assert payload["errorType"] == "Sandbox.Timedout"
    assert "Task timed out after 1.00 seconds" in payload["errorMessage"]
    assert "Task timed out" in logs
    assert took < 5

    # AND the next invocation gets a fresh, working environment
    payload, error, _ = invoke(lambda_client, name, {"sleep": 0})
    assert error is None and payload["pid"] > 0


def test_crashing_process_returns_an_error_not_a_hang(lambda_client: Any) -> None:
    # GIVEN a function whose process exits in the middle of an invocation
    name = deploy(lambda_client, {"handler.py": SLEEPER}, timeout=10)
    warm, _, _ = invoke(lambda_client, name, {"sleep": 0})

    # WHEN it calls os._exit
    started = time.monotonic()
    payload, error, _ = invoke(lambda_client, name, {"exit": 3})
    took = time.monotonic() - started

    # THEN the caller gets Runtime.ExitError at once, not after the 10 s timeout
    assert error == "Unhandled"
    assert payload["errorType"] == "Runtime.ExitError"
    assert "exit status 3" in payload["errorMessage"]
    assert took < 5

    # AND the environment is re-initialised for the next invocation
    payload, error, _ = invoke(lambda_client, name, {"sleep": 0})
    assert error is None and payload["pid"] != warm["pid"]


RECORDER = """
    import json
    import os
    import time

    def handler(event, context):
        started = time.time()
        time.sleep(1.0)
        ended = time.time()
        line = json.dumps({"id": event["Records"][0]["messageId"], "start": started, "end": ended}) + "\\n"
        # One O_APPEND write per record: concurrent environments never interleave their lines.
        fd = os.open(os.environ["RECORD_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, line.encode())
        os.close(fd)
        return {"batchItemFailures": []}
"""


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The largest number of intervals open at one instant (an end at t closes before a start at t)."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    open_now = peak = 0
    for _, step in edges:
        open_now += step
        peak = max(peak, open_now)
    return peak


def test_sqs_mapping_runs_up_to_maximum_concurrency_batches_at_once(
    lambda_client: Any, aws: Any, tmp_path: Path
) -> None:
    # GIVEN a function (reserved concurrency 5) fed by an SQS mapping with MaximumConcurrency 5, batch size 1
    record_file = tmp_path / "records.jsonl"
    name = deploy(lambda_client, {"handler.py": RECORDER}, timeout=10, env={"RECORD_FILE": str(record_file)})
    lambda_client.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=5)
    sqs = aws("sqs")
    queue_url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    mapping = lambda_client.create_event_source_mapping(
        EventSourceArn=queue_arn,
        FunctionName=name,
        BatchSize=1,
        ScalingConfig={"MaximumConcurrency": 5},
        FunctionResponseTypes=["ReportBatchItemFailures"],
    )
    try:
        # WHEN 35 messages arrive
        total = 35
        for first in range(0, total, 10):
            entries = [
                {"Id": str(i), "MessageBody": json.dumps({"n": i})}
                for i in range(first, min(first + 10, total))
            ]
            assert not sqs.send_message_batch(QueueUrl=queue_url, Entries=entries).get("Failed")
        deadline = time.monotonic() + 90
        records: list[dict[str, Any]] = []
        while time.monotonic() < deadline and len(records) < total:
            time.sleep(0.5)
            if record_file.exists():
                records = [json.loads(line) for line in record_file.read_text().splitlines()]

        # THEN every message is handled once, and exactly 5 batches ran at the same time, never 6
        assert len(records) == total
        assert len({r["id"] for r in records}) == total
        assert max_overlap([(r["start"], r["end"]) for r in records]) == 5
    finally:
        lambda_client.delete_event_source_mapping(UUID=mapping["UUID"])
        sqs.delete_queue(QueueUrl=queue_url)
