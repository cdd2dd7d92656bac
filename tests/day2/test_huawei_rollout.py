"""`inferstack rollout` on Huawei Cloud: the real SDKs (huaweicloudsdkas, huaweicloudsdkelb) against a stand-in AS
and ELB API on loopback.

The stand-in answers the five calls the rollout makes the way the API references describe them (AS ListScalingGroups,
ShowScalingGroup, ListScalingInstances, UpdateScalingGroup; ELB v3 ListMembers), on the paths the SDKs themselves
build, and simulates the group: a raised expected count adds servers of the group's current configuration, which AS
reports in service and NORMAL at once (its audit waits for the grace period) while the ELB's health check finds them
ONLINE only a few reads later; a lowered count removes servers of an old configuration first (the group's
OLD_CONFIG_OLD_INSTANCE policy), oldest first. The SDKs sign their requests; the stand-in checks that they are signed
for the stack's project.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

import pytest

import inferstack.day2 as day2
from inferstack.cli import main
from inferstack.day2.huawei import GROUP_NAMES, group_name
from inferstack.day2.rollout import GroupState, Member, RolloutError, roll
from inferstack.pin import pinned_path, read_pin

ROOT = Path(__file__).resolve().parents[2]
STACK = ROOT / "stacks" / "Pulumi.huawei-prod.yaml"
PROJECT_ID = "0123456789abcdef0123456789abcdef"
REGION = "ap-southeast-3"  # the stack's huaweicloud:region


@dataclass
class Server:
    id: str
    configuration: str
    born: int
    ready_at: int
    removing_at: int | None = None


@dataclass
class AsGroupSim:
    """One AS group: its counts, its configuration and its servers, advancing one step per instance listing."""

    name: str
    group_id: str
    configuration: str
    desired: int
    minimum: int
    maximum: int
    policy: str = "OLD_CONFIG_OLD_INSTANCE"
    boot_reads: int = 3
    servers: list[Server] = field(default_factory=list)
    reads: int = 0
    serving_low: int = 10**6
    most: int = 0
    updates: list[int] = field(default_factory=list)
    never_ready: bool = False
    pools: tuple[str, ...] = ("pool-a", "pool-b")

    def start(self, count: int, configuration: str) -> None:
        for _ in range(count):
            self.servers.append(Server(f"{self.group_id}-i{len(self.servers) + self.reads:04d}", configuration,
                                       born=self.reads, ready_at=self.reads))

    def serving(self) -> list[Server]:
        return [s for s in self.servers if s.ready_at <= self.reads and s.removing_at is None]

    def step(self) -> None:
        """One read of the instances: servers boot, removed ones go, and the group converges on its count."""
        self.reads += 1
        self.servers = [s for s in self.servers if s.removing_at is None or s.removing_at > self.reads]
        alive = [s for s in self.servers if s.removing_at is None]
        if len(alive) < self.desired:
            for _ in range(self.desired - len(alive)):
                ready = 10**9 if self.never_ready else self.reads + self.boot_reads
                self.servers.append(Server(f"{self.group_id}-n{self.reads:03d}{len(self.servers):02d}",
                                           self.configuration, born=self.reads, ready_at=ready))
        elif len(alive) > self.desired:
            old_first = sorted(alive, key=lambda s: (s.configuration == self.configuration
                                                     if self.policy == "OLD_CONFIG_OLD_INSTANCE" else False, s.born))
            for server in old_first[:len(alive) - self.desired]:
                server.removing_at = self.reads + 1
        self.serving_low = min(self.serving_low, len(self.serving()))
        self.most = max(self.most, len(self.servers))

    def instance(self, server: Server) -> dict[str, Any]:
        state = "REMOVING" if server.removing_at is not None else "INSERVICE"
        return {"instance_id": server.id, "instance_name": server.id, "scaling_group_id": self.group_id,
                "scaling_group_name": self.name, "life_cycle_state": state, "health_status": "NORMAL",
                "scaling_configuration_id": server.configuration, "scaling_configuration_name": "cfg",
                "create_time": "2026-12-07T10:00:00Z", "protect_from_scaling_down": False}

    def member(self, server: Server, pool: str) -> dict[str, Any]:
        online = server.ready_at <= self.reads and server.removing_at is None
        return {"id": f"m-{server.id}", "name": "", "project_id": PROJECT_ID, "admin_state_up": True,
                "subnet_cidr_id": "subnet-1", "protocol_port": 8080, "weight": 1, "address": "10.0.0.9",
                "ip_version": "v4", "operating_status": "ONLINE" if online else "INITIAL",
                "status": [{"listener_id": f"l-{pool}", "operating_status": "ONLINE" if online else "OFFLINE"}],
                "member_type": "instance", "instance_id": server.id, "created_at": "2026-12-07T10:00:00Z",
                "updated_at": "2026-12-07T10:00:00Z"}

    def group(self) -> dict[str, Any]:
        return {"scaling_group_name": self.name, "scaling_group_id": self.group_id,
                "lbaas_listeners": [{"listener_id": f"l-{pool}", "pool_id": pool, "protocol_port": 8080, "weight": 1}
                                    for pool in self.pools],
                "scaling_group_status": "INSERVICE", "scaling_configuration_id": self.configuration,
                "current_instance_number": len(self.servers), "desire_instance_number": self.desired,
                "min_instance_number": self.minimum, "max_instance_number": self.maximum,
                "instance_terminate_policy": self.policy, "is_scaling": False}


class AsApi(BaseHTTPRequestHandler):
    """The four AS API calls, on the SDK's paths (huaweicloudsdkas/v1/as_client.py resource_path)."""

    groups: ClassVar[dict[str, AsGroupSim]] = {}
    calls: ClassVar[list[tuple[str, str]]] = []
    failures: ClassVar[list[int]] = []  # the next requests' answers: 429 throttled, 503 unavailable

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self, method: str) -> None:
        url = urlparse(self.path)
        self.calls.append((method, url.path))
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("SDK-HMAC-SHA256 Access=test-ak,") or self.headers.get("X-Project-Id") != PROJECT_ID:
            return self._answer(401, {"error": {"code": "APIGW.0301", "message": "Incorrect IAM authentication"}})
        if self.failures:
            status = self.failures.pop(0)
            code = "APIGW.0308" if status == 429 else "AS.0002"
            return self._answer(status, {"error_code": code, "error_msg": "try again later"})
        query = parse_qs(url.query)
        by_id = {group.group_id: group for group in self.groups.values()}
        if match := re.fullmatch(rf"/v3/{PROJECT_ID}/elb/pools/([\w-]+)/members", url.path):
            group = next(g for g in self.groups.values() if match[1] in g.pools)
            members = [group.member(s, match[1]) for s in group.servers]
            start = int(query.get("marker", ["0"])[0])  # one server per page: the rollout must follow the marker
            page = members[start:start + 1]
            more = start + 1 < len(members)
            return self._answer(200, {"request_id": "r", "members": page, "page_info": {
                "previous_marker": None, "next_marker": str(start + 1) if more else None,
                "current_count": len(page)}})
        if match := re.fullmatch(rf"/v3/{PROJECT_ID}/elb/pools/([\w-]+)", url.path):
            return self._answer(200, {"request_id": "r", "pool": {
                "id": match[1], "name": match[1], "loadbalancers": [{"id": "lb-1"}], "listeners": [{"id": "l-1"}]}})
        if url.path == f"/v3/{PROJECT_ID}/elb/loadbalancers/lb-1":
            return self._answer(200, {"request_id": "r", "loadbalancer": {
                "id": "lb-1", "name": "inferstack-huawei-prod-server-lb", "provisioning_status": "ACTIVE",
                "vip_address": "10.0.0.5", "eips": [{"eip_id": "e-1", "eip_address": "203.0.113.7", "ip_version": 4}]}})
        if url.path == f"/v3/{PROJECT_ID}/elb/l7policies":
            assert query.get("action") == ["REDIRECT_TO_POOL"], query
            policies = [{"id": "p-other", "action": "REDIRECT_TO_POOL", "redirect_pool_id": "pool-x"}]
            if "canary" in self.groups:
                policies.append({"id": "p-canary", "action": "REDIRECT_TO_POOL", "redirect_pools_config": [
                    {"pool_id": "pool-b", "weight": 90}, {"pool_id": self.groups["canary"].pools[0], "weight": 10}]})
            start = int(query.get("marker", ["0"])[0])  # one policy per page
            more = start + 1 < len(policies)
            return self._answer(200, {"request_id": "r", "l7policies": policies[start:start + 1], "page_info": {
                "next_marker": str(start + 1) if more else None, "current_count": 1}})
        prefix = f"/autoscaling-api/v1/{PROJECT_ID}/"
        path = url.path.removeprefix(prefix)
        if method == "GET" and path == "scaling_group":
            wanted = query["scaling_group_name"][0]
            found = [g.group() for g in self.groups.values() if g.name.startswith(wanted)]  # the API matches prefixes
            return self._answer(200, {"total_number": len(found), "start_number": 0, "limit": 20,
                                      "scaling_groups": found})
        if (match := re.fullmatch(r"scaling_group_instance/([\w-]+)/list", path)) and method == "GET":
            group = by_id[match[1]]
            group.step()
            start, limit = int(query["start_number"][0]), int(query["limit"][0])
            page = [group.instance(s) for s in group.servers][start:start + limit]
            return self._answer(200, {"total_number": len(group.servers), "start_number": start, "limit": limit,
                                      "scaling_group_instances": page})
        if match := re.fullmatch(r"scaling_group/([\w-]+)", path):
            group = by_id[match[1]]
            if method == "GET":
                return self._answer(200, {"scaling_group": group.group()})
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            assert set(body) == {"desire_instance_number"}, body  # the rollout changes nothing else
            count = body["desire_instance_number"]
            if not group.minimum <= count <= group.maximum:
                return self._answer(400, {"error": {"code": "AS.2035", "message": "desire out of range"}})
            group.desired = count
            group.updates.append(count)
            return self._answer(200, {"scaling_group_id": group.group_id})
        return self._answer(404, {"error": {"code": "AS.0001", "message": f"no route {method} {url.path}"}})

    def do_GET(self) -> None:
        self._route("GET")

    def do_PUT(self) -> None:
        self._route("PUT")


