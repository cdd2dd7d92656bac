"""Google Cloud's Ops Agent on a GCP server (`bootstrap.agents.gcp`): its config.yaml ships what `telemetry.sources`
lists, each log under a name the deployment's sink routes; the install script pins the version, the repository and
Google's key fingerprints and passes shellcheck; a telemetry-enabled bundle carries the script, the configuration
and the agent's unit.

The Ops Agent's parser (confgenerator, Go) is not run here: the receiver and processor types and their fields are
checked against the names it registers (GoogleCloudPlatform/ops-agent at 588c4b9, 2026-08-05:
confgenerator/logging_receivers.go `files` include_paths, `systemd_journald`; logging_processors.go
`exclude_logs` match_any; apps/hostmetrics.go `hostmetrics`; prometheus.go `prometheus` config)."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from sample_plans import sample_plan
from test_bootstrap_render import AGENT_TARGETS

from inferstack.bootstrap import BootstrapOptions, render_bootstrap
from inferstack.bootstrap.agents import gcp as agent
from inferstack.bootstrap.telemetry import AGENT_SCRIPT, AGENT_UNIT, sources
from inferstack.runtimes import Mode

TARGET = AGENT_TARGETS["gcp"]
# The component types the Ops Agent registers, with the fields each takes (confgenerator, see the docstring).
KNOWN = {"files": {"type", "include_paths", "exclude_paths", "wildcard_refresh_interval", "record_log_file_path"},
         "systemd_journald": {"type"}, "exclude_logs": {"type", "match_any"},
         "hostmetrics": {"type", "collection_interval"}, "prometheus": {"type", "config"}}


def _config(variant: str, mode: Mode | None = None) -> dict:
    plan = sample_plan("gcp", variant)  # type: ignore[arg-type]
    files = dict((path, content) for path, content, _ in agent.agent_files(plan, sources(plan, mode), TARGET))
    return yaml.safe_load(files[agent.CONFIG_PATH])


@pytest.mark.parametrize("variant", ["gpu-llm", "cpu-llm", "cpu-encoder", "gpu-encoder"])
def test_every_component_is_a_type_the_agent_knows_with_fields_it_takes_and_every_pipeline_names_its_own(
        variant: str) -> None:
    config = _config(variant)
    for section in ("logging", "metrics"):
        components = {**config[section]["receivers"], **config[section].get("processors", {})}
        for component in components.values():
            assert set(component) <= KNOWN[component["type"]], component
        for pipeline in config[section]["service"]["pipelines"].values():
            assert set(pipeline["receivers"]) | set(pipeline.get("processors", [])) <= set(components)


def test_each_log_goes_under_a_name_the_sink_routes_and_the_agents_syslog_pipeline_is_off() -> None:
    logging = _config("gpu-llm")["logging"]
    assert set(logging["receivers"]) == set(agent.log_names(TARGET))
    plan = sample_plan("gcp", "gpu-llm")
    paths = [p for r in logging["receivers"].values() for p in r.get("include_paths", [])]
    assert paths == list(sources(plan).files)
    assert logging["service"]["pipelines"]["default_pipeline"] == {"receivers": []}


def test_the_journal_is_filtered_to_the_runtime_gateway_and_boot_units() -> None:
    (processor,) = _config("gpu-llm")["logging"]["processors"].values()
    (condition,) = processor["match_any"]
    shape = re.fullmatch(r'NOT \(jsonPayload\._SYSTEMD_UNIT =~ "([^"]+)" OR jsonPayload\.UNIT =~ "([^"]+)"\)',
                         condition)
    assert shape is not None and shape[1] == shape[2], condition
    # What that condition means, as ops-agent's ast.go turns it into fluent-bit filters: `=~` is Key_value_matches
    # on the text between the quotes, unchanged, and false where the line has no such field; NOT excludes the line
    # where neither matches. This restates the agent's meaning; the shape above is what the config can get wrong.
    regex = re.compile(shape[1])

    def excluded(line: dict[str, str]) -> bool:
        return not any(field in line and regex.search(line[field]) for field in ("_SYSTEMD_UNIT", "UNIT"))

    kept = ["inferstack-server.service", "inferstack-gateway.service", "inferstack-boot.service"]
    assert not any(excluded({"_SYSTEMD_UNIT": unit}) for unit in kept)
    others = ("sshd.service", "inferstack-server-service", "docker.service")
    assert all(excluded({"_SYSTEMD_UNIT": unit}) for unit in others)
    assert excluded({"_TRANSPORT": "kernel", "MESSAGE": "nvidia: loading out-of-tree module"})  # no unit: the kernel
    # systemd's own lines about a unit: kept for ours (an exit, a restart, the OOM killer), not for others
    assert not excluded({"_SYSTEMD_UNIT": "init.scope", "UNIT": "inferstack-server.service"})
    assert excluded({"_SYSTEMD_UNIT": "init.scope", "UNIT": "docker.service"})


def test_vllm_is_scraped_on_loopback_under_the_targets_job_and_native_llama_cpp_not_at_all() -> None:
    metrics = _config("gpu-llm")["metrics"]
    (runtime,) = [r for r in metrics["receivers"].values() if r["type"] == "prometheus"]
    (scrape,) = runtime["config"]["scrape_configs"]
    assert scrape["job_name"] == TARGET.metrics and scrape["static_configs"] == [{"targets": ["127.0.0.1:18000"]}]
    llama = _config("cpu-llm", "native")["metrics"]
    assert [r["type"] for r in llama["receivers"].values()] == ["hostmetrics"]  # disk (and GPU where one is)


def test_the_install_script_pins_version_repository_and_keys() -> None:  # shellcheck: test_bootstrap_render
    plan = sample_plan("gcp", "gpu-llm")
    (script,) = [c for p, c, _ in agent.agent_files(plan, sources(plan), TARGET) if p == AGENT_SCRIPT]
    assert "AGENT_VERSION=2.70.0" in script and "google-cloud-ops-agent-$codename-$REPO_MAJOR" in script
    assert "A362B822F6DEDC652817EA46B53DC80D13EDEF05" in script and "signed-by=$KEYRING" in script
    assert "DPkg::Lock::Timeout=600" in script and "| bash" not in script and "apt-key add" not in script


def test_a_telemetry_enabled_bundle_carries_the_script_the_configuration_and_the_unit() -> None:
    plan = sample_plan("gcp", "gpu-llm")
    options = {"model_bucket": "models-bucket", "region": plan.region}
    rendered = render_bootstrap(plan, "gcp", BootstrapOptions(**options, telemetry=TARGET))  # type: ignore[arg-type]
    files = {f["path"]: f for f in json.loads(rendered.bundle)["files"]}
    assert files[AGENT_SCRIPT]["mode"] == "0755" and "ops-agent" in files[AGENT_SCRIPT]["content"]
    assert yaml.safe_load(files[agent.CONFIG_PATH]["content"]) == _config("gpu-llm")
    assert f"/etc/systemd/system/{AGENT_UNIT}.service" in files
