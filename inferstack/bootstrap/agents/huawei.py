"""Huawei Cloud: the request-rate reporter of a GPU fleet's servers (`files/huawei_metrics.py`) and its install script
(`files/agent_huawei.sh`), pure.

Huawei's Auto Scaling scales only on Cloud Eye alarms; a GPU fleet's alarms average the requests per second its
servers report into a custom namespace (`target.metrics`), dimension `group` = the AS group's name
(`target.metrics_dimension`; components/huawei/fleet.py `_request_scaling`, observability.py `create_telemetry`).
Every server runs the reporter, a unit of its own (`REPORTER_UNIT`), which the install script enables and (re)starts.
Huawei's own agents (Cloud Eye's host agent, LTS's ICAgent) are not installed: their metrics and logs are a stated gap
(docs/deploy-huawei.md), and nothing else of `sources` is shipped.

The reporter runs as root, sandboxed: the agency's temporary keys come from the metadata server, which the boot's
metadata firewall opens to root alone (boot.sh, phase metadata_firewall: `-m owner ! --uid-owner 0 -j REJECT`), so a
DynamicUser= or the gateway's user would be refused. Everything else of root's is taken away: no capability (so no
file it does not own is readable beyond its mode bits), a read-only file system, no devices, no kernel or control-group
settings, no secrets directory, native system calls of a service only. It keeps the network (Cloud Eye's public
endpoint has no fixed address to allow). The access log it reads is nginx's, written by its master (root), 0644.
"""

from __future__ import annotations

import json

from inferstack.bootstrap.gateway import ACCESS_LOG
from inferstack.bootstrap.render import CONFIG_DIR, LIB_DIR, SECRETS_DIR, UNIT_DIR, shipped_copy, unit_file
from inferstack.bootstrap.telemetry import AGENT_SCRIPT, Sources, TelemetryTarget
from inferstack.plan import DeploymentPlan

PROGRAM = "huawei_metrics.py"
PROGRAM_PATH = f"{LIB_DIR}/{PROGRAM}"
CONFIG_PATH = f"{CONFIG_DIR}/huawei-metrics.json"
REPORTER_UNIT = "inferstack-metrics"
"""The reporter's unit (`reporter_unit`); the install script enables and starts it (agent_huawei.sh REPORTER_UNIT)."""
READY_FILE = "/var/lib/inferstack/ready"
"""Written by boot.sh once the model answers through the gateway (phase model_load): no report before it."""
CONFIG_EXIT_STATUS = 2
"""The reporter's exit status on a bad configuration (huawei_metrics.CONFIG_EXIT_STATUS): not restarted."""


def agent_files(plan: DeploymentPlan, sources: Sources, target: TelemetryTarget) -> list[tuple[str, str, str]]:
    """The install script, the reporter, its configuration and its unit. `target` must name the AS group
    (`metrics_dimension`): Huawei's servers report a fleet's request rate and nothing else."""
    if target.metrics_dimension is None:
        raise ValueError("a Huawei telemetry target reports a fleet's requests per second under its AS group's name: "
                         f"give metrics_dimension (target {target!r}), or no telemetry target for a single server")
    config = {"namespace": target.metrics, "group": target.metrics_dimension, "region": plan.region,
              "health_path": plan.serving.health_path, "access_log": ACCESS_LOG, "ready_file": READY_FILE}
    return [(AGENT_SCRIPT, shipped_copy("agent_huawei.sh"), "0755"),
            (PROGRAM_PATH, shipped_copy(PROGRAM), "0644"),
            (CONFIG_PATH, json.dumps(config, indent=2, sort_keys=True) + "\n", "0644"),
            (f"{UNIT_DIR}/{REPORTER_UNIT}.service", reporter_unit(), "0644")]


def reporter_unit() -> str:
    """The reporter's unit: as root (the metadata server), with nothing else of root's; not restarted on a bad
    configuration, which it refuses at once."""
    return unit_file({
        "Unit": [("Description", "inferstack request rate: the gateway's requests per second to Cloud Eye, which "
                                 "the fleet's scaling alarms read"),
                 ("Wants", "network-online.target"), ("After", "network-online.target")],
        "Service": [("Type", "exec"), ("ExecStart", f"/usr/bin/python3 {PROGRAM_PATH} {CONFIG_PATH}"),
                    ("Restart", "on-failure"), ("RestartSec", "10"),
                    ("RestartPreventExitStatus", str(CONFIG_EXIT_STATUS)),
                    ("NoNewPrivileges", "yes"), ("CapabilityBoundingSet", ""), ("ProtectSystem", "strict"),
                    ("ProtectHome", "yes"), ("PrivateTmp", "yes"), ("PrivateDevices", "yes"),
                    ("ProtectKernelTunables", "yes"), ("ProtectKernelModules", "yes"), ("ProtectKernelLogs", "yes"),
                    ("ProtectControlGroups", "yes"), ("ProtectClock", "yes"), ("ProtectHostname", "yes"),
                    ("RestrictSUIDSGID", "yes"), ("RestrictNamespaces", "yes"), ("RestrictRealtime", "yes"),
                    ("LockPersonality", "yes"), ("MemoryDenyWriteExecute", "yes"),
                    ("SystemCallArchitectures", "native"), ("SystemCallFilter", "@system-service"),
                    ("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6"),
                    ("InaccessiblePaths", f"-{SECRETS_DIR}"), ("UMask", "0077"),
                    ("SyslogIdentifier", REPORTER_UNIT)],
        "Install": [("WantedBy", "multi-user.target")]})
