"""CloudFormation's AWS::CloudWatch::Dashboard for LocalStack community, which has no provider for it.

Without this, LocalStack marks the template's dashboard CREATE_COMPLETE and creates nothing (it warns
that such resources will fail in later releases). The provider calls the CloudWatch API that LocalStack
does emulate (PutDashboard, DeleteDashboards), so the dashboard the template defines exists on the local
stack and its body can be read back and checked. Registered in pyproject.toml under
`localstack.cloudformation.resource_providers`.
"""

from __future__ import annotations

from typing import Any, TypedDict

from localstack.services.cloudformation.resource_provider import (
    CloudFormationResourceProviderPlugin,
    OperationStatus,
    ProgressEvent,
    ResourceProvider,
    ResourceRequest,
)


class DashboardProperties(TypedDict, total=False):
    DashboardName: str
    DashboardBody: str


# The parts of AWS's resource schema that LocalStack's engine reads.
SCHEMA: dict[str, Any] = {
    "typeName": "AWS::CloudWatch::Dashboard",
    "properties": {"DashboardName": {"type": "string"}, "DashboardBody": {"type": "string"}},
    "required": ["DashboardBody"],
    "createOnlyProperties": ["/properties/DashboardName"],
    "primaryIdentifier": ["/properties/DashboardName"],
    "additionalProperties": False,
}


class DashboardProvider(ResourceProvider[DashboardProperties]):
    """PutDashboard on create and update, DeleteDashboards on delete."""

    TYPE = "AWS::CloudWatch::Dashboard"
    SCHEMA = SCHEMA

    def create(self, request: ResourceRequest[DashboardProperties]) -> ProgressEvent[DashboardProperties]:
        model = request.desired_state
        if not model.get("DashboardName"):
            # AWS names an unnamed dashboard after the stack and the logical id, as here.
            model["DashboardName"] = f"{request.stack_name}-{request.logical_resource_id}"[:255]
        request.aws_client_factory.cloudwatch.put_dashboard(
            DashboardName=model["DashboardName"], DashboardBody=model["DashboardBody"]
        )
        return ProgressEvent(status=OperationStatus.SUCCESS, resource_model=model)

    def read(self, request: ResourceRequest[DashboardProperties]) -> ProgressEvent[DashboardProperties]:
        model = request.desired_state
        got = request.aws_client_factory.cloudwatch.get_dashboard(DashboardName=model["DashboardName"])
        model["DashboardBody"] = got["DashboardBody"]
        return ProgressEvent(status=OperationStatus.SUCCESS, resource_model=model)

    def update(self, request: ResourceRequest[DashboardProperties]) -> ProgressEvent[DashboardProperties]:
        model = request.desired_state
        previous = request.previous_state or {}
        model.setdefault("DashboardName", previous.get("DashboardName", ""))
        if not model["DashboardName"]:
            return self.create(request)
        request.aws_client_factory.cloudwatch.put_dashboard(
            DashboardName=model["DashboardName"], DashboardBody=model["DashboardBody"]
        )
        return ProgressEvent(status=OperationStatus.SUCCESS, resource_model=model)

    def delete(self, request: ResourceRequest[DashboardProperties]) -> ProgressEvent[DashboardProperties]:
        model = request.desired_state
        request.aws_client_factory.cloudwatch.delete_dashboards(DashboardNames=[model["DashboardName"]])
        return ProgressEvent(status=OperationStatus.SUCCESS, resource_model=model)


class DashboardProviderPlugin(CloudFormationResourceProviderPlugin):
    """Found by LocalStack's plugin manager through the entry point (name: the lower-cased type)."""

    name = "AWS::CloudWatch::Dashboard"

    def __init__(self) -> None:
        self.factory: type[ResourceProvider[Any]] | None = None

    def load(self) -> None:
        self.factory = DashboardProvider
