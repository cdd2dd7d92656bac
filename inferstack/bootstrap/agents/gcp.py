"""Google Cloud's Ops Agent on a Compute Engine server: its configuration (config.yaml) and its install script
(`files/agent_gcp.sh`), pure.

What it ships (`telemetry.sources`), as the Ops Agent's configuration reference describes ("Configure the Ops
Agent"; field names from confgenerator/ in GoogleCloudPlatform/ops-agent):
- metrics: the `hostmetrics` receiver every minute, which writes agent.googleapis.com/disk/percent_used (labels
  device, state) and, on a server with an NVIDIA GPU, the NVML metrics agent.googleapis.com/gpu/memory/bytes_used
  (labels gpu_number, model, uuid, memory_state used|free) and gpu/utilization (apps/hostmetrics.go;
  integration_test/third_party_apps_test/applications/nvml/metadata.yaml); the runtime's Prometheus metrics,
  scraped on loopback by a `prometheus` receiver under the job name `target.metrics`, land in Managed Service for
  Prometheus (prometheus.googleapis.com/...).
- logs: the access and boot logs (`files` receivers) and the journal of the runtime, gateway and boot units (the
  `systemd_journald` receiver, which reads the whole journal: an `exclude_logs` processor keeps those units only).
  Each receiver's id is its log name (`<target.logs>_access`, `_boot`, `_journal`), which the deployment's log sink
  routes to its log bucket (components/gcp/observability.py create_telemetry). The agent's default syslog pipeline is
  turned off.
"""

from __future__ import annotations

from typing import Any

import yaml

from inferstack.bootstrap.render import shipped_copy
from inferstack.bootstrap.telemetry import AGENT_SCRIPT, Sources, TelemetryTarget
from inferstack.plan import DeploymentPlan

CONFIG_PATH = "/etc/inferstack/ops-agent.yaml"
"""The install script copies it to /etc/google-cloud-ops-agent/config.yaml once the package is installed."""
INTERVAL = "60s"
LOG_SOURCES = ("access", "boot", "journal")
"""The log names, after `target.logs` and an underscore (`log_names`)."""


def agent_files(plan: DeploymentPlan, sources: Sources, target: TelemetryTarget) -> list[tuple[str, str, str]]:
    """The install script and the agent's configuration."""
    return [(AGENT_SCRIPT, shipped_copy("agent_gcp.sh"), "0755"),
            (CONFIG_PATH, yaml.safe_dump(agent_config(sources, target), sort_keys=False), "0644")]


def log_names(target: TelemetryTarget) -> list[str]:
    """The log names the agent writes (its receivers' ids), which the log sink routes
    (components/gcp/observability.py)."""
    return [f"{target.log_destination()}_{source}" for source in LOG_SOURCES]


def agent_config(sources: Sources, target: TelemetryTarget) -> dict[str, Any]:
    """The Ops Agent's config.yaml: merged by the agent over its built-in configuration."""
    access, boot, journal = log_names(target)
    access_log, boot_log = sources.files
    units = "|".join(unit.replace(".", r"\.") for unit in sources.units)
    ours = f"^({units})\\.service$"  # one backslash before the dot in the config (below)
    prefix = target.log_destination()
    logging = {
        "receivers": {access: {"type": "files", "include_paths": [access_log]},
                      boot: {"type": "files", "include_paths": [boot_log]},
                      journal: {"type": "systemd_journald"}},
        # The journal's fields keep their names (fluent-bit's systemd input, Strip_Underscores off, as confgenerator
        # configures it). The filter grammar (confgenerator/filter/internal/filter.bnf) has `NOT` and `=~`, and the
        # agent hands a regex's text between the quotes to the regex engine as written, escapes and all (ast.go
        # NewRestriction: "preserve the original escaped text for the regex engine"): one backslash before the dot.
        # `NOT (… =~ …)`, not `!~`: a line without _SYSTEMD_UNIT (the kernel's) has no value to match, so `=~` is false
        # and the line excluded, where fluent-bit's Key_value_does_not_match (`!~`) is false too and would keep it.
        # systemd's own lines about our units (exits, restarts, the OOM killer) come from init.scope with UNIT= ours.
        "processors": {f"{prefix}_units": {
            "type": "exclude_logs",
            "match_any": [f'NOT (jsonPayload._SYSTEMD_UNIT =~ "{ours}" OR jsonPayload.UNIT =~ "{ours}")']}},
        "service": {"pipelines": {
            "default_pipeline": {"receivers": []},  # the agent's own syslog collection: not ours to ship
            f"{prefix}_files": {"receivers": [access, boot]},
            f"{prefix}_journal": {"receivers": [journal], "processors": [f"{prefix}_units"]}}},
    }
    metrics: dict[str, Any] = {
        # The built-in receiver's id and type, restated: a receiver or pipeline of a built-in's name replaces it
        # (ops-agent confgenerator/confmerger.go), so the built-in pipeline's empty exclude_metrics goes with it.
        "receivers": {"hostmetrics": {"type": "hostmetrics", "collection_interval": INTERVAL}},
        "service": {"pipelines": {"default_pipeline": {"receivers": ["hostmetrics"]}}},
    }
    if sources.metrics_urls:
        targets = [url.removeprefix("http://").split("/", 1)[0] for url in sources.metrics_urls]
        metrics["receivers"][f"{prefix}_runtime"] = {"type": "prometheus", "config": {"scrape_configs": [{
            "job_name": target.metrics, "scrape_interval": INTERVAL, "metrics_path": "/metrics",
            "static_configs": [{"targets": targets}]}]}}
        metrics["service"]["pipelines"][f"{prefix}_runtime"] = {"receivers": [f"{prefix}_runtime"]}
    return {"logging": logging, "metrics": metrics}
