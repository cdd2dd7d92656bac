"""Sizing: workload spec → priced, explained deployment plans. Pure Python; never imports Pulumi."""

from inferstack.sizing.planner import plan_workload

__all__ = ["plan_workload"]
