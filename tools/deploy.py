"""Build the function zips, upload them, and create or update the CloudFormation stack.

    python -m tools.deploy [--stack-name pdfbatch] [--param Key=Value ...]

Deploys to LocalStack when AWS_ENDPOINT_URL is set, to AWS otherwise (`sam build && sam deploy` is the
documented AWS path; this one is the fast local one). It deploys infra/template.yaml as `sam package`
would: each function's local CodeUri becomes the S3 location of the zip tools.build made from it.
The operator's PDFBATCH_MYSQL_URL is split: where the database is goes to the template (MysqlUrl), who
may use it goes to the stack's database secret, as the API key goes to its secret. Uses
create_stack/update_stack with short polling rather than `aws cloudformation deploy`, whose waiters add
~30 s to every LocalStack deploy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pdfbatch.api_client import local_api_key, remember_api_url
from pdfbatch.config import DEFAULT_MYSQL_URL, DEFAULT_REDIS_URL, split_mysql_credentials
from pdfbatch.errors import ConfigError
from tools.build import (
    DEFAULT_ARCH,
    Artefact,
    BuildError,
    build,
    host_architecture,
    project_root,
)

TEMPLATE = Path("infra") / "template.yaml"
CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"]
# `CodeUri: ../functions/<fn>` in the template, as `sam build` reads it.
_CODE_URI = re.compile(r"^(\s+CodeUri:\s*)\.\./functions/([a-z_]+)/?\s*$", re.M)
_STACK_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9-]{0,127}$")
_BUCKETLESS_STACK_NAME = re.compile(r"^[a-z][a-z0-9-]{0,34}$")  # + "-{12-digit account}-{region}" <= 63
_DONE_OK = {"CREATE_COMPLETE", "UPDATE_COMPLETE"}
# A stack whose creation failed cannot be updated into shape (LocalStack stops at CREATE_FAILED).
_RECREATE = {"CREATE_FAILED", "ROLLBACK_COMPLETE", "ROLLBACK_FAILED", "DELETE_FAILED"}
_REQUIRED_OUTPUTS = (
    "ApiId",
    "BucketName",
    "QueueUrl",
    "ProcessPdfFunctionName",
    "ApiKeySecretArn",
    "DatabaseSecretArn",
)
_MAX_TEMPLATE_BODY = 51_200
# LocalStack updates a stack even when nothing changed (AWS answers "No updates are to be performed")
# and ignores new Tags on update, so a local deploy passes a digest of the template and parameters as
# the template's DeployDigest parameter and skips a deploy whose digest the stack already has.
DIGEST_PARAM = "DeployDigest"
# The template's OcrConcurrency default (ocr_pdf's reserved concurrency; --param OcrConcurrency=N).
OCR_CONCURRENCY = 2

Log = Callable[[str], None]
# The operator's settings the functions read too: environment variable -> template parameter.
PASSED_THROUGH = {
    "PDFBATCH_USERS_TABLE": "UsersTable",
    "PDFBATCH_USERS_ID_COLUMN": "UsersIdColumn",
    "PDFBATCH_USERS_EMAIL_COLUMN": "UsersEmailColumn",
    "PDFBATCH_USERS_PDF_URL_COLUMN": "UsersPdfUrlColumn",
    "PDFBATCH_MATCH_POLICY": "MatchPolicy",
    # Signed callbacks: the allow-list and http are for local stacks (tests); the retries' pace.
    "PDFBATCH_CALLBACK_ALLOW": "CallbackAllow",
    "PDFBATCH_CALLBACK_ALLOW_HTTP": "CallbackAllowHttp",
    "PDFBATCH_CALLBACK_PORTS": "CallbackPorts",
    "PDFBATCH_CALLBACK_ATTEMPTS": "CallbackAttempts",
    "PDFBATCH_CALLBACK_RETRY_BASE_SECONDS": "CallbackRetryBaseSeconds",
    "PDFBATCH_CALLBACK_RETRY_MAX_SECONDS": "CallbackRetryMaxSeconds",
}
# Reserved concurrency the template sets on functions besides process_pdf (applied again on LocalStack).
RESERVED = {"DeliverCallbacksFunctionName": 4}  # two per callback lane


class DeployError(Exception):
    """The stack did not reach a good state; the message says why."""


@dataclass(frozen=True)
class DeployParams:
    """What the operator chooses; everything else in the template keeps its default."""

    mysql_url: str = DEFAULT_MYSQL_URL
    redis_url: str = DEFAULT_REDIS_URL
    process_concurrency: int = 5
    max_receive_count: int = 5
    log_level: str = "INFO"
    bucket_name: str = ""  # empty: {stack}-{account}-{region}
    # The REST API's shared secret (PDFBATCH_API_KEY), put in the stack's ApiKeySecret. Empty: on
    # LocalStack the stack's stored key (one is made on the first deploy); on AWS the generated one.
    api_key: str = field(default="", repr=False)
    # Lambda architecture on AWS; a local deploy runs the functions on this machine, so uses its own.
    architecture: str = DEFAULT_ARCH
    extra: Mapping[str, str] = field(default_factory=dict)  # any other template parameter

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> DeployParams:
        """Read the database URLs, the users table, the match policy (and the log level) from the
        operator's environment: the functions get the table `stack up` checked."""
        e = os.environ if env is None else env
        values: dict[str, Any] = {
            "mysql_url": e.get("PDFBATCH_MYSQL_URL") or DEFAULT_MYSQL_URL,
            "redis_url": e.get("PDFBATCH_REDIS_URL") or DEFAULT_REDIS_URL,
            "log_level": e.get("PDFBATCH_LOG_LEVEL") or "INFO",
            "api_key": e.get("PDFBATCH_API_KEY") or "",
            "extra": {param: e[var] for var, param in PASSED_THROUGH.items() if e.get(var)},
        }
        values["extra"].update(overrides.pop("extra", {}))
        values.update(overrides)
        return cls(**values)

    def template_parameters(self) -> dict[str, str]:
        """These choices as CloudFormation parameter values: where things are, never who may use them."""
        if urlparse(self.redis_url).password or urlparse(self.redis_url).username:
            raise DeployError(
                "PDFBATCH_REDIS_URL holds credentials: put the whole URL in a Secrets Manager secret and "
                "deploy with --param RedisSecretArn=<its ARN> and a RedisUrl without them"
            )
        try:
            address, _ = split_mysql_credentials(self.mysql_url)
        except ConfigError as exc:
            raise DeployError(str(exc)) from exc
        params = {
            "MysqlUrl": address,
            "RedisUrl": self.redis_url,
            "Architecture": self.architecture,
            "ProcessConcurrency": str(self.process_concurrency),
            "MaxReceiveCount": str(self.max_receive_count),
            "LogLevel": self.log_level,
            "BucketName": self.bucket_name,
        }
        params.update(self.extra)
        return params

    def database_credentials(self) -> dict[str, str] | None:
        """{"username", "password"} for the database secret, when PDFBATCH_MYSQL_URL names a user."""
        if not urlparse(self.mysql_url).username:
            return None
        return split_mysql_credentials(self.mysql_url)[1]


