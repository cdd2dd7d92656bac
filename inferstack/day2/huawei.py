"""Huawei Cloud: `inferstack rollout` drives its AS groups (Auto Scaling has no instance refresh: rollout.py); `status`
and `logs` do not ask it yet (UNAVAILABLE). The cloud module's shape is aws.py's.

The AS API is asked through Huawei's own SDK (huaweicloudsdkas, the `day2` extra): ShowScalingGroup, ListScalingGroups
(by name), ListScalingInstances and UpdateScalingGroup (desire_instance_number only), with the access key and project
of the environment. The groups are found by name: the components name them `unique_name([project, stack, <name>,
"fleet"])` (components/huawei/fleet.py `group_name`; a test checks that the two agree).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from inferstack.day2.rollout import GroupState, Member
from inferstack.day2.stack import DEPLOYMENT_NAME, CloudQueryError, DeployedStack
from inferstack.errors import MissingExtraError
from inferstack.names import unique_name
from inferstack.sizing.refresh.common import missing_credentials

UNAVAILABLE: str | None = (
    "status and logs read no Huawei API yet (rollout does: the AS SDK), and the servers ship no logs (they run no "
    "agent: docs/deploy-huawei.md). Meanwhile: the Auto Scaling console (the AS group and its instances) and the "
    "ELB console (each pool's backend health) (docs/day2.md)")
CREDENTIALS = ("HUAWEICLOUD_SDK_AK and HUAWEICLOUD_SDK_SK (the access key) and HUAWEICLOUD_SDK_PROJECT_ID (the project "
               "ID of the stack's region)")
PERMISSIONS = ("as:groups:get", "as:groups:list", "as:instances:list", "as:groups:update")
"""What the identity running `rollout` needs: the actions of the four calls (AS API Reference, Permissions and Supported
Actions: AS Groups, as_05_0202, and Instances, as_07_0204; read 2026-12-07)."""

GROUP_NAMES = {"main": DEPLOYMENT_NAME, "canary": f"{DEPLOYMENT_NAME}-canary"}
"""The component name of each AS group (fleet.py `create_fleet`: `name`, the canary's `<name>-canary`)."""
AS_NAME_MAX_LENGTH = 64
"""fleet.py's AS_NAME_MAX_LENGTH (the AS API's limit on group names; a test checks that the two agree)."""
TERMINATE_OLD_FIRST = "OLD_CONFIG_OLD_INSTANCE"
"""The group's instance_terminate_policy that removes servers of an old AS configuration first."""
SERVING = ("INSERVICE", "NORMAL")
"""An instance's life_cycle_state and health_status when it is in service and passes the ELB audit."""
INSTANCES_PER_PAGE = 100  # ListScalingInstances: limit 0-100 (AS API reference)
_AUTH_STATUS = {401, 403}


def group_name(project: str, stack: str, component: str) -> str:
    """An AS group's name, as fleet.py names it."""
    return unique_name([project, stack, component, "fleet"], max_length=AS_NAME_MAX_LENGTH)


def connect(region: str) -> Any:
    """An AS client on the region, with the access key and project of the environment."""
    try:
        v1 = importlib.import_module("huaweicloudsdkas.v1")
        region_module = importlib.import_module("huaweicloudsdkas.v1.region.as_region")
        credentials = importlib.import_module("huaweicloudsdkcore.auth.credentials")
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] not in ("huaweicloudsdkas", "huaweicloudsdkcore"):
            raise
        raise MissingExtraError("inferstack rollout on Huawei Cloud", "Huawei's Auto Scaling SDK", "huaweicloudsdkas",
                                ["day2"]) from None
    ak, sk = os.environ.get("HUAWEICLOUD_SDK_AK"), os.environ.get("HUAWEICLOUD_SDK_SK")
    project_id = os.environ.get("HUAWEICLOUD_SDK_PROJECT_ID")
    if not ak or not sk or not project_id:
        raise missing_credentials("Huawei Cloud", CREDENTIALS)
    try:
        where = region_module.AsRegion.value_of(region)
    except KeyError:
        raise CloudQueryError(f"huaweicloudsdkas knows no Auto Scaling endpoint for region {region}. Fix: check the "
                              "stack's huaweicloud:region, or upgrade huaweicloudsdkas") from None
    return (v1.AsClient.new_builder().with_credentials(credentials.BasicCredentials(ak, sk, project_id))
            .with_region(where).build())


