"""A production workload with a canary, previewed on every cloud: two managed groups behind the one load balancer,
weighted as the workload says; promoting and rolling back are each one change of the workload file, compared as the
resources registered before and after (what goes, what changes, what is kept)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from inferstack.bootstrap import gateway
from inferstack.preview import PreviewResult, RegisteredResource, preview_workload
from inferstack.spec import CLOUDS
from tests.components.conftest import CLOUD_ARGS
from tests.components.test_fleet import GROUPS

BASE: dict[str, Any] = {"name": "chat", "model": "llama-3.1-8b", "precision": "bf16", "stage": "production",
                        "traffic": {"requests_per_s": 20}}
# The canary's change is its precision here; a model revision (canary.model) slots in the same way.
CANARY = {"model": "llama-3.1-8b", "precision": "fp8"}
LOAD_BALANCERS = {"aws": "aws:lb/loadBalancer:LoadBalancer", "gcp": "gcp:compute/address:Address",
                  "alibaba": "alicloud:alb/loadBalancer:LoadBalancer",
                  "huawei": "huaweicloud:DedicatedElb/loadbalancer:Loadbalancer"}
# Each cloud's backends of the two groups: (main, canary).
BACKENDS = {"aws": ("server-targets", "server-canary-targets"), "gcp": ("server-backend", "server-canary-backend"),
            "alibaba": ("server-servers", "server-canary-servers"),
            "huawei": ("server-weighted-pool", "server-canary-pool")}
# What a promote or a rollback must keep as it is: the endpoint, the buckets, the identities, the certificate.
KEPT = {"aws": ("aws:lb/loadBalancer:LoadBalancer", "aws:s3/bucket:Bucket", "aws:iam/role:Role",
                "aws:iam/instanceProfile:InstanceProfile", "aws:acm/certificate:Certificate"),
        "gcp": ("gcp:compute/address:Address", "gcp:storage/bucket:Bucket", "gcp:serviceaccount/account:Account",
                "gcp:certificatemanager/certificate:Certificate", "gcp:compute/forwardingRule:ForwardingRule"),
        "alibaba": ("alicloud:alb/loadBalancer:LoadBalancer", "alicloud:oss/bucket:Bucket", "alicloud:ram/role:Role",
                    "alicloud:alb/listener:Listener"),
        "huawei": ("huaweicloud:DedicatedElb/loadbalancer:Loadbalancer", "huaweicloud:Obs/bucket:Bucket",
                   "huaweicloud:Iam/agency:Agency", "huaweicloud:Vpc/eip:Eip")}
TEMPLATES = {"aws": "server-template", "gcp": "server-template", "alibaba": "server-template",
             "huawei": "server-template"}


def _preview(tmp_path: Path, cloud: str, workload: dict[str, Any],
             config: dict[str, str] | None = None) -> PreviewResult:
    """The preview of `workload` placed on `cloud` (under stack `config`), with the arguments that cloud needs."""
    path = tmp_path / f"{cloud}-{abs(hash(yaml.safe_dump(workload)))}.yaml"
    path.write_text(yaml.safe_dump({**workload, "placement": {"clouds": [cloud]}}), encoding="utf-8")
    return preview_workload(path, cloud=cloud, config=config, **CLOUD_ARGS[cloud])  # type: ignore[arg-type]


def _named(result: PreviewResult, name: str) -> RegisteredResource:
    (found,) = [r for r in result.resources if r.name == name]
    return found


def weights(result: PreviewResult, cloud: str) -> dict[str, int]:
    """The weight each backend (by resource name) gets from the one endpoint's weighted forward."""
    by_id = {r.id: r.name for r in result.resources}
    if cloud == "aws":
        (action,) = _named(result, "server-https").raw_inputs["defaultActions"]
        by_id = {r.outputs.get("arn"): r.name for r in result.resources}
        return {by_id[t["arn"]]: t["weight"] for t in action["forward"]["targetGroups"]}
    if cloud == "gcp":
        route = _named(result, "server-api-urls").raw_inputs["defaultRouteAction"]
        return {by_id[b["backendService"]]: b["weight"] for b in route["weightedBackendServices"]}
    if cloud == "alibaba":
        (action,) = _named(result, "server-canary-split").raw_inputs["ruleActions"]
        return {by_id[t["serverGroupId"]]: t["weight"] for t in action["forwardGroupConfig"]["serverGroupTuples"]}
    policy = _named(result, "server-canary-split").raw_inputs
    assert policy["action"] == "REDIRECT_TO_POOL" and policy["listenerId"] == _named(result, "server-https").id
    return {by_id[p["poolId"]]: p["weight"] for p in policy["redirectPoolsConfigs"]}


