"""Fixtures for component tests: run programs under mocks, with the real bootstrap renderer when it works.

Every test runs its program through `inferstack.preview.record`, which sets Pulumi's mocks for that run and
returns what was registered after the whole program finished (assertions never run inside an apply).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

# The repository root, so that `tests.sample_plans` imports under plain `pytest` as under `python -m pytest`; and
# policy/, where the guardrails live that the pack and the security invariants share (`import inferstack_rules`).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.append(str(Path(__file__).resolve().parents[2] / "policy"))

from inferstack import bootstrap
from inferstack.plan import DeploymentPlan
from inferstack.preview import Recording, record
from tests.sample_plans import sample_plan

FAKE_BOOTSTRAP_MARKER = "# fake bootstrap for component tests"


def fake_render_bootstrap(plan: DeploymentPlan, cloud: str, options: bootstrap.BootstrapOptions) -> str:
    """Stands in for the renderer until it exists: a cloud-config that carries every option it was given."""
    lines = [f"{key}={value}" for key, value in options.model_dump().items() if value is not None]
    return "\n".join(["#cloud-config", FAKE_BOOTSTRAP_MARKER, f"# {plan.workload} on {cloud}", *lines]) + "\n"


def _real_renderer_works() -> bool:
    options = bootstrap.BootstrapOptions(model_bucket="probe-bucket", region="us-east-1")
    try:
        bootstrap.render_bootstrap(sample_plan("aws", "gpu-llm", "validation"), "aws", options)
    except NotImplementedError:
        return False
    return True


@pytest.fixture(autouse=True, scope="session")
def bootstrap_renderer() -> Iterator[str]:
    """The real renderer if it renders, else the fake (switches itself once issue 4 lands)."""
    if _real_renderer_works():
        yield "real"
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bootstrap, "render_bootstrap", fake_render_bootstrap)
        yield "fake"


STACK_CONFIG = {
    # Each provider's region: the regions the sample plans are made for.
    "aws:region": "us-east-1",
    "gcp:region": "us-central1",
    "alicloud:region": "ap-southeast-1",
    "huaweicloud:region": "ap-southeast-3",
    # The one cloud-specific setting without a neutral argument: Alibaba keeps secrets in a KMS instance you buy.
    "inferstack-alibaba:kmsInstanceId": "kst-sgp00000000000000001",
    "inferstack-alibaba:kmsKeyId": "key-sgp00000000000000001",
}
"""Stack config under which every cloud deploys everything (with CLOUD_ARGS)."""

CLOUD_ARGS: dict[str, dict[str, Any]] = {
    "aws": {},  # CloudFront serves on its own hostname
    "gcp": {"assets_domain": "assets.example.com"},
    "alibaba": {"assets_domain": "assets.example.com"},
    "huawei": {"assets_domain": "assets.example.com", "assets_certificate": "scs1554192131150"},
}
"""InferenceServer arguments each cloud needs to create static assets too: a domain where its CDN has no hostname
of its own, and the certificate where the cloud does not issue one."""


@pytest.fixture
def run() -> Callable[..., Recording]:
    """`run(program, config=...)`: record a program under mocks with STACK_CONFIG (and `config` over it)."""

    def _run(program: Callable[[], Any], config: Mapping[str, Any] | None = None, stack: str = "test") -> Recording:
        return record(program, config={**STACK_CONFIG, **(config or {})}, stack=stack)

    return _run
