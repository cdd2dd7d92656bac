"""A plan with a fleet, on every cloud, as the cloud-neutral component handles it: its endpoint needs a domain (and
a certificate where the cloud issues none), which is checked before anything is registered; its servers come from
the cloud's managed group over the plan's zones, none with an address of its own; its one endpoint is HTTPS on the
domain; the stack program exports where the domain must point. Each cloud's own machinery is tested in
test_fleet_<cloud>.py."""

from __future__ import annotations

from typing import Any

import pytest

from inferstack.clouds import CLOUD_FACTS
from inferstack.components import Capability, InferenceServer, backend_for
from inferstack.errors import InputError
from inferstack.preview import preview_deployment
from inferstack.spec import CLOUDS
from tests.components.conftest import CLOUD_ARGS
from tests.sample_plans import sample_plan

# Each cloud's managed group: what holds a fleet's servers.
GROUPS = {"aws": "aws:autoscaling/group:Group",
          "gcp": "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager",
          "alibaba": "alicloud:ess/scalingGroup:ScalingGroup", "huawei": "huaweicloud:As/group:Group"}
LOOSE_SERVERS = {"aws": "aws:ec2/instance:Instance", "gcp": "gcp:compute/instance:Instance",
                 "alibaba": "alicloud:ecs/instance:Instance", "huawei": "huaweicloud:Ecs/instance:Instance"}


@pytest.mark.parametrize("cloud", CLOUDS)
def test_every_cloud_runs_a_fleet_behind_a_load_balancer(cloud: str) -> None:
    backend = backend_for(cloud)
    for capability in (Capability.MANAGED_FLEET, Capability.LOAD_BALANCER_TLS):
        assert backend.support(capability).available, (cloud, capability, backend.support(capability).note)


def _rejected(run: Any, cloud: str, **args: Any) -> tuple[str, Any]:
    plan = sample_plan(cloud, "gpu-llm", "production")  # type: ignore[arg-type]

    def program() -> str:
        with pytest.raises(InputError) as caught:
            InferenceServer("chat", {"plan": plan, **args})
        return str(caught.value)

    recording = run(program)
    return recording.value, recording


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_fleet_without_a_domain_is_refused_before_anything_is_registered(run: Any, cloud: str) -> None:
    args = {key: value for key, value in CLOUD_ARGS[cloud].items() if key != "api_domain"}
    message, recording = _rejected(run, cloud, **args)
    assert "chat.api_domain: is required" in message and "inferstack:apiDomain" in message
    assert recording.resources == []


@pytest.mark.parametrize("domain", ["https://api.example.com", "API.example.com", "*.example.com", "api"])
def test_a_domain_that_is_no_dns_name_is_refused_before_anything_is_registered(run: Any, domain: str) -> None:
    message, recording = _rejected(run, "gcp", **{**CLOUD_ARGS["gcp"], "api_domain": domain})
    assert "chat.api_domain: is not a lowercase DNS name" in message and repr(domain) in message
    assert recording.resources == []


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_certificate_is_refused_where_the_cloud_issues_one_and_required_where_it_does_not(run: Any,
                                                                                          cloud: str) -> None:
    rule = backend_for(cloud).api_certificate
    if rule is None:
        message, recording = _rejected(run, cloud, **{**CLOUD_ARGS[cloud], "api_certificate": "my-certificate"})
        assert "chat.api_certificate: is not used on" in message
    elif rule.issued_without:
        message, recording = _rejected(run, cloud, **{**CLOUD_ARGS[cloud], "api_certificate": "not-a-certificate"})
        assert f"chat.api_certificate: is not {rule.kind}" in message
    else:
        args = {key: value for key, value in CLOUD_ARGS[cloud].items() if key != "api_certificate"}
        message, recording = _rejected(run, cloud, **args)
        assert f"chat.api_certificate: is required on {backend_for(cloud).display_name}" in message
    assert recording.resources == []


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_production_plan_is_one_managed_group_and_one_https_endpoint(cloud: str) -> None:
    config = {f"inferstack:{key}": value for key, value in
              {"apiDomain": "api.example.com", "apiCertificate": CLOUD_ARGS[cloud].get("api_certificate"),
               "assetsDomain": CLOUD_ARGS[cloud].get("assets_domain"),
               "assetsCertificate": CLOUD_ARGS[cloud].get("assets_certificate")}.items() if value is not None}
    result = preview_deployment(sample_plan(cloud, "gpu-llm", "production"), config)  # type: ignore[arg-type]
    assert len([r for r in result.resources if r.type == GROUPS[cloud]]) == 1
    assert not [r for r in result.resources if r.type == LOOSE_SERVERS[cloud]]
    outputs = result.outputs
    assert outputs["endpointUrl"] == "https://api.example.com" and outputs["endpointUrls"] == [outputs["endpointUrl"]]
    assert outputs["loadBalancerAddress"] and outputs["groupId"]
    assert outputs["instanceIds"] == [] and outputs["publicIps"] == []


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_validation_plan_stays_one_server_without_a_load_balancer(cloud: str) -> None:
    result = preview_deployment(sample_plan(cloud, "gpu-llm", "validation"),  # type: ignore[arg-type]
                                {"inferstack:staticAssets": False})
    assert len([r for r in result.resources if r.type == LOOSE_SERVERS[cloud]]) == 1
    assert not [r for r in result.resources if r.type == GROUPS[cloud]]
    assert result.outputs["loadBalancerAddress"] is None and result.outputs["endpointUrl"].startswith("http://")


@pytest.mark.parametrize("cloud", CLOUDS)
def test_the_capability_table_states_the_driver_ready_image_the_cold_start_estimate_reads(cloud: str) -> None:
    driver_ready = backend_for(cloud).support(Capability.DRIVER_READY_IMAGE).available
    assert driver_ready is CLOUD_FACTS[cloud].driver_ready_image