def _clients(endpoint_url: str | None, region: str) -> Callable[[str], Any]:
    import boto3
    from botocore.config import Config

    kwargs: dict[str, Any] = {"region_name": region}
    if endpoint_url:
        kwargs["endpoint_url"] = endpoint_url
        if not os.environ.get("AWS_ACCESS_KEY_ID") and not os.environ.get("AWS_PROFILE"):
            kwargs["aws_access_key_id"] = "test"  # LocalStack accepts any credentials
            kwargs["aws_secret_access_key"] = "test"  # noqa: S105
    config = Config(retries={"max_attempts": 5, "mode": "standard"}, s3={"addressing_style": "path"})

    def client(service: str) -> Any:
        return boto3.client(service, config=config, **kwargs)  # type: ignore[call-overload]

    return client


def _region(region: str | None) -> str:
    return region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def ensure_bucket(s3: Any, bucket: str, region: str) -> None:
    """Create the artefacts bucket unless it exists (private, encrypted by S3 default)."""
    from botocore.exceptions import ClientError

    try:
        s3.head_bucket(Bucket=bucket)
        return
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code not in ("404", "NoSuchBucket", "NotFound"):
            raise DeployError(f"artefacts bucket {bucket} exists but is not usable ({code})") from exc
    kwargs: dict[str, Any] = {"Bucket": bucket}
    if region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
    s3.create_bucket(**kwargs)
    s3.put_public_access_block(
        Bucket=bucket,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        },
    )