def scaling_groups(client: Any, stack: DeployedStack) -> dict[str, AsGroup]:
    """The stack's AS groups by role (main, and canary where it has one), found by name."""
    found = {}
    for role, component in GROUP_NAMES.items():
        name = group_name(stack.project, stack.stack, component)
        request = _model("ListScalingGroupsRequest")(scaling_group_name=name)
        with _api_errors("ListScalingGroups"):
            groups = client.list_scaling_groups(request).scaling_groups or []
        exact = [group for group in groups if group.scaling_group_name == name]  # the API also matches by prefix
        if exact:
            found[role] = AsGroup(client, exact[0].scaling_group_id, name)
    if "main" not in found:
        raise stack.nothing_found("AS group", f"deploy the stack (pulumi up) in {stack.region}, or check the region; "
                                  f"its group is named {group_name(stack.project, stack.stack, DEPLOYMENT_NAME)}")
    return found


@dataclass(frozen=True)
class AsGroup:
    """One AS group, as rollout.ScalingGroup."""

    client: Any
    group_id: str
    name: str

    def state(self) -> GroupState:
        with _api_errors("ShowScalingGroup"):
            group = self.client.show_scaling_group(
                _model("ShowScalingGroupRequest")(scaling_group_id=self.group_id)).scaling_group
        return GroupState(name=self.name, desired=group.desire_instance_number, minimum=group.min_instance_number,
                          maximum=group.max_instance_number, configuration=group.scaling_configuration_id,
                          removes_old_first=group.instance_terminate_policy == TERMINATE_OLD_FIRST)

    def members(self) -> list[Member]:
        return [Member(id=instance.instance_id, configuration=instance.scaling_configuration_id or "",
                       serving=(instance.life_cycle_state, instance.health_status) == SERVING)
                for instance in self._instances()]

    def set_desired(self, count: int) -> None:
        body = _model("UpdateScalingGroupOption")(desire_instance_number=count)
        with _api_errors("UpdateScalingGroup"):
            self.client.update_scaling_group(
                _model("UpdateScalingGroupRequest")(scaling_group_id=self.group_id, body=body))

    def _instances(self) -> Iterator[Any]:
        start = 0
        while True:
            request = _model("ListScalingInstancesRequest")(scaling_group_id=self.group_id, start_number=start,
                                                            limit=INSTANCES_PER_PAGE)
            with _api_errors("ListScalingInstances"):
                page = self.client.list_scaling_instances(request)
            instances = page.scaling_group_instances or []
            yield from instances
            start += len(instances)
            if not instances or start >= (page.total_number or 0):
                return


def _model(name: str) -> Any:
    return getattr(importlib.import_module("huaweicloudsdkas.v1"), name)


@contextmanager
def _api_errors(operation: str) -> Iterator[None]:
    """The SDK's errors as one line that says what to do."""
    exceptions = importlib.import_module("huaweicloudsdkcore.exceptions.exceptions")
    try:
        yield
    except exceptions.ClientRequestException as error:
        if error.status_code in _AUTH_STATUS:
            raise missing_credentials("Huawei Cloud", CREDENTIALS,
                                      f"{operation} answered {error.error_code}; the identity needs "
                                      f"{', '.join(PERMISSIONS)}") from None
        raise CloudQueryError(f"Huawei Cloud AS {operation} answered {error.error_code}: {error.error_msg}") from None
    except exceptions.SdkException as error:
        raise CloudQueryError(f"the Huawei Cloud AS API could not be reached ({operation}): {error}. Fix: check the "
                              "network and the region") from None