@pytest.fixture
def as_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[AsApi]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), AsApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    # The SDK's own region provider reads an endpoint override from the environment (huaweicloudsdkcore
    # region/provider.py: HUAWEICLOUD_SDK_REGION_<SERVICE>_<REGION>).
    for service in ("AS", "ELB"):
        monkeypatch.setenv(f"HUAWEICLOUD_SDK_REGION_{service}_{REGION.replace('-', '_').upper()}",
                           f"http://127.0.0.1:{server.server_address[1]}")
    for key, value in {"HUAWEICLOUD_SDK_AK": "test-ak", "HUAWEICLOUD_SDK_SK": "test-sk",
                       "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT_ID}.items():
        monkeypatch.setenv(key, value)
    AsApi.groups, AsApi.calls, AsApi.failures = {}, [], []
    monkeypatch.setattr("inferstack.day2.huawei.RETRY_PAUSE_S", 0.0)
    yield AsApi
    server.shutdown()


def _plan():
    return read_pin(pinned_path(STACK), stack_file=str(STACK)).chosen()


def _deployed(api: type[AsApi], role: str = "main", old: int | None = None, **changes: Any) -> AsGroupSim:
    """The stack's group as `pulumi up` left it after a new configuration: `old` servers on the previous one."""
    plan = _plan()
    fleet = plan.fleet
    assert fleet is not None
    counts = {"desired": fleet.min_replicas, "minimum": fleet.min_replicas, "maximum": fleet.max_replicas}
    group = AsGroupSim(name=group_name("inferstack", "huawei-prod", GROUP_NAMES[role]), group_id=f"g-{role}",
                       configuration="config-new", **{**counts, **changes})
    group.start(fleet.min_replicas if old is None else old, "config-old")
    api.groups[role] = group
    return group


def test_a_rollout_replaces_every_old_server_in_batches_of_the_plans_surge_never_below_the_serving_count(
        as_api, monkeypatch):
    monkeypatch.setattr("inferstack.day2.huawei.INSTANCES_PER_PAGE", 3)  # the group's 4-6 servers take two pages
    group = _deployed(as_api)
    plan = _plan()
    surge, floor = plan.rolling_update.surge, plan.fleet.min_replicas  # type: ignore[union-attr]
    said: list[str] = []
    [result] = day2.rollout(STACK, timeout_s=30, poll_s=0, say=said.append)
    assert result.group == group.name and result.replaced == floor and result.configuration == "config-new"
    assert [batch.replaced for batch in result.batches] == [surge] * (floor // surge) + (
        [floor % surge] if floor % surge else [])
    assert {s.configuration for s in group.servers} == {"config-new"} and len(group.servers) == floor
    assert group.serving_low >= floor  # never fewer serving than before the rollout
    assert group.most <= floor + surge  # never more than the surge above the count
    assert group.updates == [value for batch in result.batches for value in (floor + batch.replaced, floor)]
    # Only the five calls, on the SDKs' paths, signed for the stack's project.
    assert {method for method, _ in as_api.calls} == {"GET", "PUT"}
    assert all(path.startswith((f"/autoscaling-api/v1/{PROJECT_ID}/scaling_group", f"/v3/{PROJECT_ID}/elb/pools/"))
               for _, path in as_api.calls)
    assert any(path.endswith("/members") for _, path in as_api.calls)
    assert said[0] == f"{group.name}: {floor} server(s) on an old configuration, {floor} expected"


def test_a_canary_group_is_rolled_too_and_a_rollout_with_nothing_old_changes_nothing(as_api):
    main_group = _deployed(as_api, old=0)
    main_group.start(main_group.desired, "config-new")
    canary = _deployed(as_api, "canary", old=1, desired=1, minimum=1, maximum=2, pools=("pool-canary",))
    results = day2.rollout(STACK, timeout_s=30, poll_s=0, say=lambda _: None)
    assert [(r.group, r.replaced) for r in results] == [(main_group.name, 0), (canary.name, 1)]
    assert main_group.updates == [] and canary.updates == [2, 1]


def test_a_batch_that_never_serves_stops_with_the_group_raised_and_the_old_servers_serving(as_api):
    group = _deployed(as_api, never_ready=True)
    floor = group.desired
    with pytest.raises(RolloutError, match=r"did not serve within 1 s; the group stays at \d+ servers expected "
                                           r"\(raised from " + str(floor) + r" by this rollout\).*remove and delete "
                                           r"the new ones.*Do not lower the expected count"):
        day2.rollout(STACK, timeout_s=1, poll_s=0.01, say=lambda _: None)
    assert group.desired > floor and len([s for s in group.servers if s.configuration == "config-old"]) == floor


def test_a_group_that_would_not_remove_old_servers_first_is_refused_before_anything_changes(as_api):
    group = _deployed(as_api, policy="OLD_INSTANCE")
    with pytest.raises(RolloutError, match="does not remove servers of an old configuration first"):
        day2.rollout(STACK, timeout_s=30, poll_s=0, say=lambda _: None)
    assert group.updates == []


def test_a_group_at_its_ceiling_is_refused_naming_the_fix(as_api):
    group = _deployed(as_api)
    group.desired = group.maximum
    group.start(group.maximum - len(group.servers), "config-old")
    with pytest.raises(RolloutError, match=r"at its ceiling \(\d+ servers\).*raise scaling.max_replicas"):
        day2.rollout(STACK, timeout_s=30, poll_s=0, say=lambda _: None)
    assert group.updates == []


def test_a_stack_whose_group_is_not_deployed_says_so_with_its_name(as_api, capsys):
    assert main(["rollout", str(STACK)]) == 2
    err = capsys.readouterr().err
    assert "found no AS group of stack huawei-prod in huawei ap-southeast-3" in err
    assert group_name("inferstack", "huawei-prod", "server") in err


def test_refused_credentials_name_what_to_set(as_api, monkeypatch, capsys):
    monkeypatch.setenv("HUAWEICLOUD_SDK_AK", "someone-else")
    _deployed(as_api)
    assert main(["rollout", str(STACK)]) == 2
    err = capsys.readouterr().err
    assert "no usable Huawei Cloud credentials (ListScalingGroups answered APIGW.0301" in err
    assert "HUAWEICLOUD_SDK_AK" in err


def test_the_autoscalers_count_is_kept_when_it_moves_during_a_batch():
    class Moving:
        def __init__(self) -> None:
            self.desired, self.sets = 4, []
            self.members_ = [Member(f"o{n}", "old", True) for n in range(4)]

        def state(self) -> GroupState:
            return GroupState("g", self.desired, 2, 8, "new", True)

        def members(self) -> list[Member]:
            return self.members_

        def set_desired(self, count: int) -> None:
            self.sets.append(count)
            if count > self.desired:  # the new one serves at once, and the autoscaler adds one more meanwhile
                self.members_ = [*self.members_, Member(f"n{len(self.sets)}", "new", True)]
                self.desired = count + 1
            else:  # old ones go
                self.desired = count
                olds = [m for m in self.members_ if m.configuration == "old"]
                self.members_ = [m for m in self.members_ if m not in olds[:1]]

    group = Moving()
    roll(group, 1, 10, poll_s=0, say=lambda _: None)
    assert group.sets[:2] == [5, 5]  # raised to 5; the autoscaler went to 6; lowered by one, to 5, not back to 4

    class ScaledIn(Moving):
        def set_desired(self, count: int) -> None:
            super().set_desired(count)
            if count > 4:  # the autoscaler scales in while the batch comes up
                self.desired = count - 1

    group = ScaledIn()
    roll(group, 1, 10, poll_s=0, say=lambda _: None)
    assert group.sets[:2] == [5, 4]  # not 5 - 1 - 1 = 3: never below the count the batch started from


def test_other_clouds_groups_roll_themselves_and_the_command_says_so(capsys):
    assert main(["rollout", str(ROOT / "stacks" / "Pulumi.aws-prod.yaml")]) == 0
    assert "AWS's group replaces its servers itself" in capsys.readouterr().out


def test_the_group_names_are_the_programs():
    """The names the rollout looks for are the ones the Huawei fleet registers (a preview of the stack's plan)."""
    from inferstack.preview import preview_deployment

    registered = preview_deployment(_plan(), {"inferstack:apiDomain": "api.example.com",
                                              "inferstack:apiCertificate": "0123456789abcdef0123456789abcdef"},
                                    stack="huawei-prod")
    names = {r.inputs["scalingGroupName"] for r in registered.resources if r.type.startswith("huaweicloud:As/group")}
    assert group_name("inferstack", "huawei-prod", GROUP_NAMES["main"]) in names


def test_a_cloud_the_command_does_not_drive_and_a_single_server_are_told_what_to_do_instead(capsys):
    assert main(["rollout", str(ROOT / "stacks" / "Pulumi.alibaba-dev.yaml")]) == 2
    assert "does not drive Alibaba Cloud's groups yet. Fix: replace the servers by hand" in capsys.readouterr().err
    assert main(["rollout", str(ROOT / "stacks" / "Pulumi.huawei-dev.yaml")]) == 2
    assert "deploys one server, not a fleet: pulumi up replaces it" in capsys.readouterr().err


def test_throttled_and_failing_calls_are_tried_again_and_the_last_failure_says_so(as_api):
    group = _deployed(as_api)
    as_api.failures.extend([503, 429, 503])  # the first three requests fail; each is tried again
    [result] = day2.rollout(STACK, timeout_s=30, poll_s=0, say=lambda _: None)
    assert result.replaced == group.minimum and {s.configuration for s in group.servers} == {"config-new"}
    as_api.failures.extend([503] * 4)
    with pytest.raises(day2.CloudQueryError, match=r"ListScalingGroups failed on the service's side \(503 .*after "
                                                   r"4 tries"):
        day2.rollout(STACK, timeout_s=30, poll_s=0, say=lambda _: None)



def test_status_of_a_huawei_fleet_shows_each_group_its_servers_health_revision_and_the_canarys_weight(as_api):
    main_group = _deployed(as_api, old=2)
    main_group.start(main_group.desired - 2, "config-new")
    main_group.reads = 5  # every server booted: ONLINE in the pools
    canary = _deployed(as_api, "canary", old=0, desired=1, minimum=1, maximum=2, pools=("pool-canary",))
    canary.start(1, "config-new")
    report = day2.status(STACK)
    main, canary_status = report.groups
    assert (main.role, main.name, main.desired, main.revision) == ("main", main_group.name, main_group.desired,
                                                                   "config-new")
    assert (main.in_service, main.healthy, main.on_other_revision) == (main_group.desired, main_group.desired, 2)
    assert (canary_status.role, canary_status.healthy) == ("canary", 1)
    balancer = report.load_balancer
    assert balancer is not None and (balancer.name, balancer.state, balancer.address) == (
        "inferstack-huawei-prod-server-lb", "active", "203.0.113.7")
    assert balancer.canary_weight_percent == 10  # the weighted policy on its second page
    assert [(t.role, t.name, t.states) for t in balancer.targets] == [
        ("main", "pool-a", {"healthy": main_group.desired}), ("main", "pool-b", {"healthy": main_group.desired}),
        ("canary", "pool-canary", {"healthy": 1})]
    assert any("2 of 4 servers run another template version" in note for note in report.notes)


def test_logs_of_a_huawei_stack_say_there_are_none_and_where_to_look(capsys):
    assert main(["logs", str(STACK)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: inferstack logs cannot ask Huawei Cloud yet: the servers ship no logs")


def test_status_of_huawei_loose_servers_says_what_it_cannot_read_yet(as_api, capsys):
    assert main(["status", str(ROOT / "stacks" / "Pulumi.huawei-dev.yaml")]) == 2
    assert "a stack of loose servers needs the ECS API, which no extra installs" in capsys.readouterr().err