def upload_artefacts(
    s3: Any, bucket: str, stack_name: str, artefacts: Mapping[str, Artefact]
) -> dict[str, str]:
    """Upload each zip under a key holding its sha256 (skipped when already there); return the keys."""
    from botocore.exceptions import ClientError

    keys: dict[str, str] = {}
    for fn, artefact in artefacts.items():
        key = f"{stack_name}/{fn}-{artefact.sha256}.zip"
        try:
            s3.head_object(Bucket=bucket, Key=key)
        except ClientError:
            s3.upload_file(str(artefact.path), bucket, key)
        keys[fn] = key
    return keys


def _stack(cfn: Any, stack_name: str) -> dict[str, Any] | None:
    from botocore.exceptions import ClientError

    try:
        stacks = cfn.describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as exc:
        if "does not exist" in str(exc):
            return None
        raise
    return stacks[0] if stacks else None


def _wait(cfn: Any, stack_name: str, poll: float, timeout: float) -> dict[str, Any]:
    """Poll until the stack leaves every *_IN_PROGRESS status; return it."""
    deadline = time.monotonic() + timeout
    while True:
        stack = _stack(cfn, stack_name)
        if stack is None:
            raise DeployError(f"stack {stack_name} disappeared")
        if not stack["StackStatus"].endswith("_IN_PROGRESS"):
            return stack
        if time.monotonic() > deadline:
            raise DeployError(f"stack {stack_name} still {stack['StackStatus']} after {timeout:.0f} s")
        time.sleep(poll)


def _delete(cfn: Any, stack_name: str, poll: float, timeout: float, attempts: int = 3) -> None:
    """Delete the stack and wait until it is gone.

    LocalStack marks a half-created stack DELETE_FAILED (it cannot delete resources that never got
    created) and finishes the deletion in the background: asking again after a pause completes it.
    """
    status = "?"
    for attempt in range(attempts):
        cfn.delete_stack(StackName=stack_name)
        try:
            status = _wait(cfn, stack_name, poll, timeout)["StackStatus"]
        except DeployError:
            return  # gone
        if status == "DELETE_COMPLETE":
            return
        time.sleep(1.0 * (attempt + 1))
    raise DeployError(f"could not delete stack {stack_name}: {status}")


def failure_events(cfn: Any, stack_name: str, since: datetime) -> list[str]:
    """The failed resource events of the last operation, oldest first, one line each."""
    lines: list[str] = []
    paginator = cfn.get_paginator("describe_stack_events")
    for page in paginator.paginate(StackName=stack_name):
        for ev in page["StackEvents"]:
            ts = ev.get("Timestamp")
            if isinstance(ts, datetime) and ts.tzinfo is not None and ts < since:
                return list(reversed(lines))
            reason = ev.get("ResourceStatusReason")
            if str(ev.get("ResourceStatus", "")).endswith("FAILED") and reason:
                line = (
                    f"{ev.get('LogicalResourceId')} ({ev.get('ResourceType')}): {ev.get('ResourceStatus')}: "
                    f"{reason}"
                )
                if line not in lines:
                    lines.append(line)
    return list(reversed(lines))


