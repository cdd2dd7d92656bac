"""The policy pack's tests need pulumi-policy; harness.py fails with a clear message when it is missing."""

import sys
from pathlib import Path

# The repository root, so that `tests.policy.harness` and `tests.sample_plans` import under plain `pytest`.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tests.policy.harness  # noqa: F401  (fails collection, loudly, without pulumi-policy)
