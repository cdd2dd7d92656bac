"""Workload `startup`: the image a plan's servers boot and the AWS warm pool, with what they change in the plan."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from inferstack.sizing import plan_workload
from inferstack.spec import Startup, WorkloadSpec, load_workload

WORKLOADS = Path(__file__).resolve().parents[2] / "examples" / "workloads"


def _chat(startup: dict[str, object], **placement: object) -> WorkloadSpec:
    spec = load_workload(WORKLOADS / "chat-8b-public.yaml")
    return spec.model_copy(update={"startup": Startup.model_validate(startup),
                                   "placement": spec.placement.model_copy(update=placement)})


def _chosen(spec: WorkloadSpec, cloud: str):  # type: ignore[no-untyped-def]
    report = plan_workload(spec.model_copy(update={"placement": spec.placement.model_copy(
        update={"clouds": [cloud]})}))
    plan = report.clouds[0].chosen
    assert plan is not None
    return plan


def test_a_baked_image_shortens_the_cold_start_on_aws_and_the_plan_says_where_it_does_not_apply() -> None:
    default = _chosen(_chat({}), "aws")
    baked = _chosen(_chat({"image": "baked"}), "aws")
    assert baked.startup.image == "baked" and default.startup.image == "default"
    assert baked.cold_start is not None and default.cold_start is not None
    assert baked.cold_start.total_s < default.cold_start.total_s
    assert baked.fleet is not None and baked.fleet.cold_start_s < default.fleet.cold_start_s  # type: ignore[union-attr]
    gcp = _chosen(_chat({"image": "baked"}), "gcp")
    assert gcp.startup.image == "default"
    assert any("built on AWS only" in note for note in gcp.startup.notes)
    assert any("built on AWS only" in line for line in gcp.rationale)


def test_a_brought_image_is_used_on_its_own_cloud_only() -> None:
    spec = _chat({"image": {"aws": "ami-0123456789abcdef0"}})
    aws, gcp = _chosen(spec, "aws"), _chosen(spec, "gcp")
    assert (aws.startup.image, aws.startup.image_id) == ("brought", "ami-0123456789abcdef0")
    assert gcp.startup.image == "default" and "brings no Google Cloud image" in gcp.startup.notes[0]


@pytest.mark.parametrize("image", [{"aws": "m-0123456789"}, {"gcp": "ami-0123456789abcdef0"}, {"azure": "x"},
                                   {"aws": "ami-0123456789abcdef0; reboot"}])
def test_an_image_id_of_another_shape_is_refused(image: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        Startup.model_validate({"image": image})


def test_a_warm_pool_keeps_the_burst_stopped_prices_its_disks_and_shortens_the_scale_out_warm_up() -> None:
    plain = _chosen(_chat({}), "aws")
    pooled = _chosen(_chat({"warm_pool": True}), "aws")
    pool, fleet = pooled.startup.warm_pool, pooled.fleet
    assert pool is not None and fleet is not None and pooled.startup.warm_start is not None
    assert pool.servers == fleet.max_replicas - fleet.min_replicas
    assert pool.disk_gib == pooled.disk_gib
    assert pool.monthly_storage is not None
    assert pool.monthly_storage.amount == pytest.approx(0.08 * pool.disk_gib * pool.servers)
    assert fleet.scale_out_cooldown_s < plain.fleet.scale_out_cooldown_s  # type: ignore[union-attr]
    assert fleet.health_check_grace_s == plain.fleet.health_check_grace_s  # type: ignore[union-attr]
    assert any("Warm pool" in line and "monthly cost becomes" in line for line in pooled.rationale)


def test_no_warm_pool_beside_spot_capacity_nor_where_the_group_has_none() -> None:
    spot = _chosen(_chat({"warm_pool": True}, spot=True), "aws")
    assert spot.spot_above_floor is not None and spot.startup.warm_pool is None
    assert any("mixed instances policy" in note for note in spot.startup.notes)
    gcp = _chosen(_chat({"warm_pool": True}), "gcp")
    assert gcp.startup.warm_pool is None and any("warm-pool" in note for note in gcp.startup.notes)
    # the note points at the page whose capability table says why
    assert any("(docs/deploy-gcp.md, warm-pool)" in note for note in gcp.startup.notes)
    assert (WORKLOADS.parents[1] / "docs" / "deploy-gcp.md").read_text().count("| `warm-pool` |") == 1


def test_a_region_without_a_storage_price_keeps_the_pool_and_says_the_price_is_unknown() -> None:
    plan = _chosen(_chat({"warm_pool": True}, regions={"aws": ["us-west-2"]}), "aws")
    assert plan.startup.warm_pool is not None and plan.startup.warm_pool.monthly_storage is None
    assert "no gp3 price packaged for us-west-2" in plan.startup.warm_pool.storage_price_basis


def test_streaming_applies_to_vllm_on_aws_and_is_declined_with_a_reason_elsewhere() -> None:
    streamed = _chosen(_chat({"model_loading": "stream"}), "aws")
    downloaded = _chosen(_chat({}), "aws")
    assert streamed.startup.model_loading == "stream" and downloaded.startup.model_loading == "download"
    assert streamed.cold_start.total_s < downloaded.cold_start.total_s  # type: ignore[union-attr]
    gcp = _chosen(_chat({"model_loading": "stream"}), "gcp")
    assert gcp.startup.model_loading == "download"
    assert any("built for AWS S3 only" in note for note in gcp.startup.notes)


def test_a_baked_streamed_server_starts_within_three_minutes_with_its_runtimes_caches_and_keeps_no_pool() -> None:
    plan = _chosen(_chat({"image": "baked", "model_loading": "stream", "warm_pool": True}), "aws")
    default = _chosen(_chat({}), "aws")
    assert plan.cold_start is not None and default.cold_start is not None
    assert plan.startup.runtime_caches and not default.startup.runtime_caches
    assert plan.cold_start.total_s <= 180 < default.cold_start.total_s  # issue 29's target, from sourced figures
    assert "caches baked in the image" in plan.cold_start.phases[-1].basis
    assert all(phase.basis for phase in plan.cold_start.phases)
    # a stopped server would start no sooner than a new one from this image: no pool, and the plan says why
    assert plan.startup.warm_pool is None and plan.startup.warm_start is None
    assert any("no sooner than a new one" in note and "runtime's caches" in note for note in plan.startup.notes)
    assert any("compile caches, written by starting the model once" in line for line in plan.rationale)


def test_a_warm_pool_starts_sooner_than_the_default_images_cold_start_with_its_caches() -> None:
    plan = _chosen(_chat({"model_loading": "stream", "warm_pool": True}), "aws")
    assert plan.cold_start is not None and plan.startup.warm_start is not None
    assert plan.startup.warm_start.total_s < plan.cold_start.total_s
    assert all(phase.basis for phase in plan.startup.warm_start.phases)


def test_only_a_runtime_whose_caches_shorten_its_start_has_them_baked() -> None:
    from inferstack.sizing.coldstart import runtime_caches

    assert runtime_caches("baked", "vllm", "gpu", 1)
    assert not runtime_caches("default", "vllm", "gpu", 1) and not runtime_caches("brought", "vllm", "gpu", 1)
    assert not runtime_caches("baked", "llamacpp", "cpu", 1)  # no compile step to keep


def test_no_warm_pool_where_a_stopped_server_starts_no_sooner_than_a_new_one() -> None:
    from inferstack.sizing.coldstart import Server, cold_start, warm_start
    from inferstack.sizing.startup import warm_pool

    plan = _chosen(_chat({"warm_pool": True}), "aws")
    assert plan.fleet is not None
    # a server whose stop costs it more than a launch saves (a CPU runtime without caches, its model on NVMe)
    server = Server(cloud="aws", runtime="llamacpp", device="cpu", model_gib=4.0, network_gbps=10.0,
                    local_nvme_gb=100, disk_gib=40, image="baked")
    cold, warm = cold_start(server), warm_start(server)
    assert warm.total_s >= cold.total_s
    pool, notes = warm_pool(_chat({"warm_pool": True}).startup, "aws", "us-east-1", plan.fleet, None, 40,
                            _rates(), "USD", cold=cold, warm=warm, local_storage=True)
    assert pool is None and "no sooner than a new one" in notes[0]
    assert "instance storage is fetched again" in notes[0]  # the reason, where it is the reason


def _rates():  # type: ignore[no-untyped-def]
    from inferstack.sizing.catalog import default_exchange_rates

    return default_exchange_rates()
