"""The Amazon CloudWatch agent on an EC2 server: its configuration (JSON, and a Prometheus scrape file) and its install
script (`files/agent_aws.sh`), pure.

What it ships (`telemetry.sources`), all to the deployment's log group and metric namespace (`TelemetryTarget`):
- metrics, every minute, under `target.metrics`, each with the server's AutoScalingGroupName and InstanceId and once
  more aggregated by AutoScalingGroupName alone (the fleet's alarms read that series): `disk_used_percent` of "/", and
  on a GPU server `nvidia_smi_memory_used` / `nvidia_smi_memory_total` (MiB; the alarm divides them by metric math)
  and `nvidia_smi_utilization_gpu`. Not `utilization_memory`: that is the share of time the memory was read or
  written (nvidia-smi's "utilization.memory"), not how full it is.
- the runtime's Prometheus metrics, scraped on loopback by the agent's Prometheus support on EC2 ("Set up and
  configure Prometheus metrics collection on Amazon EC2 instances", CloudWatch User Guide): written to the log group
  as embedded metric format events; the few series the runtime's `key_metrics` name become metrics in
  `target.metrics`.
- logs: the gateway's access log and the boot log (files), and the journals of the runtime, gateway and boot units,
  which the agent reads itself from 1.300070.0 (`logs.logs_collected.journald`, RELEASE_NOTES "Add journald log
  collection support"; schema `logsJournaldDefinition`), one stream per server and source.

The agent runs as root: the boot's metadata firewall lets only root reach the instance metadata service, where the
agent takes its credentials and instance id (boot.sh phase_metadata_firewall).
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from inferstack.bootstrap.render import shipped_copy
from inferstack.bootstrap.telemetry import AGENT_SCRIPT, Sources, TelemetryTarget
from inferstack.plan import DeploymentPlan
from inferstack.runtimes import RUNTIME_FACTS, RuntimeFacts

CONFIG_PATH = "/etc/inferstack/cloudwatch-agent.json"
"""Read by the install script (`amazon-cloudwatch-agent-ctl -a fetch-config -c file:CONFIG_PATH`)."""
PROMETHEUS_CONFIG_PATH = "/etc/inferstack/cloudwatch-agent-prometheus.yaml"
INTERVAL_S = 60
SCRAPE_JOB = "inferstack-runtime"
GROUP_DIMENSION = "AutoScalingGroupName"
"""The dimension the fleet's alarms address (the agent reads it from the instance's aws:autoscaling:groupName tag with
ec2:DescribeTags: plugins/processors/ec2tagger/ec2tagger.go)."""
GPU_MEASUREMENTS = ("memory_used", "memory_total", "utilization_gpu")
"""nvidia_gpu measurements (MiB, MiB, percent): metric names are `nvidia_smi_<measurement>` (CloudWatch User Guide,
"Collect NVIDIA GPU metrics"; plugins/inputs/nvidia_smi/schema_v12/parser.go)."""


def agent_files(plan: DeploymentPlan, sources: Sources, target: TelemetryTarget) -> list[tuple[str, str, str]]:
    """The install script, the agent's configuration and, with a Prometheus endpoint, its scrape configuration."""
    files = [(AGENT_SCRIPT, shipped_copy("agent_aws.sh"), "0755"),
             (CONFIG_PATH, json.dumps(agent_config(plan, sources, target), indent=2) + "\n", "0644")]
    if sources.metrics_urls:
        files.append((PROMETHEUS_CONFIG_PATH, yaml.safe_dump(prometheus_config(sources), sort_keys=False), "0644"))
    return files


def agent_config(plan: DeploymentPlan, sources: Sources, target: TelemetryTarget) -> dict[str, Any]:
    """The CloudWatch agent's JSON configuration (schema: translator/config/schema.json in the agent's repository)."""
    collected: dict[str, Any] = {"disk": {"measurement": ["used_percent"], "resources": list(sources.disks),
                                          "drop_device": True}}
    if sources.gpu:
        collected["nvidia_gpu"] = {"measurement": list(GPU_MEASUREMENTS)}
    stream = "{instance_id}"  # the agent's placeholder for the server's instance id
    logs: dict[str, Any] = {
        "logs_collected": {
            "files": {"collect_list": [
                {"file_path": path, "log_group_name": target.log_destination(),
                 "log_stream_name": f"{stream}/{path.rsplit('/', 1)[-1]}"} for path in sources.files]},
            "journald": {"collect_list": [
                {"log_group_name": target.log_destination(), "log_stream_name": f"{stream}/{unit}",
                 "units": [f"{unit}.service"]}
                for unit in sources.units]},
        },
    }
    if sources.metrics_urls:
        logs["metrics_collected"] = {"prometheus": {
            "log_group_name": target.log_destination(), "prometheus_config_path": PROMETHEUS_CONFIG_PATH,
            "emf_processor": {"metric_namespace": target.metrics, "metric_declaration": [{
                # One series per deployment (its own namespace) with every server's samples: the scrape target is
                # loopback on every server, so no label tells the servers apart.
                "source_labels": ["job"], "label_matcher": f"^{SCRAPE_JOB}$", "dimensions": [["job"]],
                "metric_selectors": metric_selectors(RUNTIME_FACTS[plan.serving.runtime])}]}}}
    return {
        "agent": {"metrics_collection_interval": INTERVAL_S, "run_as_user": "root"},
        "metrics": {
            "namespace": target.metrics,
            "append_dimensions": {GROUP_DIMENSION: "${aws:AutoScalingGroupName}", "InstanceId": "${aws:InstanceId}"},
            "aggregation_dimensions": [[GROUP_DIMENSION]],
            "metrics_collected": collected,
        },
        "logs": logs,
    }


def metric_selectors(runtime: RuntimeFacts) -> list[str]:
    """The EMF metric selectors that keep the runtime's key metrics (`RuntimeFacts.key_metrics`), one anchored pattern
    per name: only those series become CloudWatch metrics (each one is billed)."""
    # The ":" stays in the CloudWatch metric name: the agent's Prometheus receiver takes the name from __name__
    # unchanged and the EMF exporter matches metric_selectors against it and writes it as is (agent v1.300071.0:
    # plugins/inputs/prometheus/metrics_receiver.go, internal/metric/metric.go; awsemfexporter metric_declaration.go).
    return [f"^{re.escape(name)}$" for name in runtime.key_metrics]


def prometheus_config(sources: Sources) -> dict[str, Any]:
    """The standard Prometheus scrape configuration the agent reads: the runtime's loopback endpoints only."""
    targets = [url.removeprefix("http://").split("/", 1)[0] for url in sources.metrics_urls]
    return {"global": {"scrape_interval": f"{INTERVAL_S}s", "scrape_timeout": "10s"},
            "scrape_configs": [{"job_name": SCRAPE_JOB, "metrics_path": "/metrics",
                                "static_configs": [{"targets": targets}]}]}
