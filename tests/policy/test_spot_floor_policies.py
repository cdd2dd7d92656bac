"""A production fleet's floor stays on-demand (issue 25, item 4): the pack knows each cloud's mixed groups. Spot
servers above the floor pass (AWS mixed instances policy with an on-demand base of the floor, Alibaba's ESS
on-demand base under COMPOSABLE); a group whose floor may run on spot is a violation of
production-runs-a-protected-fleet on the group, on every cloud, and a purchase setting the pack cannot read counts as
spot."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi_policy.proxy import UNKNOWN_NUMBER_VALUE, UNKNOWN_STRING_VALUE

from tests.policy import fleets
from tests.policy.harness import check_built

RULE = "production-runs-a-protected-fleet"
AWS_SPLIT = {"onDemandBaseCapacity": 2.0, "onDemandPercentageAboveBaseCapacity": 0.0,
             "onDemandAllocationStrategy": "prioritized", "spotAllocationStrategy": "capacity-optimized-prioritized"}


def _aws_mixed(split: dict[str, Any]) -> Any:
    def change(props: dict[str, Any]) -> dict[str, Any]:
        template = props.pop("launchTemplate")
        props["mixedInstancesPolicy"] = {
            "launchTemplate": {"launchTemplateSpecification": {"launchTemplateId": template["id"], "version": "1"},
                               "overrides": [{"instanceType": "g6.xlarge"}, {"instanceType": "g6.2xlarge"}]},
            "instancesDistribution": split}
        return props
    return change


AWS_DEPENDS = {"mixedInstancesPolicy": ["template"], "vpcZoneIdentifiers": ["private-0", "private-1"],
               "targetGroupArns": ["target-group"]}


def _set(**values: Any) -> Any:
    return lambda props: {**props, **values}


def _violations(cloud: str, *changes: tuple[str, Any, dict[str, list[str]] | None]) -> list[str]:
    resources = fleets.fleet(cloud)
    for name, change, depends in changes:
        resources = fleets.changed(resources, name, change, depends)
    return [v.message for v in check_built(resources).violations if v.policy == RULE]


def test_spot_above_an_on_demand_floor_passes_on_aws_and_alibaba() -> None:
    assert _violations("aws", ("group", _aws_mixed(AWS_SPLIT), AWS_DEPENDS)) == []
    assert _violations("aws", ("group", _aws_mixed({**AWS_SPLIT, "onDemandBaseCapacity": 0.0,
                                                    "onDemandPercentageAboveBaseCapacity": 100.0}),
                               AWS_DEPENDS)) == []  # every server on-demand
    assert _violations("alibaba", ("template", _set(spotStrategy="SpotAsPriceGo"), None),
                       ("group", _set(multiAzPolicy="COMPOSABLE", azBalance=True, onDemandBaseCapacity=2.0,
                                      onDemandPercentageAboveBaseCapacity=0.0), None)) == []


@pytest.mark.parametrize(("cloud", "changes", "reason"), [
    ("aws", [("group", _aws_mixed({**AWS_SPLIT, "onDemandBaseCapacity": 1.0}), AWS_DEPENDS)],
     "its on-demand base capacity is 1, below its floor (2)"),
    ("aws", [("group", _aws_mixed({"onDemandPercentageAboveBaseCapacity": 0.0}), AWS_DEPENDS)],
     "its on-demand base capacity is 0, below its floor (2)"),
    ("alibaba", [("template", _set(spotStrategy="SpotAsPriceGo"), None)],
     "its template launches spot servers and its on-demand base (unset, under multiAzPolicy unset) does not cover "
     "its floor (2)"),
    ("alibaba", [("template", _set(spotStrategy="SpotWithPriceLimit"), None),
                 ("group", _set(multiAzPolicy="BALANCE", onDemandBaseCapacity=2.0), None)],
     "its template launches spot servers and its on-demand base (2, under multiAzPolicy BALANCE) does not cover "
     "its floor (2)"),
    ("gcp", [("template", _set(scheduling={"provisioningModel": "SPOT"}), None)],
     "its template template is spot (provisioningModel SPOT or preemptible)"),
    ("gcp", [("template", _set(scheduling={"preemptible": True}), None)],
     "its template template is spot (provisioningModel SPOT or preemptible)"),
    ("huawei", [("template", lambda props: {**props, "instanceConfig": {**props["instanceConfig"],
                                                                          "chargingMode": "spot"}}, None)],
     "its AS configuration template is spot (instanceConfig.chargingMode)"),
])
def test_a_floor_that_may_run_on_spot_is_a_violation_on_every_cloud(cloud: str, changes: list[Any],
                                                                     reason: str) -> None:
    assert _violations(cloud, *changes) == [
        f"managed group group may run its floor on spot capacity: {reason}, so one reclamation takes servers the "
        "SLO needs: keep the floor on-demand: spot servers only above it (inferstack's spot above the floor: "
        'docs/pricing.md, "Spot above the floor")']


def test_a_stack_of_another_stage_may_run_all_spot() -> None:
    resources = fleets.changed(fleets.fleet("gcp"), "template", _set(scheduling={"provisioningModel": "SPOT"}))
    report = check_built(resources, config={RULE: {"stage": "internal"}})
    assert [v for v in report.violations if v.policy == RULE] == []


def _deployed(cloud: str, **update: Any) -> list[str]:
    """The components' production deployment of a plan changed by `update`, through the pack."""
    from inferstack.preview import Recording, preview_deployment
    from tests.policy.deployments import CLOUD_SETTINGS, PUBLIC
    from tests.policy.harness import Registered, check_recording, dependencies_recorded
    from tests.sample_plans import sample_plan

    plan = sample_plan(cloud, "gpu-llm", "production")
    if update.pop("floor", False):
        from inferstack.plan import SpotAboveFloor

        assert plan.fleet is not None
        update["spot_above_floor"] = SpotAboveFloor(
            on_demand_base=plan.fleet.min_replicas, spot_above=plan.fleet.max_replicas - plan.fleet.min_replicas,
            instance_types=[plan.instance_type], spot_hourly_per_instance=None, spot_price_source=None,
            spot_price_date=None)
    with dependencies_recorded() as dependencies:
        result = preview_deployment(plan.model_copy(update=update), {**PUBLIC, **CLOUD_SETTINGS[cloud]})
    report = check_recording(Registered(Recording(result.resources, [], result.outputs), dependencies))
    return [v.message for v in report.violations if v.policy == RULE]


