"""AWS, through boto3: the deployment's Auto Scaling groups (or its loose EC2 servers), what its Application Load
Balancer says of their health and how its HTTPS listener weighs the canary, and the CloudWatch Logs group its servers'
agent writes to.

Everything is found by the tags every resource carries (stack.py) and the Name tag the components give each
(components/aws: fleet.py's `<name>-group` and `<name>-canary-group`, servers.py's `<name>-server-<n>`), with
read-only calls, each listed in PERMISSIONS.
"""

from __future__ import annotations

import datetime
import heapq
import importlib
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from inferstack.day2.records import GroupRole, GroupStatus, LoadBalancerStatus, LogLine, Server, TargetGroupHealth
from inferstack.day2.stack import DEPLOYMENT_NAME, CloudQueryError, DeployedStack
from inferstack.errors import MissingExtraError
from inferstack.sizing.refresh.common import missing_credentials

UNAVAILABLE: str | None = None
"""Every cloud module says here why `status` and `logs` cannot ask its cloud yet; None: they can."""
CREDENTIALS = ("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary keys), or AWS_PROFILE "
               "naming a profile in ~/.aws")
PERMISSIONS = ("autoscaling:DescribeAutoScalingGroups", "ec2:DescribeInstances", "ec2:DescribeInstanceStatus",
               "elasticloadbalancing:DescribeTargetGroups", "elasticloadbalancing:DescribeTargetHealth",
               "elasticloadbalancing:DescribeLoadBalancers", "elasticloadbalancing:DescribeListeners",
               "tag:GetResources", "logs:FilterLogEvents")
"""What the identity running `status` and `logs` needs: read-only (docs/day2.md)."""

GROUP_ROLES: Mapping[str, GroupRole] = {f"{DEPLOYMENT_NAME}-group": "main", f"{DEPLOYMENT_NAME}-canary-group": "canary"}
"""The Name tag of each Auto Scaling group (fleet.py `_group`: `<name>-group`, the canary's `<name>-canary-group`)."""
LOOSE_SERVER_NAME = re.compile(rf"{DEPLOYMENT_NAME}-server-[0-9]+")
"""The Name tag of a loose server (servers.py `create_servers`: `<name>-server-<index>`)."""
# EC2 bills an instance's time in the running state only (EC2 User Guide, "Amazon EC2 instance state changes", Billing
# by instance state: pending, stopping, stopped, shutting-down and terminated are not billed; read 2026-12-07).
BILLED_STATE = "running"
LOOSE_SERVER_STATES = ("pending", "running", "stopping", "stopped", "shutting-down")
# describe_instances takes at most 1000 instance ids at once (EC2 API Reference, DescribeInstances, read 2026-12-07).
INSTANCE_IDS_PER_CALL = 1000
MAX_PROBLEMS_SHOWN = 5
_AUTH_ERROR_CODES = {"UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException",
                     "InvalidClientTokenId", "AuthFailure", "ExpiredToken", "SignatureDoesNotMatch"}
_DENIED_ERROR_CODES = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"}


@dataclass(frozen=True)
class Clients:
    """boto3 clients of the stack's region."""

    autoscaling: Any
    ec2: Any
    elbv2: Any
    logs: Any
    tagging: Any


def connect(region: str) -> Clients:
    """Clients on the region, with the credentials boto3 finds (environment, profile, instance role)."""
    try:
        boto3 = importlib.import_module("boto3")
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] not in ("boto3", "botocore"):
            raise
        raise MissingExtraError("inferstack status and logs on AWS", "the AWS SDK", "boto3", ["day2"]) from None
    session = boto3.session.Session()  # no credentials: the first call says so (_api_errors)
    return Clients(*(session.client(service, region_name=region)
                     for service in ("autoscaling", "ec2", "elbv2", "logs", "resourcegroupstaggingapi")))


#### Status ####


