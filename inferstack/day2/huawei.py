"""Huawei Cloud: `inferstack status` reads a fleet's AS groups and its dedicated load balancer, and `inferstack rollout`
drives the groups (Auto Scaling has no instance refresh: rollout.py); `logs` has nothing to read (LOGS_UNAVAILABLE).
The cloud module's shape is aws.py's.

The AS and ELB APIs are asked through Huawei's own SDKs (huaweicloudsdkas and huaweicloudsdkelb, the `day2` extra):
ShowScalingGroup, ListScalingGroups (by name), ListScalingInstances, UpdateScalingGroup (desire_instance_number only,
rollout), and ELB v3 ListMembers (each of a group's pools), ShowPool, ShowLoadBalancer and ListL7Policies (status:
the load balancer and the canary's weight), with the access key and project of the environment. The groups are found
by name: the components name them `unique_name([project, stack, <name>, "fleet"])` (components/huawei/fleet.py
`group_name`; a test checks that the two agree).
"""

from __future__ import annotations

import datetime
import importlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from inferstack.day2.records import GroupStatus, LoadBalancerStatus, Server, TargetGroupHealth
from inferstack.day2.rollout import GroupState, Member
from inferstack.day2.stack import DEPLOYMENT_NAME, CloudQueryError, DeployedStack
from inferstack.errors import MissingExtraError
from inferstack.names import unique_name
from inferstack.sizing.refresh.common import missing_credentials

UNAVAILABLE: str | None = None
LOGS_UNAVAILABLE = ("the servers ship no logs: they run no agent (docs/deploy-huawei.md). Meanwhile: each server's "
                    "journal over the console's remote login (ECS console, Remote Login)")
LOOSE_SERVERS_UNREAD = ("status reads a Huawei fleet (its AS groups and load balancer); a stack of loose servers "
                        "needs the ECS API, which no extra installs. Meanwhile: the ECS console")
CREDENTIALS = ("HUAWEICLOUD_SDK_AK and HUAWEICLOUD_SDK_SK (the access key) and HUAWEICLOUD_SDK_PROJECT_ID (the project "
               "ID of the stack's region)")
PERMISSIONS = ("as:groups:get", "as:groups:list", "as:instances:list", "as:groups:update", "elb:members:list",
               "elb:pools:get", "elb:loadbalancers:get", "elb:l7policies:list")
"""What the identity running `status` and `rollout` needs: the actions of their calls (AS API Reference, Permissions
and Supported Actions: AS Groups, as_05_0202, and Instances, as_07_0204; ELB API Reference, V3 actions: Backend
servers, elb_sq_lb_v3_0004, and the pools', load balancers' and forwarding policies' pages beside it; read
2026-12-07). `status` needs no update action."""

GROUP_NAMES = {"main": DEPLOYMENT_NAME, "canary": f"{DEPLOYMENT_NAME}-canary"}
"""The component name of each AS group (fleet.py `create_fleet`: `name`, the canary's `<name>-canary`)."""
AS_NAME_MAX_LENGTH = 64
"""fleet.py's AS_NAME_MAX_LENGTH (the AS API's limit on group names; a test checks that the two agree)."""
TERMINATE_OLD_FIRST = "OLD_CONFIG_OLD_INSTANCE"
"""The group's instance_terminate_policy that removes servers of an old AS configuration first."""
IN_SERVICE = "INSERVICE"
"""An instance's life_cycle_state in the group once it is added and attached to the group's pools."""
ONLINE = "ONLINE"
"""A pool member's operating_status when the ELB's health check passes (ELB API v3, Member)."""
INSTANCES_PER_PAGE = 100  # ListScalingInstances: limit 0-100 (AS API reference)
MEMBERS_PER_PAGE = 100
_AUTH_STATUS = {401, 403}
THROTTLED = 429
ATTEMPTS = 4
RETRY_PAUSE_S = 2.0
"""A throttled, failed (5xx) or lost call is tried again after 2, 4 and 8 s."""


def group_name(project: str, stack: str, component: str) -> str:
    """An AS group's name, as fleet.py names it."""
    return unique_name([project, stack, component, "fleet"], max_length=AS_NAME_MAX_LENGTH)


@dataclass(frozen=True)
class Clients:
    """The AS and ELB (v3, dedicated load balancers) clients of the stack's region."""

    autoscaling: Any
    elb: Any


