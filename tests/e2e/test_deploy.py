"""Deploy infra/template.yaml to LocalStack with tools.deploy and check what it created."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tools.build import project_root
from tools.deploy import DeployParams, deploy

from fixtures.pipeline import empty_and_delete_bucket

pytestmark = pytest.mark.e2e

REGION = "us-east-1"
FUNCTION_KEYS = ("UnzipFunctionName", "ProcessPdfFunctionName", "OcrPdfFunctionName", "StatusFunctionName")
# Secrets are read again after 2 s, so a rotation shows within the test.
PARAMS = DeployParams.from_env(extra={"SecretsMaxAge": "2"})


def _endpoint_of(handle: Any) -> str:
    if isinstance(handle, str):
        return handle
    for attr in ("endpoint", "endpoint_url", "url"):
        value = getattr(handle, attr, None)
        if isinstance(value, str):
            return value
    raise TypeError(f"cannot tell the endpoint of the localstack fixture value {handle!r}")


@pytest.fixture(scope="module")
def endpoint(localstack: Any) -> str:
    """The endpoint of the LocalStack leased by the session's `localstack` fixture."""
    return _endpoint_of(localstack)


@pytest.fixture(scope="module")
def aws(endpoint: str) -> Any:
    import boto3

    def client(service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=endpoint,
            region_name=REGION,
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )

    return client


@pytest.fixture(scope="module")
def stack(endpoint: str, aws: Any) -> Iterator[dict[str, Any]]:
    """A fresh stack (unique name, so a shared LocalStack is not disturbed), deleted afterwards."""
    name = f"pdfbatch-it-{uuid.uuid4().hex[:8]}"
    messages: list[str] = []
    started = time.monotonic()
    outputs = deploy(PARAMS, endpoint, name, region=REGION, log=messages.append)
    yield {"name": name, "outputs": outputs, "messages": messages, "seconds": time.monotonic() - started}
    delete_stack(aws, name, outputs["BucketName"], outputs["ArtifactsBucket"])


def delete_stack(aws: Any, name: str, *buckets: str) -> None:
    """Delete the stack and empty and delete the buckets it leaves (the data bucket is Retained)."""
    cfn, s3 = aws("cloudformation"), aws("s3")
    cfn.delete_stack(StackName=name)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        stacks = cfn.describe_stacks()["Stacks"]
        if not [s for s in stacks if s["StackName"] == name and s["StackStatus"] != "DELETE_COMPLETE"]:
            break
        time.sleep(0.5)
    for bucket in buckets:
        try:
            empty_and_delete_bucket(s3, bucket)  # the data bucket keeps versions
        except s3.exceptions.NoSuchBucket:
            continue  # the stack under test never created it (a failed-create test): nothing to clean


def test_deploy_returns_every_output(stack: dict[str, Any]) -> None:
    out = stack["outputs"]
    assert {
        "ApiUrl",
        "ApiId",
        "LocalApiUrl",
        "BucketName",
        "QueueUrl",
        "DeadLetterQueueUrl",
        "ParkedQueueUrl",
        "UnzipDeadLetterQueueUrl",
        "UnzipFunctionName",
        "ProcessPdfFunctionName",
        "StatusFunctionName",
    } <= set(out)
    assert out["BucketName"] == f"{stack['name']}-000000000000-{REGION}"
    assert out["UnzipFunctionName"] == f"{stack['name']}-unzip"
    assert out["LocalApiUrl"].endswith(f"/_aws/execute-api/{out['ApiId']}/v1/")
    assert any("created" in m for m in stack["messages"]), stack["messages"]