def observe(clients: Clients, stack: DeployedStack) -> tuple[list[GroupStatus], LoadBalancerStatus | None]:
    """The stack's groups (its fleet's, or its loose servers as one) and its load balancer's view of them."""
    with _api_errors():
        groups = _fleet_groups(clients, stack)
        if groups:
            return ([_group_status(clients, role, group) for role, group in groups],
                    _load_balancer(clients, groups))
        servers = _loose_servers(clients, stack)
    if not servers:
        raise stack.nothing_found("Auto Scaling group or EC2 server", "check that your credentials reach the "
                                  "stack's account and region (AWS_PROFILE, aws:region), or deploy it: pulumi up")
    return [GroupStatus(role="servers", name=f"{DEPLOYMENT_NAME}-server-<n>", desired=stack.plan.instance_count,
                        servers=servers)], None


def _tag_filters(stack: DeployedStack) -> list[dict[str, Any]]:
    return [{"Name": f"tag:{key}", "Values": [value]} for key, value in stack.tags.items()]


def _fleet_groups(clients: Clients, stack: DeployedStack) -> list[tuple[GroupRole, dict[str, Any]]]:
    """The stack's Auto Scaling groups by role, the main group first."""
    pages = clients.autoscaling.get_paginator("describe_auto_scaling_groups").paginate(Filters=_tag_filters(stack))
    found = [(GROUP_ROLES[name], group) for page in pages for group in page["AutoScalingGroups"]
             if (name := _tags(group.get("Tags", [])).get("Name", "")) in GROUP_ROLES]
    return sorted(found, key=lambda role_group: role_group[0] != "main")


def _group_status(clients: Clients, role: GroupRole, group: dict[str, Any]) -> GroupStatus:
    """One group: its size, what it launches from, and each member as Auto Scaling and EC2 see it."""
    policy = group.get("MixedInstancesPolicy", {}).get("LaunchTemplate", {})
    template = group.get("LaunchTemplate") or policy.get("LaunchTemplateSpecification") or {}
    members = group.get("Instances", [])
    machines = _instances(clients, [member["InstanceId"] for member in members])
    servers = [Server(id=member["InstanceId"], state=machine["State"]["Name"], launched_at=machine["LaunchTime"],
                      in_service=member["LifecycleState"] == "InService",
                      billed=machine["State"]["Name"] == BILLED_STATE, healthy=member["HealthStatus"] == "Healthy",
                      revision=member.get("LaunchTemplate", {}).get("Version"),
                      zone=member.get("AvailabilityZone"))
               for member in members if (machine := machines.get(member["InstanceId"])) is not None]
    return GroupStatus(role=role, name=group["AutoScalingGroupName"], desired=group["DesiredCapacity"],
                       min_size=group["MinSize"], max_size=group["MaxSize"],
                       template=template.get("LaunchTemplateName") or template.get("LaunchTemplateId"),
                       revision=template.get("Version"), servers=servers)


def _instances(clients: Clients, ids: list[str]) -> dict[str, dict[str, Any]]:
    """EC2's record of each instance (state, launch time); an instance already gone is left out."""
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(ids), INSTANCE_IDS_PER_CALL):
        chunk = ids[start:start + INSTANCE_IDS_PER_CALL]
        for page in clients.ec2.get_paginator("describe_instances").paginate(InstanceIds=chunk):
            found.update({i["InstanceId"]: i for reservation in page["Reservations"] for i in reservation["Instances"]})
    return found


def _loose_servers(clients: Clients, stack: DeployedStack) -> list[Server]:
    """The servers of a plan without a fleet; healthy: EC2's instance and system status checks both pass."""
    filters = [*_tag_filters(stack), {"Name": "instance-state-name", "Values": list(LOOSE_SERVER_STATES)}]
    pages = clients.ec2.get_paginator("describe_instances").paginate(Filters=filters)
    machines = [i for page in pages for reservation in page["Reservations"] for i in reservation["Instances"]
                if LOOSE_SERVER_NAME.fullmatch(_tags(i.get("Tags", [])).get("Name", ""))]
    checks = _status_checks(clients, [machine["InstanceId"] for machine in machines])
    return [Server(id=m["InstanceId"], state=m["State"]["Name"], launched_at=m["LaunchTime"],
                   in_service=m["State"]["Name"] == "running", billed=m["State"]["Name"] == BILLED_STATE,
                   healthy=checks.get(m["InstanceId"]), revision=None,
                   zone=m.get("Placement", {}).get("AvailabilityZone"))
            for m in sorted(machines, key=lambda machine: _tags(machine.get("Tags", [])).get("Name", ""))]