@pytest.fixture(scope="module")
def states(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], PreviewResult]:
    """Each cloud's stack in the four states of a canary's life, each one workload-file change from the last."""
    tmp_path = tmp_path_factory.mktemp("canary")
    workloads = {"before": BASE, "canary": {**BASE, "canary": {**CANARY, "weight": 10}},
                 "weight-0": {**BASE, "canary": {**CANARY, "weight": 0}}, "promoted": {**BASE, **CANARY}}
    return {(cloud, state): _preview(tmp_path, cloud, workload) for cloud in CLOUDS
            for state, workload in workloads.items()}


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_canary_is_a_second_group_behind_the_same_load_balancer_with_the_stated_weights(
        states: dict[tuple[str, str], PreviewResult], cloud: str) -> None:
    result = states[(cloud, "canary")]
    assert len([r for r in result.resources if r.type == GROUPS[cloud]]) == 2
    assert len([r for r in result.resources if r.type == LOAD_BALANCERS[cloud]]) == 1
    main, canary = BACKENDS[cloud]
    assert weights(result, cloud) == {main: 90, canary: 10}
    assert weights(states[(cloud, "weight-0")], cloud) == {main: 100, canary: 0}


def test_huaweis_weighted_policy_names_no_listeners_default_pool_and_both_groups_serve_its_pools(
        states: dict[tuple[str, str], PreviewResult]) -> None:
    """The ELB v3 API refuses a listener's default pool as a forwarding policy's pool (huawei/load_balancer.py,
    weighted_policy): the policy names the main group's second pool, which the main group is a member of from before
    the canary on."""
    result = states[("huawei", "canary")]
    by_id = {r.id: r for r in result.resources}
    named = [by_id[p["poolId"]] for p in _named(result, "server-canary-split").raw_inputs["redirectPoolsConfigs"]]
    assert [pool.name for pool in named] == list(BACKENDS["huawei"])
    assert all("listenerId" not in pool.raw_inputs for pool in named)
    listeners = {r.raw_inputs.get("defaultPoolId") for r in result.resources if r.type.endswith("/listener:Listener")}
    assert not listeners & {pool.id for pool in named}
    groups = {r.name: [p["poolId"] for p in r.raw_inputs["lbaasListeners"]]
              for r in result.resources if r.type == GROUPS["huawei"]}
    assert groups == {"server-group": [_named(result, "server-pool").id, named[0].id],
                      "server-canary-group": [named[1].id]}
    before = {r.name: r.raw_inputs for r in states[("huawei", "before")].resources}
    assert [p["poolId"] for p in before["server-group"]["lbaasListeners"]][1] == named[0].id  # already a member


@pytest.mark.parametrize("cloud", CLOUDS)
def test_the_canary_group_boots_its_own_version_with_an_identity_that_reads_only_its_model(
        states: dict[tuple[str, str], PreviewResult], cloud: str) -> None:
    result = states[(cloud, "canary")]
    main, canary = _named(result, "server-template"), _named(result, "server-canary-template")
    assert main.raw_inputs != canary.raw_inputs
    identity = [r for r in result.resources if r.parent and "server-canary-identity" in r.parent]
    granted = str([r.raw_inputs for r in identity])
    assert "models/llama-3.1-8b/fp8/" in granted and "models/llama-3.1-8b/bf16/" not in granted


def _by_urn(result: PreviewResult) -> dict[str, RegisteredResource]:
    return {r.urn: r for r in result.resources}