def test_functions_run_python_3_13_with_their_settings(stack: dict[str, Any], aws: Any) -> None:
    out, lam = stack["outputs"], aws("lambda")
    for key in FUNCTION_KEYS:
        cfg = lam.get_function_configuration(FunctionName=out[key])
        assert cfg["Runtime"] == "python3.13"
        assert cfg["Handler"] == "handler.handler"
        env = cfg["Environment"]["Variables"]
        assert env["PDFBATCH_BUCKET"] == out["BucketName"]
        assert env["PDFBATCH_MYSQL_URL"] and env["PDFBATCH_REDIS_URL"]
        # where the database is, never who may use it: that is in the secret the function reads
        assert "@" not in env["PDFBATCH_MYSQL_URL"]
        assert env["PDFBATCH_MYSQL_SECRET"] == out["DatabaseSecretArn"]
        assert "PDFBATCH_API_KEY" not in env
    unzip = lam.get_function_configuration(FunctionName=out["UnzipFunctionName"])
    assert unzip["Environment"]["Variables"]["PDFBATCH_WORK_QUEUE_URL"] == out["QueueUrl"]
    process = lam.get_function_configuration(FunctionName=out["ProcessPdfFunctionName"])
    assert process["Environment"]["Variables"]["PDFBATCH_MAX_RECEIVE_COUNT"] == "5"
    assert process["Environment"]["Variables"]["PDFBATCH_OCR_QUEUE_URL"] == out["OcrQueueUrl"]
    ocr = lam.get_function_configuration(FunctionName=out["OcrPdfFunctionName"])["Environment"]["Variables"]
    assert (ocr["PDFBATCH_OCR_QUEUE_URL"], ocr["OMP_THREAD_LIMIT"]) == (out["OcrQueueUrl"], "1")