def _status_checks(clients: Clients, ids: list[str]) -> dict[str, bool | None]:
    """True when both status checks pass, False when one fails; None while they run or the machine is stopped."""
    if not ids:
        return {}
    pages = clients.ec2.get_paginator("describe_instance_status").paginate(InstanceIds=ids, IncludeAllInstances=True)
    verdicts: dict[str, bool | None] = {}
    for page in pages:
        for status in page["InstanceStatuses"]:
            checks = {status.get("InstanceStatus", {}).get("Status"), status.get("SystemStatus", {}).get("Status")}
            verdicts[status["InstanceId"]] = True if checks == {"ok"} else False if "impaired" in checks else None
    return verdicts


def _load_balancer(clients: Clients, groups: list[tuple[GroupRole, dict[str, Any]]]) -> LoadBalancerStatus | None:
    """The load balancer in front of the groups' target groups: its state, each group's target health, and the
    canary's share of its forward."""
    roles = {arn: role for role, group in groups for arn in group.get("TargetGroupARNs", [])}
    if not roles:
        return None
    target_groups = clients.elbv2.describe_target_groups(TargetGroupArns=list(roles))["TargetGroups"]
    balancers = sorted({arn for target_group in target_groups for arn in target_group.get("LoadBalancerArns", [])})
    if not balancers:
        return None
    (balancer,) = clients.elbv2.describe_load_balancers(LoadBalancerArns=balancers[:1])["LoadBalancers"]
    targets = [_target_health(clients, roles[tg["TargetGroupArn"]], tg) for tg in target_groups]
    has_canary = "canary" in roles.values()
    return LoadBalancerStatus(
        name=balancer["LoadBalancerName"], state=balancer.get("State", {}).get("Code", "unknown"),
        address=balancer.get("DNSName"), targets=sorted(targets, key=lambda health: health.role != "main"),
        canary_weight_percent=_canary_weight(clients, balancer["LoadBalancerArn"], roles) if has_canary else None)


def _target_health(clients: Clients, role: GroupRole, target_group: dict[str, Any]) -> TargetGroupHealth:
    described = clients.elbv2.describe_target_health(TargetGroupArn=target_group["TargetGroupArn"])
    states: Counter[str] = Counter()
    problems: list[str] = []
    for target in described["TargetHealthDescriptions"]:
        health = target["TargetHealth"]
        states[health["State"]] += 1
        if health["State"] != "healthy" and len(problems) < MAX_PROBLEMS_SHOWN:
            reason = ": ".join(part for part in (health.get("Reason"), health.get("Description")) if part)
            problems.append(f"{target['Target']['Id']}: {health['State']}" + (f" ({reason})" if reason else ""))
    return TargetGroupHealth(role=role, name=target_group["TargetGroupName"], states=dict(states), problems=problems)


def _canary_weight(clients: Clients, balancer_arn: str, roles: Mapping[str, GroupRole]) -> int | None:
    """The canary's percent of the listener's weighted forward (load_balancer.py `forward`); 0 when the listener
    forwards to the main group alone, None when no listener forwards to the groups."""
    for page in clients.elbv2.get_paginator("describe_listeners").paginate(LoadBalancerArn=balancer_arn):
        for listener in page["Listeners"]:
            for action in listener.get("DefaultActions", []):
                if action.get("Type") != "forward":
                    continue
                weights: dict[str, int] = {tg["TargetGroupArn"]: tg.get("Weight", 1)
                           for tg in action.get("ForwardConfig", {}).get("TargetGroups", [])}
                weights = weights or {action.get("TargetGroupArn", ""): 1}
                total: int = sum(weight for arn, weight in weights.items() if arn in roles)
                if total:
                    canary: int = sum(weight for arn, weight in weights.items() if roles.get(arn) == "canary")
                    return round(100 * canary / total)
    return None