@pytest.mark.parametrize("cloud", ["aws", "alibaba"])
def test_the_components_spot_above_the_floor_passes(cloud: str) -> None:
    assert _deployed(cloud, floor=True) == []


@pytest.mark.parametrize("cloud", ["aws", "gcp", "alibaba", "huawei"])
def test_the_components_all_spot_fleet_is_refused_in_production(cloud: str) -> None:
    found = _deployed(cloud, spot=True)
    assert len(found) == 1 and "may run its floor on spot capacity" in found[0], found


def test_an_aws_launch_template_that_requests_spot_itself_is_a_floor_on_spot() -> None:
    def spot_template(props: dict[str, Any]) -> dict[str, Any]:
        return {**props, "instanceMarketOptions": {"marketType": "spot"}}

    assert _violations("aws", ("template", spot_template, None)) == [
        "managed group group may run its floor on spot capacity: its launch template template requests spot "
        "(instanceMarketOptions.marketType), so one reclamation takes servers the SLO needs: keep the floor on-demand: "
        'spot servers only above it (inferstack\'s spot above the floor: docs/pricing.md, "Spot above the floor")']


@pytest.mark.parametrize("cloud", ["aws", "gcp", "alibaba", "huawei"])
def test_a_group_whose_template_the_stack_does_not_hold_fails_closed(cloud: str) -> None:
    (group,) = [r for r in fleets.fleet(cloud) if r.name == "group"]
    depends = {key: [name for name in names if name != "template"] for key, names in group.depends.items()}
    found = _violations(cloud, ("template", None, None), ("group", lambda props: props, depends))
    assert any("its template is not one of this stack's resources, so the pack cannot read how its servers are "
               "bought" in message for message in found), found


@pytest.mark.parametrize(("cloud", "name", "change"), [
    ("aws", "group", lambda props: {**props, "mixedInstancesPolicy": {
        "launchTemplate": {"launchTemplateSpecification": {"launchTemplateId": "lt-1"}},
        "instancesDistribution": {"onDemandBaseCapacity": UNKNOWN_NUMBER_VALUE}}}),
    ("alibaba", "template", lambda props: {**props, "spotStrategy": UNKNOWN_STRING_VALUE}),
    ("gcp", "template", lambda props: {**props, "scheduling": {"provisioningModel": UNKNOWN_STRING_VALUE}}),
    ("huawei", "template", lambda props: {**props, "instanceConfig": {**props["instanceConfig"],
                                                                      "chargingMode": UNKNOWN_STRING_VALUE}}),
])
def test_a_purchase_setting_unknown_in_the_preview_fails_closed(cloud: str, name: str, change: Any) -> None:
    depends = AWS_DEPENDS if cloud == "aws" else None
    found = _violations(cloud, (name, change, depends))
    assert len(found) == 1 and "is unknown in this preview, so the pack cannot tell how its servers are bought" \
        in found[0], found
