"""What a deployment's alarms watch, and at what thresholds: cloud-neutral, derived from the plan.

Each cloud maps these rules onto its own metrics in its backend (`create_alarms`): the load balancer's view of the
fleet (unhealthy servers, latency, server errors, healthy servers at the group's ceiling), which every cloud
publishes without an agent. The thresholds come from the plan: the latency objective is the plan's SLO
(`plan.slo.latency_p95_ms`), the ceiling its fleet's `max_replicas`, the error budget a share of its requests.

The dashboard (`dashboard_panels`) graphs the same metrics, the plan's objective and the fleet's bounds drawn as lines;
each cloud draws it in its backend (`create_dashboard`), or states why it cannot (`dashboard_gap`).

GPU memory and disk alarms need the servers' own metrics, shipped by the cloud's agent (`bootstrap.telemetry`):
`agent_alarm_rules`, for the backends whose `create_telemetry` installs one. A server that sends no such metric (its
agent failed) is a problem too: those alarms treat missing data as breaching where the cloud lets them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from inferstack.plan import DeploymentPlan

# The share of answers that may fail (HTTP 5xx from the servers) before the alarm fires. An assumption, not a
# measured figure: 5 % over the window is far outside a healthy server's error rate and inside what a user notices.
ERROR_RATE_PERCENT = 5.0
# How long a condition must hold before its alarm fires. A server is out of the load balancer after a minute of failed
# health checks (aws/load_balancer.py: 4 x 15 s); five minutes keeps a single slow check from paging anyone.
UNHEALTHY_MINUTES = 5
LATENCY_MINUTES = 10
ERROR_RATE_MINUTES = 5
# The fleet sits at its ceiling for a quarter of an hour: the autoscaler cannot add servers and the load still grows.
CEILING_MINUTES = 15
# A disk this full cannot take a new model revision beside the running one, and logs stop being written soon. An
# assumption, stated as such.
DISK_USED_PERCENT = 85.0
AGENT_MINUTES = 10
# How long the servers' own logs (runtime, gateway, boot) are kept in the cloud's log service. The load balancer's
# access logs are kept a year (each backend); these are for debugging a server, and a quarter covers an incident's
# review. An assumption, stated as such.
LOG_RETENTION_DAYS = 90


class AlarmKind(str, Enum):
    """The conditions every fleet is watched for."""

    UNHEALTHY_SERVERS = "unhealthy-servers"
    """A server behind the load balancer fails its health check."""
    LATENCY = "latency"
    """Requests take longer than the plan's end-to-end latency objective."""
    ERROR_RATE = "error-rate"
    """Too many answers from the servers are HTTP 5xx."""
    FLEET_AT_CEILING = "fleet-at-ceiling"
    """As many healthy servers as the fleet may have: it cannot grow further."""
    GPU_MEMORY = "gpu-memory"
    """A GPU's memory is fuller than the plan puts on it, halfway to full (the agent's metric)."""
    DISK = "disk"
    """A server's root file system is nearly full (the agent's metric)."""


@dataclass(frozen=True)
class AlarmRule:
    """One condition, with the threshold the plan implies, in the units named by its kind."""

    kind: AlarmKind
    threshold: float
    """UNHEALTHY_SERVERS: servers (fires above it); LATENCY: milliseconds; ERROR_RATE: percent of requests;
    FLEET_AT_CEILING: servers (fires at or above it); GPU_MEMORY and DISK: percent used (fires above it)."""
    minutes: int
    """How long the condition holds before the alarm fires."""
    summary: str
    """One sentence for the alarm's description: what it means and what to do."""


