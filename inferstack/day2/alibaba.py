"""Alibaba Cloud: not asked yet. `status` would read the ESS scaling groups and their instances, the ALB server
groups' health and the listener's canary weights; `logs`, the stack's SLS logstore. Their SDKs are what is missing
(UNAVAILABLE); the cloud module's shape is aws.py's."""

from __future__ import annotations

UNAVAILABLE: str | None = (
    "no extra of inferstack installs the ESS, ALB or SLS SDKs (alibabacloud-ess20220222 is a test dependency only; the "
    "refresh extra's ECS SDK reads prices). Meanwhile: the Auto Scaling console (the scaling group and its "
    "instances), the ALB console (server group health, listener weights) and the SLS console (the stack's logstore "
    "server-logs) (docs/day2.md)")
