"""Fixtures for component tests: run programs under mocks, with the real bootstrap renderer.

Every test runs its program through `inferstack.preview.record`, which sets Pulumi's mocks for that run and
returns what was registered after the whole program finished (assertions never run inside an apply).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

# The repository root, so that `tests.sample_plans` imports under plain `pytest` as under `python -m pytest`; and
# policy/, where the guardrails live that the pack and the security invariants share (`import guardrails`).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.append(str(Path(__file__).resolve().parents[2] / "policy"))

from inferstack.preview import Recording, record

STACK_CONFIG = {
    # Each provider's region: the regions the sample plans are made for.
    "aws:region": "us-east-1",
    "gcp:region": "us-central1",
    "alicloud:region": "ap-southeast-1",
    "huaweicloud:region": "ap-southeast-3",
    # Alibaba's settings without a neutral argument: it keeps secrets in a KMS instance you buy, and issues the CDN's
    # certificate once the domain's CNAME points at the CDN (the second `pulumi up`, which these tests deploy).
    "inferstack-alibaba:kmsInstanceId": "kst-sgp00000000000000001",
    "inferstack-alibaba:kmsKeyId": "key-sgp00000000000000001",
    "inferstack-alibaba:assetsDnsReady": "true",
}
"""Stack config under which every cloud deploys everything (with CLOUD_ARGS)."""

CLOUD_ARGS: dict[str, dict[str, Any]] = {
    "aws": {"api_domain": "api.example.com"},  # CloudFront serves on its own hostname
    "gcp": {"assets_domain": "assets.example.com", "api_domain": "api.example.com"},
    "alibaba": {"assets_domain": "assets.example.com", "api_domain": "api.example.com",
                "api_certificate": "12345678-ap-southeast-1"},
    "huawei": {"assets_domain": "assets.example.com", "assets_certificate": "scs1554192131150",
               "api_domain": "api.example.com", "api_certificate": "233a325e5e3e4ce8beeb320aa714cc12"},
}
"""InferenceServer arguments each cloud needs to create static assets too (a domain where its CDN has no hostname
of its own, and the certificate where the cloud does not issue one) and a fleet's endpoint (its domain)."""


@pytest.fixture
def run() -> Callable[..., Recording]:
    """`run(program, config=...)`: record a program under mocks with STACK_CONFIG (and `config` over it)."""

    def _run(program: Callable[[], Any], config: Mapping[str, Any] | None = None, stack: str = "test") -> Recording:
        return record(program, config={**STACK_CONFIG, **(config or {})}, stack=stack)

    return _run
