"""infra/template.yaml: cfn-lint clean, and the rules the pipeline depends on hold in the template."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cfnlint import decode as cfn_decode

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "infra" / "template.yaml"
CONFIG = ROOT / "src" / "pdfbatch" / "config.py"

# Actions AWS only grants on "*" (they act on no resource ARN, or on resources not yet created).
STAR_ONLY_ACTIONS = {
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
}
VPC_POLICY = "service-role/AWSLambdaVPCAccessExecutionRole"


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    tpl, errors = cfn_decode.decode(str(TEMPLATE))  # cfn-lint's decoder understands !Sub, !If, !GetAtt
    assert not errors, errors
    return dict(tpl)


def resources(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Serverless functions with the Globals merged in (function values win)."""
    glob = template.get("Globals", {}).get("Function", {})
    out = {}
    for name, res in resources(template, "AWS::Serverless::Function").items():
        props = {**glob, **res["Properties"]}
        env = {**glob.get("Environment", {}).get("Variables", {})}
        env.update(res["Properties"].get("Environment", {}).get("Variables", {}))
        props["Environment"] = {"Variables": env}
        out[name] = props
    return out


def resolve(template: dict[str, Any], value: Any) -> Any:
    """A {"Ref": Parameter} becomes the parameter's default (as a deploy without overrides sees it)."""
    if isinstance(value, dict) and set(value) == {"Ref"} and value["Ref"] in template["Parameters"]:
        return template["Parameters"][value["Ref"]].get("Default")
    return value


def number(template: dict[str, Any], value: Any) -> float:
    return float(resolve(template, value))


def function(template: dict[str, Any], logical_id: str) -> dict[str, Any]:
    return functions(template)[logical_id]