def test_process_pdf_reads_the_queue_in_partial_batches_five_at_most_at_once(
    stack: dict[str, Any], aws: Any
) -> None:
    out, lam, sqs = stack["outputs"], aws("lambda"), aws("sqs")
    queue_arn = sqs.get_queue_attributes(QueueUrl=out["QueueUrl"], AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    (mapping,) = lam.list_event_source_mappings(FunctionName=out["ProcessPdfFunctionName"])[
        "EventSourceMappings"
    ]
    assert mapping["EventSourceArn"] == queue_arn
    assert mapping["BatchSize"] == 5
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["ScalingConfig"]["MaximumConcurrency"] == 5
    reserved = lam.get_function_concurrency(FunctionName=out["ProcessPdfFunctionName"])
    assert reserved["ReservedConcurrentExecutions"] == 5


def test_work_queue_redrives_to_the_dlq_after_five_receives(stack: dict[str, Any], aws: Any) -> None:
    out, sqs = stack["outputs"], aws("sqs")
    attrs = sqs.get_queue_attributes(QueueUrl=out["QueueUrl"], AttributeNames=["All"])["Attributes"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=out["DeadLetterQueueUrl"], AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    redrive = json.loads(attrs["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == dlq_arn
    assert int(redrive["maxReceiveCount"]) == 5
    assert int(attrs["VisibilityTimeout"]) == 1080  # 6x the process_pdf timeout (180 s)


def test_zips_under_uploads_notify_unzip(stack: dict[str, Any], aws: Any) -> None:
    out = stack["outputs"]
    unzip_arn = aws("lambda").get_function_configuration(FunctionName=out["UnzipFunctionName"])["FunctionArn"]
    config = aws("s3").get_bucket_notification_configuration(Bucket=out["BucketName"])
    rules = []
    for cfg in config["LambdaFunctionConfigurations"]:
        assert cfg["LambdaFunctionArn"] == unzip_arn
        assert cfg["Events"] == ["s3:ObjectCreated:*"]
        rules.append({r["Name"].lower(): r["Value"] for r in cfg["Filter"]["Key"]["FilterRules"]})
    assert rules == [{"prefix": "uploads/"}]  # every object under uploads/, whatever its name


def test_a_second_deploy_changes_nothing_and_succeeds(stack: dict[str, Any], endpoint: str) -> None:
    messages: list[str] = []
    started = time.monotonic()
    outputs = deploy(PARAMS, endpoint, stack["name"], region=REGION, log=messages.append)
    print(f"unchanged deploy: {time.monotonic() - started:.2f} s; first: {stack['seconds']:.1f} s", messages)
    assert any(" unchanged " in m for m in messages), messages
    assert outputs == stack["outputs"]


def test_a_code_change_updates_only_that_function(
    stack: dict[str, Any], endpoint: str, aws: Any, tmp_path: Path
) -> None:
    # GIVEN a copy of the sources whose status handler differs by a comment
    root = project_root()
    for rel in ("pyproject.toml", "infra/template.yaml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, tmp_path / rel)
    shutil.copytree(
        root / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    shutil.copytree(root / "functions", tmp_path / "functions", ignore=shutil.ignore_patterns("__pycache__"))
    with (tmp_path / "functions" / "status" / "handler.py").open("a") as fh:
        fh.write("\n# a change\n")
    out, lam = stack["outputs"], aws("lambda")
    before = {k: lam.get_function(FunctionName=out[k])["Configuration"]["CodeSha256"] for k in FUNCTION_KEYS}
    # WHEN it is deployed over the stack
    messages: list[str] = []
    deploy(PARAMS, endpoint, stack["name"], region=REGION, root=tmp_path, log=messages.append)
    # THEN the status function runs the new code and the others keep theirs
    after = {k: lam.get_function(FunctionName=out[k])["Configuration"]["CodeSha256"] for k in FUNCTION_KEYS}
    assert any(" updated " in m for m in messages), messages
    assert after["StatusFunctionName"] != before["StatusFunctionName"]
    assert after["UnzipFunctionName"] == before["UnzipFunctionName"]
    assert after["ProcessPdfFunctionName"] == before["ProcessPdfFunctionName"]
    assert (
        lam.get_function_concurrency(FunctionName=out["ProcessPdfFunctionName"])[
            "ReservedConcurrentExecutions"
        ]
        == 5
    )


def test_a_failed_deploy_names_the_failed_resource_and_the_next_one_recreates_the_stack(
    endpoint: str, aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN code keys that point at nothing in the artefacts bucket
    import tools.deploy as ops_deploy

    def missing(s3: Any, bucket: str, stack_name: str, artefacts: Any) -> dict[str, str]:
        return {fn: f"{stack_name}/{fn}-missing.zip" for fn in artefacts}

    monkeypatch.setattr(ops_deploy, "upload_artefacts", missing)
    name = f"pdfbatch-it-{uuid.uuid4().hex[:8]}"
    messages: list[str] = []
    outputs: dict[str, str] = {}
    try:
        # WHEN it is deployed THEN the error and the log name the function that could not be created
        with pytest.raises(ops_deploy.DeployError, match="ended"):
            deploy(DeployParams.from_env(), endpoint, name, region=REGION, log=messages.append)
        failed = [m for m in messages if "FAILED" in m]
        assert failed and all("Function" in m for m in failed), messages
        # AND a good deploy afterwards replaces the failed stack
        monkeypatch.undo()
        messages.clear()
        outputs = deploy(DeployParams.from_env(), endpoint, name, region=REGION, log=messages.append)
        assert any("deleting it before creating it again" in m for m in messages), messages
        assert outputs["ProcessPdfFunctionName"] == f"{name}-process-pdf"
    finally:
        delete_stack(aws, name, f"{name}-000000000000-{REGION}", f"{name}-artifacts-000000000000-{REGION}")


# ------------------------------------------------------------------------------------------ issue 14


def test_functions_are_traced_and_run_on_this_machines_architecture(stack: dict[str, Any], aws: Any) -> None:
    from tools.build import host_architecture

    out, lam = stack["outputs"], aws("lambda")
    for key in FUNCTION_KEYS:
        cfg = lam.get_function_configuration(FunctionName=out[key])
        assert cfg["TracingConfig"]["Mode"] == "Active", key
        assert cfg["Architectures"] == [host_architecture()], key
    stage = aws("apigateway").get_stage(restApiId=out["ApiId"], stageName="v1")
    assert stage["tracingEnabled"] is True


def test_the_status_zip_deployed_holds_no_pdf_library(stack: dict[str, Any], aws: Any) -> None:
    import base64
    import io
    import zipfile

    out, lam, s3 = stack["outputs"], aws("lambda"), aws("s3")
    tops = {}
    for key, fn in zip(FUNCTION_KEYS, ("unzip", "process_pdf", "ocr_pdf", "status"), strict=True):
        # the zip the function runs: the uploaded artefact whose sha256 Lambda reports
        deployed = base64.b64decode(
            lam.get_function(FunctionName=out[key])["Configuration"]["CodeSha256"]
        ).hex()
        body = s3.get_object(Bucket=out["ArtifactsBucket"], Key=f"{stack['name']}/{fn}-{deployed}.zip")[
            "Body"
        ]
        tops[key] = {n.split("/", 1)[0] for n in zipfile.ZipFile(io.BytesIO(body.read())).namelist()}
    pdf_libraries = {"pypdf", "pypdfium2", "pypdfium2_raw", "cryptography"}
    assert not tops["StatusFunctionName"] & pdf_libraries
    assert not tops["UnzipFunctionName"] & pdf_libraries
    assert pdf_libraries <= tops["ProcessPdfFunctionName"]
    # the OCR lane's zip carries the engine and its model (a zip, not an image: infra/README.md), and so
    # does process_pdf's: its pixel check reads each user's address back where the page draws it
    modules = {key: names | {n.split(".", 1)[0] for n in names} for key, names in tops.items()}
    assert {"tesserocr", "share"} <= modules["OcrPdfFunctionName"]
    assert {"tesserocr", "PIL", "share"} <= modules["ProcessPdfFunctionName"]
    assert not (modules["StatusFunctionName"] | modules["UnzipFunctionName"]) & {"tesserocr", "PIL"}
    # and its reserved concurrency is the template's OcrConcurrency (applied by deploy on LocalStack)
    got = lam.get_function_concurrency(FunctionName=out["OcrPdfFunctionName"])
    assert got["ReservedConcurrentExecutions"] == 2


def test_the_secrets_hold_the_credentials_and_the_key_the_cli_finds(
    stack: dict[str, Any], aws: Any, endpoint: str
) -> None:
    from pdfbatch.api_client import stored_api_key
    from pdfbatch.config import split_mysql_credentials

    # GIVEN the stack deployed from this checkout (a test above deployed it from a copy, with its own key)
    messages: list[str] = []
    deploy(PARAMS, endpoint, stack["name"], region=REGION, log=messages.append)
    out, sm = stack["outputs"], aws("secretsmanager")
    database = json.loads(sm.get_secret_value(SecretId=out["DatabaseSecretArn"])["SecretString"])
    assert database == split_mysql_credentials(PARAMS.mysql_url)[1]
    key = sm.get_secret_value(SecretId=out["ApiKeySecretArn"])["SecretString"]
    assert key == stored_api_key(out["LocalApiUrl"], project_root())


def _call(url: str, key: str) -> int:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url + "batches/0123456789abcdef0123456789abcdef", headers={"x-api-key": key})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_the_status_function_reads_the_key_from_its_secret_and_follows_a_rotation(
    stack: dict[str, Any], aws: Any
) -> None:
    out, sm = stack["outputs"], aws("secretsmanager")
    url, old = out["LocalApiUrl"], sm.get_secret_value(SecretId=out["ApiKeySecretArn"])["SecretString"]
    # GIVEN the function answers the key from the secret (past the key check: not 401/403)
    assert _call(url, old) not in (401, 403)
    assert _call(url, "not-the-key-0123456789") == 403
    try:
        # WHEN the key is rotated in Secrets Manager, without a deploy
        new = "rotated-" + uuid.uuid4().hex
        sm.put_secret_value(SecretId=out["ApiKeySecretArn"], SecretString=new)
        # THEN once the cached key is older than SecretsMaxAge (2 s) the new key works and the old one not
        deadline = time.monotonic() + 30
        while _call(url, new) == 403 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _call(url, new) not in (401, 403)
        assert _call(url, old) == 403
    finally:
        sm.put_secret_value(SecretId=out["ApiKeySecretArn"], SecretString=old)


def test_the_alarms_and_the_dashboard_exist_on_the_stack(stack: dict[str, Any], aws: Any) -> None:
    out, cw, sqs = stack["outputs"], aws("cloudwatch"), aws("sqs")
    alarms = {
        a["AlarmName"]: a for a in cw.describe_alarms(AlarmNamePrefix=stack["name"] + "-")["MetricAlarms"]
    }
    suffixes = {
        "work-dlq-not-empty",
        "callback-dlq-not-empty",
        "unzip-dlq-not-empty",
        "files-gave-up",
        "unzip-errors",
        "pdf-lane-queue-age",
        "ocr-lane-queue-age",
        "status-5xx",
    }
    assert set(alarms) == {f"{stack['name']}-{s}" for s in suffixes}
    work_queue = out["QueueUrl"].rsplit("/", 1)[-1]
    age = alarms[f"{stack['name']}-pdf-lane-queue-age"]
    assert age["Dimensions"] == [{"Name": "QueueName", "Value": work_queue}]
    assert age["Threshold"] == 1800
    gave_up = alarms[f"{stack['name']}-files-gave-up"]
    assert (gave_up["Namespace"], gave_up["MetricName"]) == ("pdfbatch", "FilesGaveUp")
    dlq = sqs.get_queue_attributes(QueueUrl=out["DeadLetterQueueUrl"], AttributeNames=["QueueArn"])
    dlq_name = dlq["Attributes"]["QueueArn"].rsplit(":", 1)[-1]
    assert alarms[f"{stack['name']}-work-dlq-not-empty"]["Dimensions"][0]["Value"] == dlq_name
    body = json.loads(cw.get_dashboard(DashboardName=out["DashboardName"])["DashboardBody"])
    titles = {w["properties"].get("title") for w in body["widgets"]}
    assert {"pdf lane: queue age", "pdf lane: worker duration", "files per minute by outcome"} <= titles
    rows = [r for w in body["widgets"] if w["type"] == "metric" for r in w["properties"]["metrics"]]
    assert ["AWS/SQS", "ApproximateAgeOfOldestMessage", "QueueName", work_queue] in [r[:4] for r in rows]
    assert ["AWS/Lambda", "Duration", "FunctionName", out["ProcessPdfFunctionName"]] in [r[:4] for r in rows]
    alarm_widget = next(w for w in body["widgets"] if w["type"] == "alarm")
    assert {a["AlarmArn"] for a in alarms.values()} == set(alarm_widget["properties"]["alarms"])


def test_deliver_callbacks_polls_both_lanes_with_the_signing_secret_and_concurrency_2_each(
    stack: dict[str, Any], aws: Any
) -> None:
    out, lam, sqs = stack["outputs"], aws("lambda"), aws("sqs")
    name = out["DeliverCallbacksFunctionName"]
    env = lam.get_function_configuration(FunctionName=name)["Environment"]["Variables"]
    assert env["PDFBATCH_CALLBACK_SECRET"] == out["CallbackSecretArn"]
    assert env["PDFBATCH_CALLBACK_QUEUE_URL"] == out["CallbackQueueUrl"]
    status = lam.get_function_configuration(FunctionName=out["StatusFunctionName"])["Environment"][
        "Variables"
    ]
    assert "PDFBATCH_CALLBACK_SECRET" not in status
    assert lam.get_function_concurrency(FunctionName=name)["ReservedConcurrentExecutions"] == 4

    def arn(url: str) -> str:
        return str(
            sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        )

    queue_arn, slow_arn = arn(out["CallbackQueueUrl"]), arn(out["SlowCallbackQueueUrl"])
    assert env["PDFBATCH_CALLBACK_SLOW_QUEUE_URL"] == out["SlowCallbackQueueUrl"]
    assert env["PDFBATCH_CALLBACK_SLOW_QUEUE_ARN"] == slow_arn
    mappings = lam.list_event_source_mappings(FunctionName=name)["EventSourceMappings"]
    assert {(m["EventSourceArn"], m["BatchSize"]) for m in mappings} == {(queue_arn, 10), (slow_arn, 1)}
    redrive = json.loads(
        sqs.get_queue_attributes(QueueUrl=out["CallbackQueueUrl"], AttributeNames=["RedrivePolicy"])[
            "Attributes"
        ]["RedrivePolicy"]
    )
    assert int(redrive["maxReceiveCount"]) == 8