#### Logs ####


def log_group(clients: Clients, stack: DeployedStack) -> str:
    """The CloudWatch Logs group of the stack's servers (observability.py `create_telemetry`), found by its tags.

    The Resource Groups Tagging API filters by service ("service[:resourceType]", botocore's GetResources model):
    the whole of `logs`, then the log groups by their ARN, arn:aws:logs:<region>:<account>:log-group:<name>."""
    tag_filters = [{"Key": key, "Values": [value]} for key, value in stack.tags.items()]
    with _api_errors():
        pages = clients.tagging.get_paginator("get_resources").paginate(TagFilters=tag_filters,
                                                                       ResourceTypeFilters=["logs"])
        arns = [mapping["ResourceARN"] for page in pages for mapping in page["ResourceTagMappingList"]]
    names: list[str] = sorted(arn.split(":log-group:", 1)[1].removesuffix(":*") for arn in arns
                              if ":log-group:" in arn)
    if not names:
        raise stack.nothing_found("CloudWatch Logs group", "check the account and region your credentials reach "
                                  "(AWS_PROFILE, aws:region), or deploy the stack: pulumi up")
    return next((name for name in names if name.endswith(f"/{DEPLOYMENT_NAME}")), names[0])


def log_lines(clients: Clients, group: str, start: datetime.datetime, end: datetime.datetime,
              keep: int) -> list[LogLine]:
    """The newest `keep` events of `group` from `start` up to (not including) `end`, oldest first. The tagging API
    also lists resources deleted a short while ago: a group gone since says so (`_api_errors`)."""
    paginator = clients.logs.get_paginator("filter_log_events")
    # startTime and endTime are milliseconds since the epoch, both included (FilterLogEvents, CloudWatch Logs API
    # Reference: "Events with a timestamp before this time are not returned", "later than this time are not returned").
    pages = paginator.paginate(logGroupName=group, startTime=_milliseconds(start), endTime=_milliseconds(end) - 1)
    with _api_errors():
        events = heapq.nlargest(keep, (event for page in pages for event in page["events"]),
                                key=lambda event: (event["timestamp"], event.get("eventId", "")))
    return [LogLine(timestamp=datetime.datetime.fromtimestamp(event["timestamp"] / 1000, tz=datetime.timezone.utc),
                    source=event.get("logStreamName", ""), message=event["message"].rstrip("\n"))
            for event in reversed(events)]


#### Helpers ####


def _tags(tags: list[dict[str, str]]) -> dict[str, str]:
    return {tag["Key"]: tag["Value"] for tag in tags}


def _milliseconds(moment: datetime.datetime) -> int:
    return int(moment.timestamp() * 1000)


@contextmanager
def _api_errors() -> Iterator[None]:
    """botocore's errors as one line that says what to do."""
    exceptions = importlib.import_module("botocore.exceptions")
    try:
        yield
    except exceptions.NoCredentialsError:
        raise missing_credentials("AWS", CREDENTIALS) from None
    except exceptions.ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        operation = error.operation_name
        if code in _AUTH_ERROR_CODES:
            raise missing_credentials("AWS", CREDENTIALS, f"{operation} answered {code}") from None
        if code == "ResourceNotFoundException":
            said = error.response["Error"].get("Message", code).rstrip(".")
            raise CloudQueryError(f"AWS {operation}: {said}: the stack's resource is gone (destroyed?). Fix: deploy "
                                  "the stack (pulumi up), or check the region") from None
        if code in _DENIED_ERROR_CODES:
            raise CloudQueryError(f"AWS refused {operation} ({code}). Fix: grant the identity the read-only "
                                  f"permissions status and logs need: {', '.join(PERMISSIONS)}") from None
        raise CloudQueryError(f"AWS {operation} failed: {error}") from None
    except exceptions.BotoCoreError as error:
        raise CloudQueryError(f"the AWS API could not be reached: {error}. Fix: check the network and the "
                              "region") from None