def connect(region: str) -> Clients:
    """AS and ELB clients on the region, with the access key and project of the environment."""
    try:
        as_v1 = importlib.import_module("huaweicloudsdkas.v1")
        as_region = importlib.import_module("huaweicloudsdkas.v1.region.as_region")
        elb_v3 = importlib.import_module("huaweicloudsdkelb.v3")
        elb_region = importlib.import_module("huaweicloudsdkelb.v3.region.elb_region")
        credentials = importlib.import_module("huaweicloudsdkcore.auth.credentials")
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] not in ("huaweicloudsdkas", "huaweicloudsdkelb", "huaweicloudsdkcore"):
            raise
        raise MissingExtraError("inferstack rollout on Huawei Cloud", "Huawei's Auto Scaling and ELB SDKs",
                                error.name or "huaweicloudsdkas", ["day2"]) from None
    ak, sk = os.environ.get("HUAWEICLOUD_SDK_AK"), os.environ.get("HUAWEICLOUD_SDK_SK")
    project_id = os.environ.get("HUAWEICLOUD_SDK_PROJECT_ID")
    if not ak or not sk or not project_id:
        raise missing_credentials("Huawei Cloud", CREDENTIALS)
    try:
        as_where, elb_where = as_region.AsRegion.value_of(region), elb_region.ElbRegion.value_of(region)
    except KeyError:
        raise CloudQueryError(f"huaweicloudsdkas or huaweicloudsdkelb knows no endpoint for region {region}. Fix: "
                              "check the stack's huaweicloud:region, or upgrade the SDKs") from None
    signed = credentials.BasicCredentials(ak, sk, project_id)
    return Clients(as_v1.AsClient.new_builder().with_credentials(signed).with_region(as_where).build(),
                   elb_v3.ElbClient.new_builder().with_credentials(signed).with_region(elb_where).build())


def scaling_groups(clients: Clients, stack: DeployedStack) -> dict[str, AsGroup]:
    """The stack's AS groups by role (main, and canary where it has one), found by name."""
    found = {}
    for role, component in GROUP_NAMES.items():
        name = group_name(stack.project, stack.stack, component)
        request = _as_model("ListScalingGroupsRequest")(scaling_group_name=name)
        groups = _call("ListScalingGroups", clients.autoscaling.list_scaling_groups, request).scaling_groups or []
        exact = [group for group in groups if group.scaling_group_name == name]  # the API also matches by prefix
        if exact:
            found[role] = AsGroup(clients, exact[0].scaling_group_id, name)
    if "main" not in found:
        raise stack.nothing_found("AS group", f"deploy the stack (pulumi up) in {stack.region}, or check the region; "
                                  f"its group is named {group_name(stack.project, stack.stack, DEPLOYMENT_NAME)}")
    return found


#### Status ####


def observe(clients: Clients, stack: DeployedStack) -> tuple[list[GroupStatus], LoadBalancerStatus | None]:
    """The fleet's groups (main, canary) with their servers, and its load balancer with each group's pool health."""
    if stack.plan.fleet is None:
        raise CloudQueryError(f"inferstack status cannot ask Huawei Cloud about stack {stack.stack} yet: "
                              f"{LOOSE_SERVERS_UNREAD}")
    groups = scaling_groups(clients, stack)
    statuses, pools = [], {}
    for role, group in groups.items():
        status, group_pools = group.status(role)
        statuses.append(status)
        pools[role] = group_pools
    return statuses, _load_balancer(clients, groups, pools)


def _load_balancer(clients: Clients, groups: dict[str, AsGroup], pools: dict[str, list[str]]
                   ) -> LoadBalancerStatus | None:
    main_pools = pools.get("main") or []
    if not main_pools:
        return None
    pool = _call("ShowPool", clients.elb.show_pool, _elb_model("ShowPoolRequest")(pool_id=main_pools[0])).pool
    if not pool.loadbalancers:
        return None
    balancer = _call("ShowLoadBalancer", clients.elb.show_load_balancer,
                     _elb_model("ShowLoadBalancerRequest")(loadbalancer_id=pool.loadbalancers[0].id)).loadbalancer
    targets = [TargetGroupHealth(role=role, name=pool_id, states=groups[role].member_states(pool_id))
               for role, role_pools in pools.items() for pool_id in role_pools]
    address = next((eip.eip_address for eip in balancer.eips or [] if eip.eip_address), balancer.vip_address)
    canary_pools = pools.get("canary") or []
    return LoadBalancerStatus(name=balancer.name, state=(balancer.provisioning_status or "").lower(),
                              address=address, targets=targets,
                              canary_weight_percent=_canary_weight(clients, canary_pools) if canary_pools else None)


