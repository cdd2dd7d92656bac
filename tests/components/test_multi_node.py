"""A plan whose replica spans servers is planned and priced, and refused by every cloud's component before anything is
created: its placement, head and worker templates, Ray units and healing are not provisioned yet."""

from __future__ import annotations

import pytest

from inferstack.components import Capability, InferenceServer, backend_for
from inferstack.errors import InputError
from inferstack.preview import record
from inferstack.sizing import planner
from inferstack.spec import parse_workload
from tests.components.conftest import CLOUD_ARGS, STACK_CONFIG

FOUR_CLOUDS = ("aws", "gcp", "alibaba", "huawei")


def two_server_plan(cloud: str):  # type: ignore[no-untyped-def]
    spec = parse_workload({
        "name": "big", "model": "llama-3.1-405b", "precision": "bf16", "stage": "internal",
        "traffic": {"requests_per_s": 1, "prompt_tokens": 1000, "output_tokens": 200},
        "placement": {"gpus_allow": ["H100"]}})
    plan = planner.plan_workload(spec, clouds=["aws"]).outcome("aws").chosen
    assert plan is not None and plan.replica_nodes is not None
    return plan.model_copy(update={"cloud": cloud, "region": CLOUD_REGIONS[cloud]})


CLOUD_REGIONS = {"aws": "us-east-1", "gcp": "us-central1", "alibaba": "ap-southeast-1", "huawei": "ap-southeast-3"}


@pytest.mark.parametrize("cloud", FOUR_CLOUDS)
def test_a_replica_across_servers_is_refused_before_anything_is_created(cloud: str) -> None:
    assert not backend_for(cloud).support(Capability.MULTI_NODE_REPLICAS).available
    plan = two_server_plan(cloud)
    with pytest.raises(InputError) as error:  # raised by the argument check, before the component registers
        record(lambda: InferenceServer("inf", {"plan": plan, **CLOUD_ARGS[cloud]}), config=STACK_CONFIG,
               stack="multi")
    fields = [problem.field for problem in error.value.problems]
    assert "inf.multi-node-replicas" in fields, fields
    assert "one server holds it" in str(error.value)
