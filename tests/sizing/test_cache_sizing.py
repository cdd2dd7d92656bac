"""A workload's inference cache: strictly typed and bounded in the spec, carried into the plan, and a stated hit rate
sizes the runtime for the load that remains (request rate and concurrency x (1 - hit rate)), said in the rationale."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferstack.errors import InputError
from inferstack.plan import DeploymentPlan
from inferstack.sizing import plan_workload
from inferstack.spec import Cache, WorkloadSpec, load_workload, parse_workload

WORKLOADS = Path(__file__).resolve().parents[2] / "examples" / "workloads"


def chosen(spec: WorkloadSpec, cloud: str = "aws") -> DeploymentPlan:
    plan = plan_workload(spec, clouds=[cloud]).outcome(cloud).chosen  # type: ignore[arg-type]
    assert plan is not None
    return plan


def with_cache(spec: WorkloadSpec, **cache: object) -> WorkloadSpec:
    return spec.model_copy(update={"cache": Cache.model_validate(cache)})


@pytest.mark.parametrize(("cache", "field"), [
    ({"ttl_seconds": 0}, "cache.ttl_seconds"), ({"ttl_seconds": 2_592_001}, "cache.ttl_seconds"),
    ({"ttl_seconds": "1h"}, "cache.ttl_seconds"), ({"ttl_seconds": 60, "expected_hit_rate": 0.95},
                                                   "cache.expected_hit_rate"),
    ({"ttl_seconds": 60, "expected_hit_rate": -0.1}, "cache.expected_hit_rate"),
    ({"ttl_seconds": 60, "host": "redis.example.com"}, "cache.host"), ({}, "cache.ttl_seconds"),
])
def test_a_cache_outside_its_bounds_or_with_unknown_fields_is_refused_naming_the_field(
        cache: dict[str, object], field: str) -> None:
    data = {"model": "llama-3.1-8b", "traffic": {"requests_per_s": 2}, "cache": cache}
    with pytest.raises(InputError) as error:
        parse_workload(data)
    assert [problem.field for problem in error.value.problems] == [field]


def test_the_plan_carries_the_cache_and_without_one_has_none() -> None:
    spec = load_workload(WORKLOADS / "chat-8b-public.yaml")
    assert chosen(spec).cache is None
    plan = chosen(with_cache(spec, ttl_seconds=3600))
    assert plan.cache == Cache(ttl_seconds=3600, expected_hit_rate=0.0)
    assert any(line.startswith("Inference cache (managed Redis, 3600 s TTL): no hit rate") for line in plan.rationale)


def test_a_stated_hit_rate_sizes_the_runtime_for_the_load_that_remains() -> None:
    spec = load_workload(WORKLOADS / "chat-8b-public.yaml")  # 100 requests in flight at peak
    full = chosen(spec)
    cached = chosen(with_cache(spec, ttl_seconds=3600, expected_hit_rate=0.5))
    halved = chosen(spec.model_copy(update={"traffic": spec.traffic.model_copy(update={"concurrent_users": 50})}))
    assert cached.replicas < full.replicas
    assert (cached.replicas, cached.instance_type, cached.performance.load_requests_per_s) == (
        halved.replicas, halved.instance_type, halved.performance.load_requests_per_s)
    assert any("100 in flight x (1 - 0.5) -> 50" in line for line in cached.rationale), cached.rationale
    # the load balancer counts the cached requests too: each server's target is its runtime's share / (1 - hit rate)
    assert cached.fleet is not None and halved.fleet is not None
    assert cached.fleet.target_requests_per_s == pytest.approx(2 * halved.fleet.target_requests_per_s, rel=1e-3)


def test_a_request_rate_is_reduced_by_the_hit_rate_too() -> None:
    spec = parse_workload({"model": "llama-3.1-8b", "traffic": {"requests_per_s": 8, "peak_factor": 1.5},
                           "cache": {"ttl_seconds": 60, "expected_hit_rate": 0.25}})
    plan = chosen(spec)
    assert plan.performance.load_requests_per_s == pytest.approx(9.0)
    assert any("12 requests/s x (1 - 0.25) = 9 requests/s" in line for line in plan.rationale), plan.rationale


def test_the_managed_redis_is_an_unpriced_extra_in_the_rationale_the_json_and_the_table() -> None:
    # No price is invented: the catalog has no managed Redis row, so the monthly figure is the servers' alone.
    from inferstack.report import _cost

    spec = load_workload(WORKLOADS / "chat-8b-public.yaml")
    plain, cached = chosen(spec), chosen(with_cache(spec, ttl_seconds=3600))
    sentence = ("The inference cache's managed Redis is an unpriced extra: not in the catalog, not in the monthly "
                "figure.")
    assert sentence in cached.rationale and sentence in cached.model_dump(mode="json")["rationale"]
    assert sentence not in plain.rationale
    assert cached.price.monthly == plain.price.monthly  # the same servers, and nothing added for Redis
    assert _cost(cached) == _cost(plain) + " + Redis (unpriced)"