def alarm_rules(plan: DeploymentPlan) -> list[AlarmRule]:
    """The alarms a fleet's plan calls for (none for a single server: it has no load balancer to watch it)."""
    fleet = plan.fleet
    if fleet is None:
        return []
    rules = [AlarmRule(AlarmKind.UNHEALTHY_SERVERS, 0, UNHEALTHY_MINUTES,
                       "a server fails the load balancer's health check: look at its boot and runtime logs; the "
                       "group replaces it after the health-check grace")]
    latency = plan.slo.latency_p95_ms if plan.slo is not None else None
    if latency is not None:
        rules.append(AlarmRule(AlarmKind.LATENCY, latency, LATENCY_MINUTES,
                               f"requests take longer than the plan's end-to-end objective of {latency:g} ms (its "
                               "SLO): the fleet is short of capacity, or a server is slow"))
    rules.append(AlarmRule(AlarmKind.ERROR_RATE, ERROR_RATE_PERCENT, ERROR_RATE_MINUTES,
                           f"more than {ERROR_RATE_PERCENT:g} % of answers are server errors (HTTP 5xx): look at the "
                           "runtime and gateway logs"))
    rules.append(AlarmRule(AlarmKind.FLEET_AT_CEILING, fleet.max_replicas, CEILING_MINUTES,
                           f"the fleet runs its ceiling of {fleet.max_replicas} healthy servers: it cannot grow, so "
                           "more load breaks the SLO; raise scaling.max_replicas (and the GPU quota) or shed load"))
    return rules


def planned_gpu_memory_percent(plan: DeploymentPlan) -> float:
    """The share of each GPU's memory the plan puts to use: what vLLM takes up front (gpu_memory_utilization), or
    what the other runtimes hold (weights, overhead and the planned KV cache over the GPU's capacity)."""
    if plan.serving.gpu_memory_utilization is not None:
        return plan.serving.gpu_memory_utilization * 100
    return min(100.0, plan.memory.total_gib / plan.memory.capacity_gib * 100)


def agent_alarm_rules(plan: DeploymentPlan) -> list[AlarmRule]:
    """The alarms on the servers' own metrics (GPU memory, disk), for a fleet whose servers run the cloud's agent."""
    if plan.fleet is None:
        return []
    rules = []
    if plan.device == "gpu":
        planned = planned_gpu_memory_percent(plan)
        threshold = round(planned + (100 - planned) / 2, 1)
        rules.append(AlarmRule(AlarmKind.GPU_MEMORY, threshold, AGENT_MINUTES,
                               f"a GPU's memory is over {threshold:g} % used, where the plan puts {planned:.0f} %: "
                               "something beyond the planned runtime holds GPU memory (another process, a leak); "
                               "the runtime may fail to allocate and answer errors"))
    rules.append(AlarmRule(AlarmKind.DISK, DISK_USED_PERCENT, AGENT_MINUTES,
                           f"a server's root file system is over {DISK_USED_PERCENT:g} % full: a new model revision "
                           "may not fit beside the running one; look at the logs and the model directory"))
    return rules


def errors_per_s(plan: DeploymentPlan, rule: AlarmRule) -> float:
    """An ERROR_RATE rule as server errors per second at the plan's peak load, for clouds whose alarms compare one
    metric with a number and cannot divide two metrics."""
    return round(plan.performance.load_requests_per_s * rule.threshold / 100, 4)


#### Dashboard ####


class PanelKind(str, Enum):
    """The graphs every fleet's dashboard shows, on the same load balancer metrics its alarms watch."""

    REQUESTS = "requests"
    """Requests the load balancer answered, per minute."""
    LATENCY = "latency"
    """p50 and p95 of the servers' response time, with the plan's objective as a line."""
    SERVER_ERRORS = "server-errors"
    """HTTP 5xx answers from the servers, per minute."""
    SERVERS = "servers"
    """Healthy and unhealthy servers behind the load balancer (or the group's size), with the fleet's floor and
    ceiling as lines."""


@dataclass(frozen=True)
class Panel:
    """One graph of the dashboard, with the horizontal lines the plan draws on it (label, value in the kind's units:
    LATENCY milliseconds, SERVERS servers)."""

    kind: PanelKind
    title: str
    lines: tuple[tuple[str, float], ...] = ()


def dashboard_panels(plan: DeploymentPlan) -> list[Panel]:
    """The dashboard a fleet's plan calls for (none for a single server: it has no load balancer to graph)."""
    fleet = plan.fleet
    if fleet is None:
        return []
    latency = plan.slo.latency_p95_ms if plan.slo is not None else None
    return [
        Panel(PanelKind.REQUESTS, "Requests per minute"),
        Panel(PanelKind.LATENCY, "Response time p50 / p95",
              (("SLO p95", latency),) if latency is not None else ()),
        Panel(PanelKind.SERVER_ERRORS, "Server errors (HTTP 5xx) per minute"),
        Panel(PanelKind.SERVERS, "Servers", (("floor", fleet.min_replicas), ("ceiling", fleet.max_replicas))),
    ]
