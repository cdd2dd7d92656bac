"""The alarms on the servers' own metrics (`observability.agent_alarm_rules`): GPU memory above the plan's use plus
half its headroom (vLLM's gpu_memory_utilization, or the other runtimes' planned memory over the GPU's), disk above
DISK_USED_PERCENT, both over AGENT_MINUTES; none for a single server (no fleet to watch)."""

from __future__ import annotations

import pytest

from inferstack.components.observability import (
    AGENT_MINUTES,
    DISK_USED_PERCENT,
    AlarmKind,
    agent_alarm_rules,
)
from tests.sample_plans import sample_plan


def _thresholds(variant: str) -> dict[AlarmKind, float]:
    rules = agent_alarm_rules(sample_plan("aws", variant, "production"))  # type: ignore[arg-type]
    assert all(rule.minutes == AGENT_MINUTES and rule.summary for rule in rules)
    return {rule.kind: rule.threshold for rule in rules}


def test_a_vllm_gpu_fleet_alarms_halfway_between_its_memory_utilization_and_full() -> None:
    # sample gpu-llm: vLLM with gpu_memory_utilization 0.9 -> 90 % planned, 95 % alarms
    assert _thresholds("gpu-llm") == {AlarmKind.GPU_MEMORY: 95.0, AlarmKind.DISK: DISK_USED_PERCENT}


def test_another_runtimes_gpu_fleet_alarms_halfway_between_its_planned_memory_and_full() -> None:
    plan = sample_plan("aws", "gpu-encoder", "production")
    planned = plan.memory.total_gib / plan.memory.capacity_gib * 100  # Triton: (0.41 + 4) GiB of 24 GiB
    assert planned == pytest.approx(18.375)
    assert _thresholds("gpu-encoder") == {AlarmKind.GPU_MEMORY: round(planned + (100 - planned) / 2, 1),
                                          AlarmKind.DISK: DISK_USED_PERCENT}
    assert _thresholds("gpu-encoder")[AlarmKind.GPU_MEMORY] == 59.2


def test_a_cpu_fleet_has_a_disk_alarm_only() -> None:
    assert _thresholds("cpu-llm") == {AlarmKind.DISK: 85.0}


def test_a_single_server_has_no_agent_alarms() -> None:
    assert agent_alarm_rules(sample_plan("aws", "gpu-llm", "internal")) == []
    assert agent_alarm_rules(sample_plan("aws", "cpu-llm", "validation")) == []