@pytest.mark.parametrize("cloud", CLOUDS)
def test_rolling_back_removes_the_canary_and_restores_every_resource_as_it_was(
        states: dict[tuple[str, str], PreviewResult], cloud: str) -> None:
    """Dropping `canary` (from weight 10, or from weight 0) deletes the canary's resources and nothing else; every
    other resource is registered exactly as before the canary, the main group's template included."""
    before = _by_urn(states[(cloud, "before")])
    for state in ("canary", "weight-0"):
        during = _by_urn(states[(cloud, state)])
        assert set(before) < set(during)
        assert all("canary" in during[urn].name for urn in set(during) - set(before))
        changed = sorted(during[urn].name for urn in before if during[urn].raw_inputs != before[urn].raw_inputs)
        # During the canary only the endpoint's routing and the main group's size differ from before it.
        assert TEMPLATES[cloud] not in changed
        assert set(changed) <= ROUTING_AND_SIZE[cloud], changed


ROUTING_AND_SIZE = {
    "aws": {"server-https", "server-group", "server-requests", "server-low-load", "server-alarm-fleet-at-ceiling",
            "server-dashboard"},
    "gcp": {"server-api-urls", "server-autoscaler", "server-alarm-fleet-at-ceiling", "server-dashboard"},
    "alibaba": {"server-group", "server-requests-per-server", "server-alarm-error-rate",
                "server-alarm-fleet-at-ceiling"},
    "huawei": {"server-https", "server-group", "server-alarm-error-rate", "server-alarm-fleet-at-ceiling"},
}
"""What a canary may change of the stack it joins: the forward (listener, URL map), the main group's size, and the
main group's alarms that follow its size (its ceiling; on Alibaba and Huawei, whose alarms cannot divide two metrics,
the error rate as errors per second at its share of the load), and the dashboard that draws its floor and ceiling."""


@pytest.mark.parametrize("cloud", CLOUDS)
def test_promoting_rolls_the_main_group_to_the_canary_version_and_keeps_the_endpoint_buckets_and_identities(
        states: dict[tuple[str, str], PreviewResult], cloud: str) -> None:
    during, promoted = _by_urn(states[(cloud, "canary")]), _by_urn(states[(cloud, "promoted")])
    before = _by_urn(states[(cloud, "before")])
    assert set(promoted) == set(before)  # the canary's resources go; nothing new comes
    assert all("canary" in during[urn].name for urn in set(during) - set(promoted))
    template = next(urn for urn, r in promoted.items() if r.name == TEMPLATES[cloud])
    canary_template = next(r for r in during.values() if r.name == "server-canary-template")
    assert promoted[template].raw_inputs != during[template].raw_inputs  # the main group rolls to the new version
    assert "fp8" in str(promoted[template].raw_inputs) or _same_boot(promoted[template], canary_template)
    kept = [urn for urn, r in during.items() if r.type in KEPT[cloud] and "canary" not in r.name]
    assert kept, f"no {KEPT[cloud]} registered"
    for urn in kept:
        assert promoted[urn].raw_inputs == during[urn].raw_inputs, promoted[urn].name


def _same_boot(left: RegisteredResource, right: RegisteredResource) -> bool:
    """The two templates boot the same bundle: their user data (by whichever key the cloud names it) is equal."""
    def boot(resource: RegisteredResource) -> Any:
        inputs = resource.raw_inputs
        return inputs.get("userData") or inputs.get("metadata") or inputs.get("instanceConfig")
    return boot(left) is not None and boot(left) == boot(right)


def test_the_canary_group_keys_its_cache_apart(tmp_path: Path) -> None:
    # The canary may run another engine or KV-cache type: its answers must never be served by the main group.
    workload = {**BASE, "canary": {**CANARY, "weight": 10}, "cache": {"ttl_seconds": 600}}
    result = _preview(tmp_path, "aws", workload, config={"inferstack:cacheAuthToken": "Cache-token_0123456789+ab="})
    bundles = {r.name: json.loads(r.raw_inputs["content"]) for r in result.resources
               if r.type == "aws:s3/bucketObjectv2:BucketObjectv2" and "bundle" in r.name}
    configs = {name: {f["path"]: f["content"] for f in bundle["files"]}[gateway.CONFIG_PATH]
               for name, bundle in bundles.items()}
    assert 'scope = "main:' in configs["server-bundle"] and 'scope = "canary:' not in configs["server-bundle"]
    assert 'scope = "canary:' in configs["server-canary-bundle"]
