"""The cloud's monitoring agent on each server: what it collects, and where it sends it (pure, no Pulumi).

Every server runs its cloud's own agent (the CloudWatch agent, Google's Ops Agent, Alibaba's CloudMonitor agent and
Logtail; on Huawei, where Huawei's agents are a stated gap (docs/deploy-huawei.md), a GPU fleet's servers run
inferstack's own request-rate reporter, `files/huawei_metrics.py`), installed and configured by
`inferstack-agent.service`, a unit of its own that boot.sh starts once its driver phase is done (its last reboot
point, so a reboot never cuts the agent's package install) and does not wait for: the agent never delays a server's
readiness, and a server whose agent cannot be installed still serves (its unit fails and says why; on AWS the
fleet's agent alarms treat a group that sends no data as breaching).

What every cloud's agent collects is decided here, once (`sources`): the runtime's Prometheus metrics on loopback,
the GPUs' memory and utilisation on a GPU server, the root and model disks' use, and the logs of the runtime, the
gateway (its access log included) and the boot. Where they go is the cloud's (`TelemetryTarget`, made by the
backend's `create_telemetry`); how each agent is installed and configured is in `inferstack.bootstrap.agents.<cloud>`
(its `agent_files`), with the install script `files/agent_<cloud>.sh` it ships as AGENT_SCRIPT.

Nothing the agent reads is reachable from outside the server: every metrics endpoint listens on 127.0.0.1.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from inferstack.bootstrap.gateway import ACCESS_LOG
from inferstack.bootstrap.runtimes import RuntimeProcess, resolve_mode, runtime_processes
from inferstack.clouds import Cloud
from inferstack.plan import DeploymentPlan
from inferstack.runtimes import RUNTIME_FACTS, Mode

AGENT_UNIT = "inferstack-agent"
"""The oneshot unit that installs and configures the cloud's agent (`agent_unit`); boot.sh starts it, never waits."""
AGENT_SCRIPT = "/usr/local/lib/inferstack/agent.sh"
"""Where the cloud's install script (`files/agent_<cloud>.sh`) is written; the agent unit runs it."""
BOOT_LOG = "/var/log/inferstack/boot.log"
"""boot.sh's own log (`LOG_DIR/boot.log`), one line per phase and the machine-readable phase records."""

# A destination in any cloud's terms (log group names, project/logstore pairs, LTS ids, metric namespaces): no
# space, quote, shell or unit specifier character; it reaches the agent's configuration file, never a shell.
DESTINATION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/:-]{0,254}$"


class TelemetryTarget(BaseModel):
    """Where one deployment's servers send their logs and metrics, in their cloud's terms."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    logs: str | None = Field(pattern=DESTINATION_PATTERN,
                             description="Where the logs go: an AWS CloudWatch Logs group name, a Google Cloud log "
                                         "name prefix, an Alibaba SLS `project/logstore`; None: no log shipping "
                                         "(Huawei, whose LTS agent is a stated gap).")
    metrics: str = Field(pattern=DESTINATION_PATTERN,
                         description="Where the metrics go: the CloudWatch namespace, the Prometheus job name the "
                                     "Ops Agent scrapes the runtime under (its own metrics are agent.googleapis.com), "
                                     "the CloudMonitor namespace, the Cloud Eye custom namespace the scaling alarms "
                                     "read (Huawei).")
    metrics_dimension: str | None = Field(
        default=None, pattern=DESTINATION_PATTERN,
        description="Huawei: the value of the `group` dimension each server reports its requests per second under "
                    "(its AS group's name, known before the group exists), the series its scaling alarms average.")

    def log_destination(self) -> str:
        """`logs`, for the agents that ship logs (every cloud's but Huawei's)."""
        if self.logs is None:
            raise ValueError("this deployment's servers ship no logs")
        return self.logs


@dataclass(frozen=True)
class Sources:
    """What the agent collects on a server of this plan (every cloud's agent collects the same)."""

    metrics_urls: tuple[str, ...]
    """Prometheus endpoints on loopback (the runtime's processes; empty for a runtime without one)."""
    gpu: bool
    """Collect the GPUs' memory and utilisation (a GPU server)."""
    disks: tuple[str, ...]
    """Mount points whose use is collected (the root; the model's disk is under it or a mount of its own)."""
    units: tuple[str, ...]
    """systemd units whose journal is shipped: the runtime's processes, the gateway, the boot."""
    files: tuple[str, ...]
    """Log files shipped: the gateway's access log and the boot log."""


def sources(plan: DeploymentPlan, mode: Mode | None = None) -> Sources:
    """What the agent collects on a server of `plan` installed in `mode` (None: as `install_mode: auto` installs it)."""
    processes = runtime_processes(plan)
    urls = metrics_urls(plan, processes, mode or resolve_mode(plan, "auto"))
    return Sources(metrics_urls=urls, gpu=plan.device == "gpu", disks=("/",),
                   units=(*(p.name for p in processes), "inferstack-gateway", "inferstack-boot"),
                   files=(ACCESS_LOG, BOOT_LOG))


def metrics_urls(plan: DeploymentPlan, processes: list[RuntimeProcess], mode: Mode) -> tuple[str, ...]:
    """The runtime's Prometheus endpoints on loopback: `/metrics` on each process's API port (vLLM; llama-server
    with --metrics), or on the runtime's own metrics port (Triton); none from a native server without one
    (llama-cpp-python's)."""
    facts = RUNTIME_FACTS[plan.serving.runtime]
    if mode == "native" and facts.native is not None and not facts.native.serves_metrics:
        return ()
    if facts.metrics_port is None:
        return tuple(f"http://127.0.0.1:{p.port}/metrics" for p in processes)
    if plan.serving.metrics_port:
        return (f"http://127.0.0.1:{plan.serving.metrics_port}/metrics",)
    return ()


def agent_unit() -> str:
    """The unit that installs and configures the agent: oneshot, retried on failure, never part of the boot's path."""
    return f"""\
[Unit]
Description=inferstack: install and configure the cloud's monitoring agent ({AGENT_SCRIPT})
Wants=network-online.target
After=network-online.target
StartLimitIntervalSec=3600
StartLimitBurst=5

[Service]
Type=oneshot
RemainAfterExit=yes
# A oneshot unit has no start timeout by default: a stalled install ends here, and Restart= tries again.
TimeoutStartSec=1800
ExecStart=/bin/bash {AGENT_SCRIPT}
Restart=on-failure
RestartSec=60
"""


def agent_files(plan: DeploymentPlan, cloud: Cloud, target: TelemetryTarget,
                mode: Mode) -> list[tuple[str, str, str]]:
    """The files (path, content, mode) that install and configure `cloud`'s agent for `plan` installed in `mode` (its
    unit aside)."""
    module = importlib.import_module(f"inferstack.bootstrap.agents.{cloud}")
    files: list[tuple[str, str, str]] = module.agent_files(plan, sources(plan, mode), target)
    return files


__all__ = ["AGENT_SCRIPT", "AGENT_UNIT", "Sources", "TelemetryTarget", "agent_files", "sources"]