def _canary_weight(clients: Clients, canary_pools: list[str]) -> int | None:
    """The canary pool's share of the weighted forwarding policy (fleet.py `weighted_policy`), in percent."""
    policies = _listed("ListL7Policies", clients.elb.list_l7_policies, "l7policies", lambda marker: _elb_model(
        "ListL7PoliciesRequest")(action=["REDIRECT_TO_POOL"], limit=MEMBERS_PER_PAGE, marker=marker))
    for policy in policies:
        weights = {config.pool_id: config.weight for config in policy.redirect_pools_config or []}
        if any(pool in weights for pool in canary_pools):
            total = sum(weights.values())
            return round(100 * sum(weights.get(pool, 0) for pool in canary_pools) / total) if total else 0
    return None


def _listed(operation: str, method: Callable[[Any], Any], field: str,
            request_of: Callable[[str | None], Any]) -> Iterator[Any]:
    """Every item of a marker-paged ELB v3 list (`field` of each page), asking for the next page only when the
    caller reads past the last one."""
    marker = None
    while True:
        page = _call(operation, method, request_of(marker))
        items = getattr(page, field) or []
        yield from items
        marker = page.page_info.next_marker if page.page_info else None
        if not items or not marker:
            return


#### Rollout ####


@dataclass(frozen=True)
class AsGroup:
    """One AS group, as rollout.ScalingGroup: a server serves when AS has it in service and the ELB's health check
    finds it ONLINE in every pool the group puts it in (AS's own health status may read NORMAL before the runtime
    answers: it audits only after the grace period)."""

    clients: Clients
    group_id: str
    name: str

    def state(self) -> GroupState:
        group = self._group()
        return GroupState(name=self.name, desired=group.desire_instance_number, minimum=group.min_instance_number,
                          maximum=group.max_instance_number, configuration=group.scaling_configuration_id,
                          removes_old_first=group.instance_terminate_policy == TERMINATE_OLD_FIRST)

    def members(self) -> list[Member]:
        _, instances = self._health(self._group())
        return [Member(id=instance.instance_id, configuration=instance.scaling_configuration_id or "",
                       serving=instance.life_cycle_state == IN_SERVICE and bool(healthy))
                for instance, healthy in instances]

    def status(self, role: str) -> tuple[GroupStatus, list[str]]:
        """The group as `status` shows it, and its pools."""
        group = self._group()
        pools, instances = self._health(group)
        servers = [Server(id=instance.instance_id, state=instance.life_cycle_state,
                          launched_at=_utc(instance.create_time),
                          in_service=instance.life_cycle_state == IN_SERVICE,
                          # A pay-per-use server is billed while it exists; AS stops none of its servers.
                          billed=True, healthy=healthy, revision=instance.scaling_configuration_id or None)
                   for instance, healthy in instances]
        return GroupStatus(role=role, name=self.name, desired=group.desire_instance_number,
                           min_size=group.min_instance_number, max_size=group.max_instance_number,
                           template=None, revision=group.scaling_configuration_id, servers=servers), pools

    def member_states(self, pool_id: str) -> dict[str, int]:
        """The pool's members by health state (ONLINE, OFFLINE, INITIAL, NO_MONITOR, UNKNOWN), as the ELB reports."""
        states: dict[str, int] = {}
        for member in self._members(pool_id):
            state = "healthy" if _online(member) else str(member.operating_status or "UNKNOWN").lower()
            states[state] = states.get(state, 0) + 1
        return states

    def set_desired(self, count: int) -> None:
        body = _as_model("UpdateScalingGroupOption")(desire_instance_number=count)
        _call("UpdateScalingGroup", self.clients.autoscaling.update_scaling_group,  # idempotent: sets a count
              _as_model("UpdateScalingGroupRequest")(scaling_group_id=self.group_id, body=body))

    def _group(self) -> Any:
        return _call("ShowScalingGroup", self.clients.autoscaling.show_scaling_group,
                     _as_model("ShowScalingGroupRequest")(scaling_group_id=self.group_id)).scaling_group

    def _instances(self) -> Iterator[Any]:
        start = 0
        while True:
            request = _as_model("ListScalingInstancesRequest")(scaling_group_id=self.group_id, start_number=start,
                                                               limit=INSTANCES_PER_PAGE)
            page = _call("ListScalingInstances", self.clients.autoscaling.list_scaling_instances, request)
            instances = page.scaling_group_instances or []
            yield from instances
            start += len(instances)
            if not instances or start >= (page.total_number or 0):
                return

    def _health(self, group: Any) -> tuple[list[str], list[tuple[Any, bool | None]]]:
        """The group's pools, and each of its instances with whether the ELB finds it ONLINE in every one of them
        (None: the group is in no pool)."""
        pools = [listener.pool_id for listener in group.lbaas_listeners or []]
        online = [{member.instance_id for member in self._members(pool) if _online(member)} for pool in pools]
        return pools, [(instance, all(instance.instance_id in ids for ids in online) if pools else None)
                       for instance in self._instances()]

    def _members(self, pool_id: str) -> Iterator[Any]:
        return _listed("ListMembers", self.clients.elb.list_members, "members", lambda marker: _elb_model(
            "ListMembersRequest")(pool_id=pool_id, limit=MEMBERS_PER_PAGE, marker=marker))