def apply_stack(
    cfn: Any,
    stack_name: str,
    template_body: str,
    parameters: Mapping[str, str],
    *,
    poll: float = 0.5,
    timeout: float = 1800.0,
    log: Log = print,
    skip_unchanged: bool = False,
    template_url: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """create_stack or update_stack and wait; return ("created"|"updated"|"unchanged", stack).

    With ``skip_unchanged`` a stack already deployed with the digest of this template and these
    parameters is left alone (for LocalStack, which never answers "No updates are to be performed").
    ``template_url`` (where ``template_body`` was uploaded) is sent instead of a body over 51,200 bytes.
    """
    from botocore.exceptions import ClientError

    digest = None
    if skip_unchanged:
        digest = hashlib.sha256(json.dumps([template_body, sorted(parameters.items())]).encode()).hexdigest()
        parameters = {**parameters, DIGEST_PARAM: digest}
    source = {"TemplateURL": template_url} if template_url else {"TemplateBody": template_body}
    args: dict[str, Any] = {
        "StackName": stack_name,
        **source,
        "Parameters": [{"ParameterKey": k, "ParameterValue": v} for k, v in sorted(parameters.items())],
        "Capabilities": CAPABILITIES,
    }
    stack = _stack(cfn, stack_name)
    if stack is not None and stack["StackStatus"].endswith("_IN_PROGRESS"):
        log(f"stack {stack_name} is {stack['StackStatus']}; waiting for it first")
        stack = _wait(cfn, stack_name, poll, timeout)
    if stack is not None and stack["StackStatus"] in _RECREATE:
        # A stack whose creation failed can only be deleted (the bucket is retained).
        log(f"stack {stack_name} is {stack['StackStatus']}: deleting it before creating it again")
        _delete(cfn, stack_name, poll, timeout)
        stack = None

    if stack is not None and digest is not None and stack["StackStatus"] in _DONE_OK:
        deployed = {p["ParameterKey"]: p.get("ParameterValue") for p in stack.get("Parameters", [])}
        if deployed.get(DIGEST_PARAM) == digest:
            return "unchanged", stack

    since = datetime.now(UTC) - timedelta(seconds=5)
    if stack is None or stack["StackStatus"] == "DELETE_COMPLETE":
        try:
            cfn.create_stack(**args)
        except ClientError as exc:
            raise DeployError(f"create_stack rejected: {exc}") from exc
        action = "created"
    else:
        try:
            cfn.update_stack(**args)
        except ClientError as exc:
            if "No updates are to be performed" in str(exc):
                return "unchanged", stack
            raise DeployError(f"update_stack rejected: {exc}") from exc
        action = "updated"
    stack = _wait(cfn, stack_name, poll, timeout)
    if stack["StackStatus"] not in _DONE_OK:
        events = failure_events(cfn, stack_name, since)
        for line in events:
            log(f"  FAILED {line}")
        reason = stack.get("StackStatusReason") or (events[0] if events else "")
        raise DeployError(f"stack {stack_name} ended {stack['StackStatus']}: {reason}")
    return action, stack


def ensure_reserved_concurrency(lam: Any, function_name: str, value: int) -> None:
    """PutFunctionConcurrency, then read it back (LocalStack's CloudFormation ignores the property)."""
    lam.put_function_concurrency(FunctionName=function_name, ReservedConcurrentExecutions=value)
    got = lam.get_function_concurrency(FunctionName=function_name).get("ReservedConcurrentExecutions")
    if got != value:
        raise DeployError(f"{function_name}: reserved concurrency is {got}, expected {value}")


def apply_reserved_concurrency(
    lam: Any, outputs: Mapping[str, str], process_concurrency: int, *, ocr_concurrency: int = OCR_CONCURRENCY
) -> None:
    """process_pdf's and ocr_pdf's reserved concurrency and the template's others (RESERVED), on every
    deployed one."""
    reserved = {
        **RESERVED,
        "ProcessPdfFunctionName": process_concurrency,
        "OcrPdfFunctionName": ocr_concurrency,
    }
    for output, value in reserved.items():
        if output in outputs:
            ensure_reserved_concurrency(lam, outputs[output], value)


def deploy(
    params: DeployParams | None = None,
    endpoint_url: str | None = None,
    stack_name: str = "pdfbatch",
    *,
    region: str | None = None,
    root: Path | None = None,
    artefacts: Mapping[str, Artefact] | None = None,
    artifacts_bucket: str | None = None,
    poll: float = 0.5,
    timeout: float = 1800.0,
    log: Log = print,
) -> dict[str, str]:
    """Build (unless ``artefacts`` are given), upload and deploy; return the stack's outputs."""
    params = params or DeployParams.from_env()
    root = (root or project_root()).resolve()
    region = _region(region)
    if not _STACK_NAME.fullmatch(stack_name):
        raise DeployError(f"invalid stack name {stack_name!r}")
    if not params.bucket_name and not _BUCKETLESS_STACK_NAME.fullmatch(stack_name):
        raise DeployError(
            f"stack name {stack_name!r} cannot name the bucket (lowercase, at most 35 characters): "
            "set DeployParams.bucket_name"
        )
    template_text = (root / TEMPLATE).read_text()
    local = endpoint_url is not None
    if local:
        # The functions run as processes of this machine: its architecture, whatever AWS would use.
        params = replace(params, architecture=host_architecture())
    parameters = params.template_parameters()  # fails on credentials in a URL before any work

    t0 = time.monotonic()
    if artefacts is None:
        try:
            artefacts = build(root, architecture=params.architecture)
        except BuildError as exc:
            raise DeployError(f"build failed: {exc}") from exc
    t_build = time.monotonic()
    client = _clients(endpoint_url, region)
    s3, cfn = client("s3"), client("cloudformation")
    if artifacts_bucket is None:
        account = client("sts").get_caller_identity()["Account"]
        artifacts_bucket = f"{stack_name.lower()}-artifacts-{account}-{region}"[:63].rstrip("-.")
    ensure_bucket(s3, artifacts_bucket, region)
    keys = upload_artefacts(s3, artifacts_bucket, stack_name, artefacts)
    template_body = package_template(template_text, artifacts_bucket, keys)
    template_url = None
    if len(template_body.encode()) > _MAX_TEMPLATE_BODY:
        template_url = upload_template(s3, artifacts_bucket, stack_name, template_body, endpoint_url, region)
    t_upload = time.monotonic()

    if endpoint_url:
        parameters.setdefault("PublicEndpointUrl", endpoint_url)
    action, stack = apply_stack(
        cfn,
        stack_name,
        template_body,
        parameters,
        poll=poll,
        timeout=timeout,
        log=log,
        skip_unchanged=local,
        template_url=template_url,
    )
    t_stack = time.monotonic()

    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    missing = [k for k in _REQUIRED_OUTPUTS if k not in outputs]
    if missing:
        raise DeployError(f"stack {stack_name} is {stack['StackStatus']} but lacks the outputs {missing}")
    # Who may use the database, and the API key, go to the stack's secrets (never a parameter).
    api_key = params.api_key or None
    if local:
        # Kept in a git-ignored file so every later deploy (and every ApiClient) uses the same key.
        api_key = local_api_key(root, stack_name, api_key, endpoint=endpoint_url)
    credentials = params.database_credentials()
    if local and credentials is None:
        credentials = split_mysql_credentials(params.mysql_url)[1]
    values = {outputs["ApiKeySecretArn"]: api_key}
    if not params.extra.get("DatabaseSecretArn"):  # an operator's own secret (e.g. RDS's) is never written
        values[outputs["DatabaseSecretArn"]] = _json_or_none(credentials)
    changed = sync_secrets(client("secretsmanager"), values)
    if endpoint_url:
        # CloudFormation on LocalStack ignores ReservedConcurrentExecutions.
        ocr_concurrency = int(params.template_parameters().get("OcrConcurrency") or OCR_CONCURRENCY)
        apply_reserved_concurrency(
            client("lambda"), outputs, params.process_concurrency, ocr_concurrency=ocr_concurrency
        )
        outputs["LocalApiUrl"] = f"{endpoint_url.rstrip('/')}/_aws/execute-api/{outputs['ApiId']}/v1/"
        remember_api_url(root, stack_name, outputs["LocalApiUrl"], endpoint=endpoint_url)
    outputs["ArtifactsBucket"] = artifacts_bucket
    log(
        f"stack {stack_name} {action} ({stack['StackStatus']}): build {t_build - t0:.1f} s, "
        f"upload {t_upload - t_build:.1f} s, stack {t_stack - t_upload:.1f} s, "
        f"secrets {'updated' if changed else 'unchanged'}, total {time.monotonic() - t0:.1f} s"
    )
    return outputs


def package_template(template: str, bucket: str, keys: Mapping[str, str]) -> str:
    """The template with each function's local CodeUri replaced by its uploaded zip, as `sam package` does."""
    seen: list[str] = []

    def code_uri(match: re.Match[str]) -> str:
        fn = match.group(2)
        if fn not in keys:
            raise DeployError(f"{TEMPLATE} has CodeUri ../functions/{fn}, which was not built")
        seen.append(fn)
        return f"{match.group(1)}s3://{bucket}/{keys[fn]}"

    packaged = _CODE_URI.sub(code_uri, template)
    if sorted(seen) != sorted(keys):
        raise DeployError(f"{TEMPLATE} should have one CodeUri per built function; found {sorted(seen)}")
    return packaged


def upload_template(
    s3: Any, bucket: str, stack_name: str, body: str, endpoint_url: str | None, region: str
) -> str:
    """Upload a template over CloudFormation's inline limit; return the URL to deploy it from."""
    key = f"{stack_name}/template-{hashlib.sha256(body.encode()).hexdigest()}.yaml"
    s3.put_object(Bucket=bucket, Key=key, Body=body.encode())
    if endpoint_url:
        return f"{endpoint_url.rstrip('/')}/{bucket}/{key}"
    return f"https://{bucket}.s3.{region}.amazonaws.com/{key}"


def _json_or_none(value: Mapping[str, str] | None) -> str | None:
    return json.dumps(dict(value), sort_keys=True) if value is not None else None


def sync_secrets(sm: Any, values: Mapping[str, str | None]) -> bool:
    """Put each given value in its secret unless it already holds it; return whether any changed.

    A None value leaves the secret as it is (the generated key, the credentials an operator put there).
    """
    changed = False
    for arn, value in values.items():
        if value is None:
            continue
        current = sm.get_secret_value(SecretId=arn).get("SecretString")
        if _same_secret(current, value):
            continue
        sm.put_secret_value(SecretId=arn, SecretString=value)
        changed = True
    return changed


def _same_secret(current: str | None, wanted: str) -> bool:
    if current == wanted:
        return True
    try:
        return bool(json.loads(current or "null") == json.loads(wanted))
    except ValueError:
        return False


def _parse_params(pairs: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--param wants Key=Value, got {pair!r}")
        out[key] = value
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: build and deploy to AWS_ENDPOINT_URL (LocalStack) when set, else to AWS."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stack-name", default=os.environ.get("PDFBATCH_STACK_NAME", "pdfbatch"))
    parser.add_argument("--region", default=None)
    parser.add_argument(
        "--bucket-name", default="", help="bucket name override (default: stack-account-region)"
    )
    parser.add_argument("--concurrency", type=int, default=5, help="process_pdf concurrency (default 5)")
    parser.add_argument("--param", action="append", default=[], help="any template parameter, Key=Value")
    args = parser.parse_args(argv)
    endpoint = os.environ.get("AWS_ENDPOINT_URL") or None
    params = DeployParams.from_env(
        bucket_name=args.bucket_name, process_concurrency=args.concurrency, extra=_parse_params(args.param)
    )
    where = f"LocalStack at {endpoint}" if endpoint else "AWS"
    print(f"deploying stack {args.stack_name} to {where}", file=sys.stderr)
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        outputs = deploy(
            params, endpoint, args.stack_name, region=args.region, log=lambda m: print(m, file=sys.stderr)
        )
    except (DeployError, BotoCoreError, ClientError) as exc:
        print(f"deploy failed: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(outputs, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
