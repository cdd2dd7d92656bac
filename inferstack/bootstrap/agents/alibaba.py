"""Alibaba Cloud's agents: the CloudMonitor agent (metrics) and Logtail (logs), `files/agent_alibaba.sh`.

The CloudMonitor agent needs no configuration from the server: it is installed by Alibaba on new ECS instances
(CloudMonitor's account setting EnableInstallAgentNewECS; verify it is on) and reports the disk's and, on a GPU
instance, the GPUs' metrics to namespace `acs_ecs_dashboard` (`target.metrics`) on its own. It has no input for a
Prometheus endpoint (`sources.metrics_urls`): the runtime's metrics stay on the server (docs/deploy-alibaba.md).

Logtail is configured on the SLS side (the backend's logstore, machine group and Logtail configurations: what to
collect is `sources`' units and files); the server only names itself to the machine group, by the user-defined
identity `machine_group_identity(target.logs)` in /etc/ilogtail/user_defined_id (SLS, "Create a custom
identifier-based machine group": one identity per line of that file).
"""

from __future__ import annotations

from inferstack.bootstrap.render import shipped_copy
from inferstack.bootstrap.telemetry import AGENT_SCRIPT, Sources, TelemetryTarget
from inferstack.plan import DeploymentPlan

LOGTAIL_IDENTITY_FILE = "/etc/ilogtail/user_defined_id"


def machine_group_identity(logs: str) -> str:
    """The machine-group identity of a deployment's servers: its SLS project (`TelemetryTarget.logs` is
    `project/logstore`), unique to the deployment, so no other deployment's servers join its machine group."""
    project, _, logstore = logs.partition("/")
    if not project or not logstore:
        raise ValueError(f"an Alibaba log destination is project/logstore, not {logs!r}")
    return project


def agent_files(plan: DeploymentPlan, sources: Sources, target: TelemetryTarget) -> list[tuple[str, str, str]]:
    return [(AGENT_SCRIPT, shipped_copy("agent_alibaba.sh"), "0755"),
            (LOGTAIL_IDENTITY_FILE, machine_group_identity(target.log_destination()) + "\n", "0644")]