def events(template: dict[str, Any], type_: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, props in functions(template).items():
        for event in props.get("Events", {}).values():
            if event["Type"] == type_:
                yield name, event["Properties"]


def sqs_mapping(template: dict[str, Any], queue: str) -> tuple[str, dict[str, Any]]:
    """(function, event properties) of the one SQS event source reading ``queue``."""
    (found, *others) = [
        (fn, props)
        for fn, props in events(template, "SQS")
        if props["Queue"] == {"Fn::GetAtt": [queue, "Arn"]}
    ]
    assert not others, queue
    return found


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def arn_text(resource: Any) -> str:
    """The resource of a statement as text: the !Sub pattern, or GetAtt:X / Ref:X."""
    if isinstance(resource, str):
        return resource
    if "Fn::Sub" in resource:
        sub = resource["Fn::Sub"]
        return sub[0] if isinstance(sub, list) else sub
    if "Fn::GetAtt" in resource:
        att = resource["Fn::GetAtt"]
        return "GetAtt:" + (".".join(att) if isinstance(att, list) else att)
    if "Ref" in resource:
        return "Ref:" + resource["Ref"]
    return repr(resource)


def iam_statements(template: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every identity-policy statement: explicit roles and policies, and SAM inline Policies."""
    for name, res in template["Resources"].items():
        props = res.get("Properties", {})
        if res["Type"] == "AWS::IAM::Role":
            for policy in props.get("Policies", []):
                for st in as_list(policy["PolicyDocument"]["Statement"]):
                    yield name, st
        elif res["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            for st in as_list(props["PolicyDocument"]["Statement"]):
                yield name, st
        elif res["Type"] == "AWS::Serverless::Function":
            for policy in as_list(props.get("Policies", [])):
                if isinstance(policy, dict) and "Statement" in policy:
                    for st in as_list(policy["Statement"]):
                        yield name, st


def role_of(template: dict[str, Any], function_id: str) -> str:
    role = function(template, function_id)["Role"]
    return str(
        role["Fn::GetAtt"][0] if isinstance(role["Fn::GetAtt"], list) else role["Fn::GetAtt"].split(".")[0]
    )


def grants(template: dict[str, Any], role: str) -> set[tuple[str, str]]:
    """(action, resource pattern) pairs a role allows."""
    out = set()
    for name, st in iam_statements(template):
        if name == role and st["Effect"] == "Allow":
            for action in as_list(st["Action"]):
                for res in as_list(st["Resource"]):
                    out.add((action, arn_text(res)))
    return out


# ------------------------------------------------------------------------------------------ lint


@pytest.mark.slow
def test_cfn_lint_passes() -> None:
    # GIVEN the template WHEN cfn-lint (the venv's) checks it THEN it reports nothing
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from cfnlint.runner import main; sys.exit(main())",
            str(TEMPLATE),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ------------------------------------------------------------------------------------------ queue


def test_redrive_sends_to_the_dlq_after_at_least_five_receives(template: dict[str, Any]) -> None:
    redrive = template["Resources"]["WorkQueue"]["Properties"]["RedrivePolicy"]
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}
    assert number(template, redrive["maxReceiveCount"]) >= 5
    assert template["Parameters"]["MaxReceiveCount"]["MinValue"] >= 5


def test_process_pdf_reads_the_same_max_receive_count_as_the_redrive_policy(template: dict[str, Any]) -> None:
    redrive = template["Resources"]["WorkQueue"]["Properties"]["RedrivePolicy"]
    env = function(template, "ProcessPdfFunction")["Environment"]["Variables"]
    assert env["PDFBATCH_MAX_RECEIVE_COUNT"] == redrive["maxReceiveCount"]


def test_visibility_timeout_is_at_least_six_times_the_process_timeout(template: dict[str, Any]) -> None:
    visibility = number(template, template["Resources"]["WorkQueue"]["Properties"]["VisibilityTimeout"])
    timeout = number(template, function(template, "ProcessPdfFunction")["Timeout"])
    assert visibility >= 6 * timeout


def test_unzip_consumes_its_dead_letter_queue_so_no_batch_stays_processing(template: dict[str, Any]) -> None:
    # GIVEN S3 events unzip failed on every attempt land in UnzipDeadLetterQueue
    on_failure = function(template, "UnzipFunction")["EventInvokeConfig"]["DestinationConfig"]["OnFailure"]
    assert on_failure["Destination"] == {"Fn::GetAtt": ["UnzipDeadLetterQueue", "Arn"]}
    # THEN unzip reads that queue, and its visibility timeout covers unzip's timeout (an SQS event
    # source requires it; a shorter one would redeliver a message while it is still being handled)
    fn, _ = sqs_mapping(template, "UnzipDeadLetterQueue")
    assert fn == "UnzipFunction"
    visibility = template["Resources"]["UnzipDeadLetterQueue"]["Properties"]["VisibilityTimeout"]
    assert number(template, visibility) >= number(template, function(template, fn)["Timeout"])


def test_the_work_dlq_is_consumed_so_a_file_whose_last_delivery_died_still_ends(
    template: dict[str, Any],
) -> None:
    # GIVEN work messages that failed every delivery land in DeadLetterQueue
    # THEN unzip (not process_pdf, whose reserved concurrency is its work mapping's) reads it, retrying
    # a message until it is recorded (no redrive policy: an outage never moves it elsewhere), with a
    # visibility timeout that covers unzip's timeout
    fn, props = sqs_mapping(template, "DeadLetterQueue")
    assert fn == "UnzipFunction" and props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    dlq = template["Resources"]["DeadLetterQueue"]["Properties"]
    assert "RedrivePolicy" not in dlq
    assert number(template, dlq["VisibilityTimeout"]) >= number(template, function(template, fn)["Timeout"])
    # AND gave_up files are parked where `pdfbatch dlq` finds them: unzip may send there, and only there
    env = function(template, fn)["Environment"]["Variables"]
    assert env["PDFBATCH_PARKED_QUEUE_URL"] == {"Ref": "ParkedQueue"}
    assert template["Outputs"]["ParkedQueueUrl"]["Value"] == {"Ref": "ParkedQueue"}


def test_unzip_tells_its_dead_letter_queues_apart_by_their_arn(template: dict[str, Any]) -> None:
    # GIVEN unzip's three dead-letter event sources
    for queue in ("UnzipDeadLetterQueue", "DeadLetterQueue", "OcrDeadLetterQueue"):
        assert sqs_mapping(template, queue)[0] == "UnzipFunction"
    # THEN it is told which one carries failed S3 events (the others carry file dead letters)
    env = function(template, "UnzipFunction")["Environment"]["Variables"]
    assert env["PDFBATCH_UNZIP_DLQ_ARN"] == {"Fn::GetAtt": ["UnzipDeadLetterQueue", "Arn"]}


def test_the_ocr_lane_has_its_own_queue_dlq_budget_and_page_limit(template: dict[str, Any]) -> None:
    from pdfbatch.services.processing import FILE_MARGIN_SECONDS

    # GIVEN the OCR queue: its dead letters go to its own DLQ, which unzip settles like the work DLQ
    redrive = template["Resources"]["OcrQueue"]["Properties"]["RedrivePolicy"]
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": ["OcrDeadLetterQueue", "Arn"]}
    assert redrive["maxReceiveCount"] == {"Ref": "MaxReceiveCount"}
    fn, _ = sqs_mapping(template, "OcrDeadLetterQueue")
    assert fn == "UnzipFunction"
    assert "RedrivePolicy" not in template["Resources"]["OcrDeadLetterQueue"]["Properties"]
    # THEN ocr_pdf backs off on its own queue, reads the budget and page limit from parameters, runs
    # Tesseract on one thread, and its timeout holds the largest budget and one file's margin
    ocr = function(template, "OcrPdfFunction")
    env = ocr["Environment"]["Variables"]
    assert env["PDFBATCH_OCR_QUEUE_URL"] == {"Ref": "OcrQueue"}
    assert env["PDFBATCH_OCR_BUDGET_SECONDS"] == {"Ref": "OcrBudgetSeconds"}
    assert env["PDFBATCH_OCR_MAX_PAGES"] == {"Ref": "OcrMaxPages"}
    assert env["OMP_THREAD_LIMIT"] == "1"
    params = template["Parameters"]
    assert (params["OcrMaxPages"]["Default"], params["OcrConcurrency"]["Default"]) == (5, 2)
    timeout = number(template, ocr["Timeout"])
    assert timeout >= params["OcrBudgetSeconds"]["MaxValue"] + FILE_MARGIN_SECONDS
    visibility = number(template, template["Resources"]["OcrQueue"]["Properties"]["VisibilityTimeout"])
    assert visibility >= 6 * timeout
    # AND process_pdf knows where to hand scans
    process_env = function(template, "ProcessPdfFunction")["Environment"]["Variables"]
    assert process_env["PDFBATCH_OCR_QUEUE_URL"] == {"Ref": "OcrQueue"}


def test_dead_letter_queues_keep_messages_fourteen_days(template: dict[str, Any]) -> None:
    for name in ("DeadLetterQueue", "UnzipDeadLetterQueue", "OcrDeadLetterQueue", "ParkedQueue"):
        assert template["Resources"][name]["Properties"]["MessageRetentionPeriod"] == 1_209_600


def test_process_timeout_covers_a_batch_at_the_default_extraction_budget(template: dict[str, Any]) -> None:
    from pdfbatch.config import Limits
    from pdfbatch.services.processing import FILE_MARGIN_SECONDS

    _, props = sqs_mapping(template, "WorkQueue")
    timeout = number(template, function(template, "ProcessPdfFunction")["Timeout"])
    # every file of a batch at its full budget and ordinary I/O (~2 s), and the last one still admitted
    # by the remaining-time check (its budget and the margin of a hanging dependency left)
    budget, batch = Limits.file_budget_seconds, props["BatchSize"]
    assert timeout >= (batch - 1) * (budget + 2) + budget + FILE_MARGIN_SECONDS


# ------------------------------------------------------------------------------------------ functions


def test_every_function_runs_python_3_13_on_arm64_unless_told_otherwise(template: dict[str, Any]) -> None:
    fns = functions(template)
    assert set(fns) == {
        "UnzipFunction",
        "ProcessPdfFunction",
        "OcrPdfFunction",
        "StatusFunction",
        "DeliverCallbacksFunction",
    }
    arch = template["Parameters"]["Architecture"]
    assert arch["Default"] == "arm64" and set(arch["AllowedValues"]) == {"arm64", "x86_64"}
    for props in fns.values():
        assert props["Runtime"] == "python3.13"
        assert props["Handler"] == "handler.handler"
        assert props["Architectures"] == [{"Ref": "Architecture"}]
    for res in resources(template, "AWS::Lambda::Function").values():
        assert res["Properties"]["Runtime"] == "python3.13"


def test_sam_builds_each_function_from_its_folder_with_the_project_builder(template: dict[str, Any]) -> None:
    # `sam build` runs `make build-<LogicalId>` in the repository root (no Docker, no Layer: LocalStack
    # community ignores layers), which runs tools.build for that function.
    makefile = (ROOT / "Makefile").read_text()
    for name, folder in (
        ("UnzipFunction", "unzip"),
        ("ProcessPdfFunction", "process_pdf"),
        ("OcrPdfFunction", "ocr_pdf"),
        ("StatusFunction", "status"),
        ("DeliverCallbacksFunction", "deliver_callbacks"),
    ):
        assert function(template, name)["CodeUri"] == f"../functions/{folder}"
        assert (TEMPLATE.parent / f"../functions/{folder}/handler.py").resolve().is_file()
        meta = template["Resources"][name]["Metadata"]
        assert meta["BuildMethod"] == "makefile"
        assert (TEMPLATE.parent / meta["ContextPath"] / "Makefile").resolve() == ROOT / "Makefile"
        assert (TEMPLATE.parent / meta["WorkingDirectory"]).resolve() == ROOT
    assert "build-%Function:" in makefile and "tools.build --sam-function $*" in makefile
    assert not {"ArtifactsBucket", "UnzipCodeKey", "StatusCodeKey"} & set(template["Parameters"])


def test_sqs_mapping_never_outruns_the_reserved_concurrency(template: dict[str, Any]) -> None:
    fn, props = sqs_mapping(template, "WorkQueue")
    assert fn == "ProcessPdfFunction"
    assert {q for _, p in events(template, "SQS") for q in [p["Queue"]["Fn::GetAtt"][0]]} == {
        "WorkQueue",
        "UnzipDeadLetterQueue",
        "DeadLetterQueue",
        "CallbackQueue",
        "SlowCallbackQueue",
        "OcrQueue",
        "OcrDeadLetterQueue",
    }
    maximum = number(template, props["ScalingConfig"]["MaximumConcurrency"])
    reserved = number(template, function(template, fn)["ReservedConcurrentExecutions"])
    assert maximum == 5
    assert maximum <= reserved == 5
    # deliver_callbacks: small on purpose (other people's servers, one MySQL connection each), two per
    # lane, so the slow lane's receivers can never take the fast lane's share of the reservation
    lanes = [sqs_mapping(template, q) for q in ("CallbackQueue", "SlowCallbackQueue")]
    assert {fn for fn, _ in lanes} == {"DeliverCallbacksFunction"}
    shares = [number(template, p["ScalingConfig"]["MaximumConcurrency"]) for _, p in lanes]
    reserved = number(
        template, function(template, "DeliverCallbacksFunction")["ReservedConcurrentExecutions"]
    )
    assert shares == [2, 2] and sum(shares) <= reserved == 4
    # the fast lane's ten records are delivered side by side (ten 3 s deadlines at once), the slow one by one
    assert [p["BatchSize"] for _, p in lanes] == [10, 1]
    # AND the OCR lane's mapping is bounded by its own reservation (default 2), one scan per invocation
    fn, props = sqs_mapping(template, "OcrQueue")
    assert fn == "OcrPdfFunction" and props["BatchSize"] == 1
    maximum = number(template, props["ScalingConfig"]["MaximumConcurrency"])
    reserved = number(template, function(template, fn)["ReservedConcurrentExecutions"])
    assert maximum == reserved == 2


def test_sqs_mapping_reports_partial_batch_failures(template: dict[str, Any]) -> None:
    for _, mapping in events(template, "SQS"):
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    _, props = sqs_mapping(template, "WorkQueue")
    assert 1 <= props["BatchSize"] <= 10
    assert 0 <= props["MaximumBatchingWindowInSeconds"] <= 1


def _notified(rules: list[dict[str, str]], key: str) -> bool:
    """S3's key filter: every rule matches (prefix and suffix are case-sensitive, bytes as written)."""
    found = {r["Name"].lower(): r["Value"] for r in rules}
    return key.startswith(found.get("prefix", "")) and key.endswith(found.get("suffix", ""))


@pytest.mark.parametrize(
    "key",
    [
        "uploads/batch.zip",
        "uploads/x.ZIP",
        "uploads/Batch.Zip",
        "uploads/batch",
        "uploads/batch.zip ",
        "uploads/a/b.rar",
    ],
)
def test_unzip_is_triggered_by_every_object_created_under_uploads(template: dict[str, Any], key: str) -> None:
    # Issue 24: uploads/Batch.Zip, uploads/batch and "uploads/batch.zip " made no batch (suffix rules)
    s3_events = list(events(template, "S3"))
    assert s3_events
    for fn, props in s3_events:
        assert fn == "UnzipFunction"
        assert props["Bucket"] == {"Ref": "Bucket"}
        assert props["Events"] == "s3:ObjectCreated:*"
    assert any(_notified(props["Filter"]["S3Key"]["Rules"], key) for _, props in s3_events)
    for other in ("staging/b/0000000.pdf", "pdfs/1/x.pdf", "reports/x.json", "upload/x.zip"):
        assert not any(_notified(props["Filter"]["S3Key"]["Rules"], other) for _, props in s3_events)


def test_status_serves_the_rest_routes_on_a_rest_api(template: dict[str, Any]) -> None:
    routes = {(p["Method"].upper(), p["Path"]) for _, p in events(template, "Api")}
    assert {
        ("POST", "/batches"),
        ("GET", "/batches"),
        ("GET", "/batches/{batchId}"),
        ("GET", "/batches/{batchId}/files"),
    } <= routes
    for _, props in events(template, "Api"):
        assert props["RestApiId"] == {"Ref": "StatusApi"}
    assert not resources(template, "AWS::Serverless::HttpApi")  # LocalStack community has no HTTP API
    assert template["Resources"]["StatusApi"]["Properties"]["StageName"] == "v1"


def test_the_status_function_settles_on_a_schedule_every_minute_by_default(template: dict[str, Any]) -> None:
    ((fn, props),) = events(template, "Schedule")
    assert fn == "StatusFunction"
    assert props["Schedule"] == {"Ref": "SettleSchedule"}
    from pdfbatch.services import settle

    assert template["Parameters"]["SettleSchedule"]["Default"] == settle.DEFAULT_SCHEDULE == "rate(1 minute)"
    assert settle.schedule_seconds(settle.DEFAULT_SCHEDULE) == 60.0  # settled_in_time's period


def test_functions_get_every_variable_they_need(template: dict[str, Any]) -> None:
    for props in functions(template).values():
        env = props["Environment"]["Variables"]
        assert {"PDFBATCH_BUCKET", "PDFBATCH_MYSQL_URL", "PDFBATCH_REDIS_URL"} <= set(env)
    for name in ("UnzipFunction", "ProcessPdfFunction"):  # process_pdf: to back off a failed message
        assert function(template, name)["Environment"]["Variables"]["PDFBATCH_WORK_QUEUE_URL"] == {
            "Ref": "WorkQueue"
        }


def test_every_pdfbatch_variable_set_is_one_config_reads(template: dict[str, Any]) -> None:
    known = set(re.findall(r"PDFBATCH_[A-Z_]+", CONFIG.read_text()))
    for props in functions(template).values():
        names = {n for n in props["Environment"]["Variables"] if n.startswith("PDFBATCH_")}
        assert names <= known, names - known


def test_functions_name_the_bucket_by_string_not_by_ref(template: dict[str, Any]) -> None:
    # A Ref/GetAtt to the bucket from a function or its role closes the cycle
    # bucket notification -> function -> role -> bucket.
    def refs_bucket(node: Any) -> bool:
        if isinstance(node, dict):
            if node.get("Ref") == "Bucket" or (node.get("Fn::GetAtt") or [None])[0] == "Bucket":
                return True
            return any(refs_bucket(v) for v in node.values())
        if isinstance(node, list):
            return any(refs_bucket(v) for v in node)
        return isinstance(node, str) and "${Bucket" in node

    for name, props in functions(template).items():
        without_events = {k: v for k, v in props.items() if k != "Events"}
        assert not refs_bucket(without_events), name
    for name in resources(template, "AWS::IAM::Role"):
        assert not refs_bucket(template["Resources"][name]), name


# ------------------------------------------------------------------------------------------ bucket


def test_default_bucket_name_is_a_valid_s3_name(template: dict[str, Any]) -> None:
    name = template["Resources"]["Bucket"]["Properties"]["BucketName"]
    pattern = name["Fn::If"][2]["Fn::Sub"]
    for region in ("us-east-1", "ap-southeast-3"):
        value = pattern.replace("${AWS::StackName}", "pdfbatch").replace("${AWS::AccountId}", "123456789012")
        value = value.replace("${AWS::Region}", region)
        assert re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", value), value


def test_bucket_is_private_encrypted_and_expires_scratch_prefixes(template: dict[str, Any]) -> None:
    props = template["Resources"]["Bucket"]["Properties"]
    assert all(props["PublicAccessBlockConfiguration"].values())
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    rules = {r["Prefix"]: r for r in props["LifecycleConfiguration"]["Rules"]}
    assert set(rules) == {"staging/", "uploads/", "pdfs/"}
    assert "ExpirationInDays" not in rules["pdfs/"]  # pdfs/ never expires, only its older versions
    assert number(template, rules["staging/"]["ExpirationInDays"]) >= 5  # outlives the 4-day queue retention
    assert number(template, rules["uploads/"]["ExpirationInDays"]) >= 1
    # versions pile up nowhere: every prefix drops its noncurrent ones
    assert all("NoncurrentVersionExpiration" in r for r in rules.values())
    cors = props["CorsConfiguration"]["CorsRules"]
    assert any("POST" in rule["AllowedMethods"] for rule in cors)


def test_bucket_keeps_versions_so_each_upload_is_read_as_notified(template: dict[str, Any]) -> None:
    props = template["Resources"]["Bucket"]["Properties"]
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}


# ------------------------------------------------------------------------------------------ IAM


def test_no_iam_statement_allows_every_resource(template: dict[str, Any]) -> None:
    for name, st in iam_statements(template):
        if st["Effect"] != "Allow":
            continue
        actions = set(as_list(st["Action"]))
        assert "*" not in actions and not any(a.endswith(":*") for a in actions), (name, st)
        if "*" in [arn_text(r) for r in as_list(st["Resource"])]:
            assert actions <= STAR_ONLY_ACTIONS, (name, st)


def test_only_the_vpc_policy_is_attached_and_only_with_a_vpc(template: dict[str, Any]) -> None:
    for name, role in resources(template, "AWS::IAM::Role").items():
        arns = role["Properties"].get("ManagedPolicyArns")
        if arns is None:
            continue
        condition, with_vpc, without_vpc = arns["Fn::If"]
        assert condition == "HasVpc", name
        assert without_vpc == {"Ref": "AWS::NoValue"}, name
        assert [arn_text(a).endswith(VPC_POLICY) for a in with_vpc] == [True], name
    for name, props in functions(template).items():
        assert "Policies" not in props, f"{name}: SAM would add managed policies with '*' resources"


def test_no_function_can_delete_anything_but_staged_copies(template: dict[str, Any]) -> None:
    # Final objects and uploads are never deleted by a function (`pdfbatch gc` and the lifecycle rules
    # do); process_pdf deletes a linked file's staged copy, and nothing else.
    deleters = set()
    for name, st in iam_statements(template):
        if st["Effect"] != "Allow":
            continue
        actions = as_list(st["Action"])
        if any(a.startswith("s3:Delete") or a in ("s3:*", "*") for a in actions):
            assert actions == ["s3:GetObject", "s3:DeleteObject"], (name, st)
            for res in as_list(st["Resource"]):
                assert arn_text(res).endswith("/staging/*"), (name, st)
            deleters.add(name)
    # process_pdf and ocr_pdf: each deletes the staged copy of a file it linked
    assert deleters == {"ProcessPdfRole", "OcrPdfRole"}, deleters


def test_each_function_gets_only_its_own_s3_and_sqs_rights(template: dict[str, Any]) -> None:
    def data_grants(function_id: str) -> set[tuple[str, str]]:
        role = role_of(template, function_id)
        return {
            (a, re.sub(r"^arn:\$\{AWS::Partition\}:s3:::\$\{Name\}", "", r))
            for a, r in grants(template, role)
            if a.startswith(("s3:", "sqs:"))
        }

    assert data_grants("UnzipFunction") == {
        ("s3:GetObject", "/uploads/*"),
        ("s3:GetObjectVersion", "/uploads/*"),
        ("s3:PutObject", "/staging/*"),
        ("s3:ListBucket", ""),
        ("sqs:SendMessage", "GetAtt:WorkQueue.Arn"),
        ("sqs:SendMessage", "GetAtt:UnzipDeadLetterQueue.Arn"),
        ("sqs:SendMessage", "GetAtt:ParkedQueue.Arn"),
        ("s3:PutObject", "/reports/*"),
        *(
            (f"sqs:{a}", f"GetAtt:{queue}.Arn")
            for queue in ("UnzipDeadLetterQueue", "DeadLetterQueue", "OcrDeadLetterQueue")
            for a in (
                "ReceiveMessage",
                "DeleteMessage",
                "DeleteMessageBatch",
                "ChangeMessageVisibility",
                "ChangeMessageVisibilityBatch",
                "GetQueueAttributes",
            )
        ),
    }
    process = data_grants("ProcessPdfFunction")
    assert {(a, r) for a, r in process if a.startswith("s3:")} == {
        ("s3:GetObject", "/staging/*"),
        ("s3:DeleteObject", "/staging/*"),
        ("s3:GetObject", "/pdfs/*"),
        ("s3:PutObject", "/pdfs/*"),
        ("s3:PutObject", "/reports/*"),
        ("s3:ListBucket", ""),
    }
    assert {r for a, r in process if a.startswith("sqs:")} == {"GetAtt:WorkQueue.Arn", "GetAtt:OcrQueue.Arn"}
    assert {a for a, r in process if r == "GetAtt:OcrQueue.Arn"} == {"sqs:SendMessage"}  # the hand-off
    assert {a for a, _ in process} >= {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
    # ocr_pdf: process_pdf's S3 rights (read and drop staged copies, write final keys) and its own queue
    scans = data_grants("OcrPdfFunction")
    s3_rights = {(a, r) for a, r in process if a.startswith("s3:")}
    assert {(a, r) for a, r in scans if a.startswith("s3:")} == s3_rights
    assert {r for a, r in scans if a.startswith("sqs:")} == {"GetAtt:OcrQueue.Arn"}
    assert "sqs:SendMessage" not in {a for a, _ in scans}
    assert data_grants("StatusFunction") == {
        ("s3:PutObject", "/uploads/*"),
        ("s3:PutObject", "/reports/*"),
        ("s3:GetObject", "/reports/*"),
    }


DEFAULT_BUS = "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/default"


def test_only_the_functions_that_finish_batches_may_put_events_and_only_on_the_default_bus(
    template: dict[str, Any],
) -> None:
    # GIVEN every statement of every role WHEN the events:* grants are collected
    granted: dict[str, set[tuple[str, str]]] = {}
    for role, st in iam_statements(template):
        if st["Effect"] != "Allow":
            continue
        for action in as_list(st["Action"]):
            if str(action).startswith("events:"):
                granted.setdefault(role, set()).update((action, arn_text(r)) for r in as_list(st["Resource"]))
    # THEN exactly the three roles of functions that finish batches (unzip: failed ZIPs and the DLQ;
    # process_pdf: the last count; status: an expired or summary-lost batch) may PutEvents, on default only
    # (and ocr_pdf: the last count of a batch whose last file was a scan)
    finishers = {
        role_of(template, f)
        for f in ("UnzipFunction", "ProcessPdfFunction", "OcrPdfFunction", "StatusFunction")
    }
    assert granted == {role: {("events:PutEvents", DEFAULT_BUS)} for role in finishers}


def test_each_function_may_only_write_its_own_log_group(template: dict[str, Any]) -> None:
    for function_id, props in functions(template).items():
        suffix = props["FunctionName"]["Fn::Sub"].removeprefix("${AWS::StackName}")
        logs = {r for a, r in grants(template, role_of(template, function_id)) if a.startswith("logs:")}
        assert logs == {
            "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/aws/lambda/"
            "${AWS::StackName}" + suffix + ":*"
        }


# ------------------------------------------------------------------------------------------ API access


def test_only_the_status_function_gets_the_api_key_secret(template: dict[str, Any]) -> None:
    for name, props in functions(template).items():
        env = props["Environment"]["Variables"]
        assert "PDFBATCH_API_KEY" not in env, name
        assert ("PDFBATCH_API_KEY_SECRET" in env) == (name == "StatusFunction"), name
    assert function(template, "StatusFunction")["Environment"]["Variables"]["PDFBATCH_API_KEY_SECRET"] == {
        "Ref": "ApiKeySecret"
    }
    generated = template["Resources"]["ApiKeySecret"]["Properties"]["GenerateSecretString"]
    assert generated["PasswordLength"] >= 32 and generated["ExcludePunctuation"] is True


def test_browsers_may_upload_with_the_presigned_post_and_send_the_api_key(template: dict[str, Any]) -> None:
    rules = template["Resources"]["Bucket"]["Properties"]["CorsConfiguration"]["CorsRules"]
    origin = [{"Ref": "AllowedOrigin"}]
    assert any("POST" in r["AllowedMethods"] and r["AllowedOrigins"] == origin for r in rules)
    cors = template["Resources"]["StatusApi"]["Properties"]["Cors"]
    assert "x-api-key" in cors["AllowHeaders"].lower()


# ------------------------------------------------------------------------------------------ secrets


def test_nothing_secret_reaches_a_function_environment_or_a_parameter(template: dict[str, Any]) -> None:
    # The URLs say where MySQL and Redis are; who may use them lives in Secrets Manager.
    params = template["Parameters"]
    assert not [name for name, p in params.items() if p.get("NoEcho")]
    mysql = re.compile(params["MysqlUrl"]["AllowedPattern"])
    assert mysql.fullmatch(params["MysqlUrl"]["Default"])
    assert not mysql.fullmatch("mysql://user:pw@db.internal:3306/pdfbatch")
    redis = re.compile(params["RedisUrl"]["AllowedPattern"])
    assert redis.fullmatch(params["RedisUrl"]["Default"])
    assert not redis.fullmatch("rediss://:pw@cache.internal:6379/0")
    for name, props in functions(template).items():
        env = props["Environment"]["Variables"]
        assert env["PDFBATCH_MYSQL_URL"] == {"Ref": "MysqlUrl"}, name
        assert env["PDFBATCH_MYSQL_SECRET"] == {
            "Fn::If": ["CreateDatabaseSecret", {"Ref": "DatabaseSecret"}, {"Ref": "DatabaseSecretArn"}]
        }, name
        assert env["PDFBATCH_REDIS_SECRET"]["Fn::If"][0] == "HasRedisSecret", name
        assert number(template, env["PDFBATCH_SECRETS_MAX_AGE"]) <= 600, (
            name
        )  # a rotation shows within 10 min


def test_the_database_secret_holds_a_generated_password_for_the_named_user(template: dict[str, Any]) -> None:
    secret = template["Resources"]["DatabaseSecret"]
    assert secret["Condition"] == "CreateDatabaseSecret"
    generated = secret["Properties"]["GenerateSecretString"]
    assert generated["GenerateStringKey"] == "password" and generated["PasswordLength"] >= 24
    assert generated["SecretStringTemplate"] == {"Fn::Sub": '{"username": "${DatabaseUser}"}'}


def test_each_role_may_read_exactly_its_secrets(template: dict[str, Any]) -> None:
    database = "{'Fn::If': ['CreateDatabaseSecret', {'Ref': 'DatabaseSecret'}, {'Ref': 'DatabaseSecretArn'}]}"
    redis = "{'Fn::If': ['HasRedisSecret', {'Ref': 'RedisSecretArn'}, {'Ref': 'AWS::NoValue'}]}"
    for function_id in functions(template):
        role = role_of(template, function_id)
        secret_grants = {(a, r) for a, r in grants(template, role) if a.startswith("secretsmanager:")}
        expected = {("secretsmanager:GetSecretValue", database), ("secretsmanager:GetSecretValue", redis)}
        if function_id == "StatusFunction":
            expected.add(("secretsmanager:GetSecretValue", "Ref:ApiKeySecret"))
        if function_id in ("StatusFunction", "ProcessPdfFunction", "OcrPdfFunction"):
            expected.add(("secretsmanager:GetSecretValue", "Ref:NamedUsersSecret"))
        if function_id == "DeliverCallbacksFunction":
            expected.add(("secretsmanager:GetSecretValue", "Ref:CallbackSecret"))
            expected.add(("secretsmanager:GetSecretValue", "Ref:CallbackTenantRoot"))
        assert secret_grants == expected, function_id


def test_only_deliver_callbacks_reads_the_signing_secret_and_only_reports(template: dict[str, Any]) -> None:
    role = role_of(template, "DeliverCallbacksFunction")
    data = {
        (a, re.sub(r"^arn:\$\{AWS::Partition\}:s3:::\$\{Name\}", "", r))
        for a, r in grants(template, role)
        if a.startswith(("s3:", "sqs:", "events:"))
    }
    poll = ("ReceiveMessage", "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility")
    lanes = ("GetAtt:CallbackQueue.Arn", "GetAtt:SlowCallbackQueue.Arn")
    assert data == {
        ("s3:GetObject", "/reports/*"),
        *((f"sqs:{a}", q) for a in poll for q in lanes),
        *(("sqs:ChangeMessageVisibilityBatch", q) for q in lanes),
        *(("sqs:GetQueueAttributes", q) for q in lanes),
        # a delivery timed out on the fast lane is sent on to the slow lane: the one queue it may send to
        ("sqs:SendMessage", "GetAtt:SlowCallbackQueue.Arn"),
    }
    for function_id in functions(template):
        if function_id != "DeliverCallbacksFunction":
            readable = {
                r for a, r in grants(template, role_of(template, function_id)) if a.startswith("secrets")
            }
            assert not readable & {"Ref:CallbackSecret", "Ref:CallbackTenantRoot"}, function_id
    env = function(template, "DeliverCallbacksFunction")["Environment"]["Variables"]
    assert env["PDFBATCH_CALLBACK_SECRET"] == {"Ref": "CallbackSecret"}
    assert env["PDFBATCH_CALLBACK_TENANT_ROOT"] == {"Ref": "CallbackTenantRoot"}
    assert env["PDFBATCH_CALLBACK_QUEUE_URL"] == {"Ref": "CallbackQueue"}
    assert env["PDFBATCH_CALLBACK_SLOW_QUEUE_URL"] == {"Ref": "SlowCallbackQueue"}
    assert env["PDFBATCH_CALLBACK_SLOW_QUEUE_ARN"] == {"Fn::GetAtt": ["SlowCallbackQueue", "Arn"]}
    slow = template["Resources"]["SlowCallbackQueue"]["Properties"]
    assert slow["SqsManagedSseEnabled"] is True
    assert slow["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["CallbackDeadLetterQueue", "Arn"]}
    # every completion event of this stack's batches reaches the queue, and only the rule may send to it
    rule = template["Resources"]["CallbackRule"]["Properties"]
    assert {k: v for k, v in rule["EventPattern"].items() if k != "resources"} == {
        "source": ["pdfbatch"],
        "detail-type": ["Batch Completed", "Batch Failed"],
    }
    assert rule["Targets"] == [{"Id": "callbacks", "Arn": {"Fn::GetAtt": ["CallbackQueue", "Arn"]}}]
    (statement,) = template["Resources"]["CallbackQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert statement["Action"] == "sqs:SendMessage"
    assert statement["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": ["CallbackRule", "Arn"]}}}
    queue = template["Resources"]["CallbackQueue"]["Properties"]
    assert queue["RedrivePolicy"]["maxReceiveCount"] == {"Ref": "CallbackAttempts"}
    assert number(template, queue["VisibilityTimeout"]) >= 6 * number(
        template, function(template, "DeliverCallbacksFunction")["Timeout"]
    )


# ------------------------------------------------------------------------------------------ tracing


def test_functions_and_the_api_are_traced_with_x_ray(template: dict[str, Any]) -> None:
    for name, props in functions(template).items():
        assert props["Tracing"] == "Active", name
        role = role_of(template, name)
        xray = {(a, r) for a, r in grants(template, role) if a.startswith("xray:")}
        assert xray == {("xray:PutTraceSegments", "*"), ("xray:PutTelemetryRecords", "*")}, name
    assert template["Resources"]["StatusApi"]["Properties"]["TracingEnabled"] is True


# ------------------------------------------------------------------------------------------ alarms


def _emf_metric_names() -> set[str]:
    from pdfbatch import metrics

    return {
        *metrics.STAGE_METRICS.values(),
        *metrics.OUTCOME_METRICS.values(),
        *metrics.ZIP_SECONDS.values(),
        *(name for lane in metrics.LANE_METRICS.values() for name in lane.values()),
        metrics.HANDED_TO_OCR,
        metrics.GAVE_UP,
        metrics.ENTRIES_STAGED,
        metrics.ENTRIES_REJECTED,
    }


def _services(template: dict[str, Any]) -> set[str]:
    return {
        props["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] for props in functions(template).values()
    }


def _alarm_metrics(alarm: dict[str, Any]) -> list[dict[str, Any]]:
    props = alarm["Properties"]
    if "Metrics" in props:
        return [m["MetricStat"]["Metric"] for m in props["Metrics"] if "MetricStat" in m]
    return [{k: props[k] for k in ("Namespace", "MetricName", "Dimensions")}]


def test_the_alarms_watch_what_the_issue_asks_for(template: dict[str, Any]) -> None:
    alarms = resources(template, "AWS::CloudWatch::Alarm")
    watched = {
        (m["Namespace"], m["MetricName"], arn_text(m["Dimensions"][0]["Value"]))
        for alarm in alarms.values()
        for m in _alarm_metrics(alarm)
    }
    assert {
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible", "GetAtt:DeadLetterQueue.QueueName"),
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible", "GetAtt:UnzipDeadLetterQueue.QueueName"),
        ("AWS/SQS", "NumberOfMessagesSent", "GetAtt:UnzipDeadLetterQueue.QueueName"),
        ("pdfbatch", "FilesGaveUp", "pdfbatch-process-pdf"),
        ("AWS/Lambda", "Errors", "Ref:UnzipFunction"),
        ("AWS/SQS", "ApproximateAgeOfOldestMessage", "GetAtt:WorkQueue.QueueName"),
        ("AWS/ApiGateway", "5XXError", "${AWS::StackName}-status"),
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible", "GetAtt:CallbackDeadLetterQueue.QueueName"),
    } <= watched
    assert template["Resources"]["StatusApi"]["Properties"]["Name"] == {"Fn::Sub": "${AWS::StackName}-status"}
    age = template["Resources"]["PdfLaneQueueAgeAlarm"]["Properties"]
    assert age["Threshold"] == {"Ref": "QueueAgeAlarmSeconds"}
    for name, alarm in alarms.items():
        props = alarm["Properties"]
        assert props["TreatMissingData"] == "notBreaching", name  # no traffic is not an incident
        assert props["AlarmActions"]["Fn::If"][0] == "HasAlarmTopic", name
        assert props["AlarmDescription"], name


def test_alarms_and_dashboard_use_metric_names_metrics_py_emits(template: dict[str, Any]) -> None:
    emitted, services = _emf_metric_names(), _services(template)
    used = [
        m for alarm in resources(template, "AWS::CloudWatch::Alarm").values() for m in _alarm_metrics(alarm)
    ]
    for m in used:
        if m["Namespace"] == "pdfbatch":
            assert m["MetricName"] in emitted
            assert m["Dimensions"] == [{"Name": "service", "Value": m["Dimensions"][0]["Value"]}]
            assert m["Dimensions"][0]["Value"] in services
    for row in _dashboard(template)[1]:
        if row[0] == "pdfbatch":
            assert row[1] in emitted, row
            assert row[2] == "service" and row[3] in services, row


def _dashboard(template: dict[str, Any]) -> tuple[dict[str, Any], list[list[Any]]]:
    """The dashboard body with every ${...} replaced by a stand-in, and its metric rows."""
    body = template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"][0]
    parsed = json.loads(re.sub(r"\$\{([^}]+)\}", lambda m: m.group(1).replace('"', ""), body))
    rows = [
        [x for x in row if not isinstance(x, dict)]
        for widget in parsed["widgets"]
        if widget["type"] == "metric"
        for row in widget["properties"]["metrics"]
    ]
    return parsed, rows


def test_the_dashboard_shows_queue_age_beside_duration_outcomes_and_dlqs(template: dict[str, Any]) -> None:
    parsed, _ = _dashboard(template)
    widgets = {w["properties"]["title"]: w for w in parsed["widgets"]}
    age, duration = widgets["pdf lane: queue age"], widgets["pdf lane: worker duration"]
    assert age["y"] == duration["y"] and age["x"] + age["width"] <= duration["x"]  # side by side
    age_rows = [r[:2] for r in age["properties"]["metrics"]]
    assert ["AWS/SQS", "ApproximateAgeOfOldestMessage"] in age_rows and ["pdfbatch", "QueueAge"] in age_rows
    assert ["AWS/Lambda", "Duration"] in [r[:2] for r in duration["properties"]["metrics"]]
    outcomes = {r[1] for r in widgets["files per minute by outcome"]["properties"]["metrics"]}
    from pdfbatch import metrics

    assert set(metrics.OUTCOME_METRICS.values()) | {metrics.GAVE_UP} == outcomes
    assert widgets["files per minute by outcome"]["properties"]["period"] == 60
    dlqs = {r[3] for r in widgets["dead-letter queues"]["properties"]["metrics"]}
    assert dlqs == {
        "DeadLetterQueue.QueueName",
        "UnzipDeadLetterQueue.QueueName",
        "OcrDeadLetterQueue.QueueName",
    }
    ocr_age, ocr_duration = widgets["OCR lane: queue age"], widgets["OCR lane: worker duration"]
    assert ocr_age["y"] == ocr_duration["y"]
    assert ["pdfbatch", "OcrQueueAge"] in [r[:2] for r in ocr_age["properties"]["metrics"]]
    assert ["pdfbatch", "OcrFileDuration"] in [r[:2] for r in ocr_duration["properties"]["metrics"]]
    alarm_widget = next(w for w in parsed["widgets"] if w["type"] == "alarm")
    assert len(alarm_widget["properties"]["alarms"]) == len(resources(template, "AWS::CloudWatch::Alarm"))


# ------------------------------------------------------------------------------------------ security scan


def test_every_skipped_security_check_says_why(template: dict[str, Any]) -> None:
    skipped = 0
    for name, res in template["Resources"].items():
        for skip in res.get("Metadata", {}).get("checkov", {}).get("skip", []):
            assert re.fullmatch(r"CKV2?_AWS_\d+", skip["id"]), (name, skip)
            assert len(skip.get("comment", "")) >= 40, (name, skip)
            skipped += 1
    assert skipped
    assert "checkov" in (ROOT / "Makefile").read_text()


def _bucket_arns(template: dict[str, Any], stack: str) -> tuple[str, str]:
    """The callback rule's ``resources`` for a deploy named ``stack`` without and with BucketName set
    (``named``), with the bucket's own name for each: the ARN the rule matches is the stack's bucket."""
    pattern = template["Resources"]["CallbackRule"]["Properties"]["EventPattern"]
    condition, with_name, without_name = pattern["resources"]["Fn::If"]
    bucket = template["Resources"]["Bucket"]["Properties"]["BucketName"]["Fn::If"]
    assert condition == bucket[0] == "HasBucketName"
    values = {"AWS::Partition": "aws", "AWS::StackName": stack, "AWS::AccountId": "123456789012"}
    values |= {"AWS::Region": "us-east-1", "BucketName": "named"}

    def sub(value: Any) -> str:
        text = value["Fn::Sub"] if isinstance(value, dict) and "Fn::Sub" in value else value
        if isinstance(text, dict) and "Ref" in text:
            return values[text["Ref"]]
        return re.sub(r"\$\{([^}]+)\}", lambda m: values[m[1]], text)

    # the rule's ARN names exactly the bucket the stack creates, with a bucket name and without
    assert [sub(a) for (a,) in (with_name, without_name)] == [
        f"arn:aws:s3:::{sub(bucket[1])}",
        f"arn:aws:s3:::{sub(bucket[2])}",
    ]
    return sub(without_name[0]), sub(with_name[0])


def test_the_callback_rule_takes_only_events_naming_the_stacks_own_bucket(template: dict[str, Any]) -> None:
    # GIVEN two stacks in one account and region, one with the default bucket name, one with its own
    # THEN each one's rule matches its own bucket's ARN (the functions' events carry it), never the other's
    ours, _ = _bucket_arns(template, "ours")
    theirs, named = _bucket_arns(template, "theirs")
    assert ours == "arn:aws:s3:::ours-123456789012-us-east-1"
    assert len({ours, theirs, named}) == 3
    # (integration/test_announcement.py holds that LocalStack's EventBridge routes by it)