def _utc(moment: Any) -> datetime.datetime:
    """The SDK's create_time (a datetime, or its ISO text) in UTC."""
    parsed: datetime.datetime = (datetime.datetime.fromisoformat(moment.replace("Z", "+00:00"))
                                 if isinstance(moment, str) else moment)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.timezone.utc)


def _online(member: Any) -> bool:
    """ONLINE by the pool's health check, and by every listener's where the ELB reports them per listener."""
    return member.operating_status == ONLINE and all(
        status.operating_status == ONLINE for status in (member.status or []))


def _as_model(name: str) -> Any:
    return getattr(importlib.import_module("huaweicloudsdkas.v1"), name)


def _elb_model(name: str) -> Any:
    return getattr(importlib.import_module("huaweicloudsdkelb.v3"), name)


def _call(operation: str, method: Callable[[Any], Any], request: Any) -> Any:
    """One API call, tried again after a throttled (429), failed (5xx) or lost (network) attempt, ATTEMPTS times with
    a doubling pause; any other error, or the last one, as one line that says what to do."""
    for attempt in range(ATTEMPTS - 1):
        try:
            with _api_errors(operation):
                return method(request)
        except _Transient:
            time.sleep(RETRY_PAUSE_S * 2**attempt)
    try:
        with _api_errors(operation):
            return method(request)
    except _Transient as error:
        raise CloudQueryError(f"{error} (after {ATTEMPTS} tries)") from None


class _Transient(CloudQueryError):
    """A failure worth trying again: throttled, the service failing, or the network."""


@contextmanager
def _api_errors(operation: str) -> Iterator[None]:
    """The SDK's errors as one line that says what to do."""
    exceptions = importlib.import_module("huaweicloudsdkcore.exceptions.exceptions")
    try:
        yield
    except exceptions.ClientRequestException as error:
        if error.status_code == THROTTLED:
            raise _Transient(f"Huawei Cloud {operation} was throttled ({error.error_code}): {error.error_msg}. "
                             "Fix: rerun later") from None
        if error.status_code in _AUTH_STATUS:
            raise missing_credentials("Huawei Cloud", CREDENTIALS,
                                      f"{operation} answered {error.error_code}; the identity needs "
                                      f"{', '.join(PERMISSIONS)}") from None
        raise CloudQueryError(f"Huawei Cloud {operation} answered {error.error_code}: {error.error_msg}") from None
    except exceptions.ServerResponseException as error:
        raise _Transient(f"Huawei Cloud {operation} failed on the service's side ({error.status_code} "
                         f"{error.error_code}: {error.error_msg}). Fix: rerun later") from None
    except exceptions.ConnectionException as error:
        raise _Transient(f"the Huawei Cloud API could not be reached ({operation}): {error}. Fix: check the "
                         "network and the region") from None
    except exceptions.SdkException as error:
        raise CloudQueryError(f"the Huawei Cloud SDK failed ({operation}): {error}") from None
