"""Interruption: a server that may run on spot capacity drains itself on its cloud's interruption notice (pure).

A plan whose servers may be interrupted (`DeploymentPlan.interruptible`: all on spot, or those above production's
on-demand floor) gets `inferstack-interruption.service` on every server, on each cloud that posts a notice in its
instance metadata: `files/interruption_watch.py` reads it every 5 s, and on a notice creates `DRAIN_FLAG`. While the
flag exists the gateway's health path answers 503 (`gateway._health_location`): the load balancer takes the server
out and sends it nothing new, and every request already in flight is served to its end. Which clouds post a notice,
and why the others cannot be watched, is the watcher's own data (`NOTICE_PATHS`, `UNWATCHED`): it runs on the server
and cannot import inferstack, so the facts live there once and are read from here.
"""

from __future__ import annotations

from inferstack.bootstrap.files.interruption_watch import NOTICE_PATHS, UNWATCHED
from inferstack.clouds import Cloud
from inferstack.plan import DeploymentPlan

UNIT = "inferstack-interruption"
"""The watcher's unit; boot.sh starts it with the gateway when the bundle has it."""
WATCHER = "interruption_watch.py"
"""The watcher's file in files/, shipped beside cloud_access.py."""
DRAIN_DIR = "/run/inferstack-drain"
"""Root's (mode 0755, the unit's RuntimeDirectory=): the gateway's workers may see the flag, only root may make it.
Under /run, so a reboot lifts the drain; the watcher lifts it too once the notice is gone."""
DRAIN_FLAG = f"{DRAIN_DIR}/draining"
"""While this file exists the gateway's health path answers 503. Fixed here: no plan or option value names it."""


def watched(plan: DeploymentPlan) -> bool:
    """Whether the plan's servers run the watcher: they may be interrupted, and their cloud posts a notice."""
    return plan.interruptible and plan.cloud in NOTICE_PATHS


def unwatched_reason(cloud: Cloud) -> str | None:
    """Why `cloud`'s servers cannot see an interruption coming (None: they can)."""
    return UNWATCHED.get(cloud)


__all__ = ["DRAIN_DIR", "DRAIN_FLAG", "UNIT", "WATCHER", "unwatched_reason", "watched"]
