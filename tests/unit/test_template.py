"""infra/template.yaml: cfn-lint clean, and the rules the pipeline depends on hold in the template."""

from __future__ import annotations

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


def test_dead_letter_queues_keep_messages_fourteen_days(template: dict[str, Any]) -> None:
    for name in ("DeadLetterQueue", "UnzipDeadLetterQueue", "ParkedQueue"):
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


def test_every_function_runs_python_3_13_on_x86_64(template: dict[str, Any]) -> None:
    fns = functions(template)
    assert set(fns) == {"UnzipFunction", "ProcessPdfFunction", "StatusFunction"}
    for props in fns.values():
        assert props["Runtime"] == "python3.13"
        assert props["Handler"] == "handler.handler"
        assert props["Architectures"] == ["x86_64"]
    for res in resources(template, "AWS::Lambda::Function").values():
        assert res["Properties"]["Runtime"] == "python3.13"


def test_code_comes_from_the_artefact_parameters(template: dict[str, Any]) -> None:
    for name, key in (
        ("UnzipFunction", "UnzipCodeKey"),
        ("ProcessPdfFunction", "ProcessPdfCodeKey"),
        ("StatusFunction", "StatusCodeKey"),
    ):
        assert function(template, name)["CodeUri"] == {
            "Bucket": {"Ref": "ArtifactsBucket"},
            "Key": {"Ref": key},
        }


def test_sqs_mapping_never_outruns_the_reserved_concurrency(template: dict[str, Any]) -> None:
    fn, props = sqs_mapping(template, "WorkQueue")
    assert fn == "ProcessPdfFunction"
    assert {q for _, p in events(template, "SQS") for q in [p["Queue"]["Fn::GetAtt"][0]]} == {
        "WorkQueue",
        "UnzipDeadLetterQueue",
        "DeadLetterQueue",
    }
    maximum = number(template, props["ScalingConfig"]["MaximumConcurrency"])
    reserved = number(template, function(template, fn)["ReservedConcurrentExecutions"])
    assert maximum == 5
    assert maximum <= reserved == 5


def test_sqs_mapping_reports_partial_batch_failures(template: dict[str, Any]) -> None:
    for _, mapping in events(template, "SQS"):
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    _, props = sqs_mapping(template, "WorkQueue")
    assert 1 <= props["BatchSize"] <= 10
    assert 0 <= props["MaximumBatchingWindowInSeconds"] <= 1


def test_unzip_is_triggered_by_zips_created_under_uploads(template: dict[str, Any]) -> None:
    s3_events = list(events(template, "S3"))
    assert s3_events
    suffixes = set()
    for fn, props in s3_events:
        assert fn == "UnzipFunction"
        assert props["Bucket"] == {"Ref": "Bucket"}
        assert props["Events"] == "s3:ObjectCreated:*"
        rules = {r["Name"]: r["Value"] for r in props["Filter"]["S3Key"]["Rules"]}
        assert rules["prefix"] == "uploads/"
        suffixes.add(rules["suffix"])
    assert ".zip" in suffixes
    assert suffixes <= {".zip", ".ZIP"}


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


def test_functions_get_every_variable_they_need(template: dict[str, Any]) -> None:
    for props in functions(template).values():
        env = props["Environment"]["Variables"]
        assert {"PDFBATCH_BUCKET", "PDFBATCH_MYSQL_URL", "PDFBATCH_REDIS_URL"} <= set(env)
    for name in ("UnzipFunction", "ProcessPdfFunction"):  # process_pdf: to back off a failed message
        assert function(template, name)["Environment"]["Variables"]["PDFBATCH_QUEUE_URL"] == {
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
    assert set(rules) == {"staging/", "uploads/"}  # pdfs/ never expires
    assert number(template, rules["staging/"]["ExpirationInDays"]) >= 5  # outlives the 4-day queue retention
    assert number(template, rules["uploads/"]["ExpirationInDays"]) >= 1
    cors = props["CorsConfiguration"]["CorsRules"]
    assert any("POST" in rule["AllowedMethods"] for rule in cors)


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


def test_no_function_can_delete_outside_pdfs(template: dict[str, Any]) -> None:
    for name, st in iam_statements(template):
        if st["Effect"] != "Allow":
            continue
        actions = as_list(st["Action"])
        if any(a in ("s3:DeleteObject", "s3:DeleteObjectVersion", "s3:Delete*") for a in actions):
            for res in as_list(st["Resource"]):
                assert arn_text(res).endswith("/pdfs/*"), (name, st)


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
        ("s3:PutObject", "/staging/*"),
        ("s3:ListBucket", ""),
        ("sqs:SendMessage", "GetAtt:WorkQueue.Arn"),
        ("sqs:SendMessage", "GetAtt:UnzipDeadLetterQueue.Arn"),
        ("sqs:SendMessage", "GetAtt:ParkedQueue.Arn"),
        *(
            (f"sqs:{a}", f"GetAtt:{queue}.Arn")
            for queue in ("UnzipDeadLetterQueue", "DeadLetterQueue")
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
        ("s3:GetObject", "/pdfs/*"),
        ("s3:PutObject", "/pdfs/*"),
        ("s3:DeleteObject", "/pdfs/*"),
        ("s3:ListBucket", ""),
    }
    assert {r for a, r in process if a.startswith("sqs:")} == {"GetAtt:WorkQueue.Arn"}
    assert {a for a, _ in process} >= {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
    assert data_grants("StatusFunction") == {("s3:PutObject", "/uploads/*")}


def test_each_function_may_only_write_its_own_log_group(template: dict[str, Any]) -> None:
    for function_id, props in functions(template).items():
        suffix = props["FunctionName"]["Fn::Sub"].removeprefix("${AWS::StackName}")
        logs = {r for a, r in grants(template, role_of(template, function_id)) if a.startswith("logs:")}
        assert logs == {
            "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/aws/lambda/"
            "${AWS::StackName}" + suffix + ":*"
        }


# ------------------------------------------------------------------------------------------ API access


def test_only_the_status_function_gets_the_api_key_and_it_is_never_echoed(template: dict[str, Any]) -> None:
    param = template["Parameters"]["ApiKey"]
    assert param["NoEcho"] is True and "Default" not in param and int(param["MinLength"]) >= 16
    for name, props in functions(template).items():
        assert ("PDFBATCH_API_KEY" in props["Environment"]["Variables"]) == (name == "StatusFunction"), name
    assert "ApiKey" not in repr(template.get("Outputs"))


def test_browsers_may_upload_with_the_presigned_post_and_send_the_api_key(template: dict[str, Any]) -> None:
    rules = template["Resources"]["Bucket"]["Properties"]["CorsConfiguration"]["CorsRules"]
    origin = [{"Ref": "AllowedOrigin"}]
    assert any("POST" in r["AllowedMethods"] and r["AllowedOrigins"] == origin for r in rules)
    cors = template["Resources"]["StatusApi"]["Properties"]["Cors"]
    assert "x-api-key" in cors["AllowHeaders"].lower()
