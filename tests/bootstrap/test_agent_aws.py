"""The CloudWatch agent on an AWS server (`bootstrap.agents.aws`): its configuration passes the agent's own JSON schema
(tests/data/cloudwatch-agent-schema.json: translator/config/schema.json of aws/amazon-cloudwatch-agent at commit
ab55b8daa204e95c42c0267ee5aa49ec3b3a7317, 2026-08-07, release 1.300071.0) and ships what `telemetry.sources` lists;
the install script pins the version and Amazon's key and passes shellcheck; a telemetry-enabled bundle carries the
script, the configuration and the agent's unit."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from sample_plans import sample_plan
from test_bootstrap_render import AGENT_TARGETS

from inferstack.bootstrap import BootstrapOptions, render_bootstrap
from inferstack.bootstrap.agents import aws as agent
from inferstack.bootstrap.telemetry import AGENT_SCRIPT, AGENT_UNIT, sources
from inferstack.plan import DeploymentPlan
from inferstack.runtimes import RUNTIME_FACTS

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "data" / "cloudwatch-agent-schema.json").read_text())
# What each pinned runtime exposes on /metrics, read from its source (the file says where).
EXPOSED = json.loads((Path(__file__).resolve().parents[1] / "data" / "runtime_metric_names.json").read_text())
TARGET = AGENT_TARGETS["aws"]
VARIANTS = ["gpu-llm", "cpu-llm", "cpu-encoder", "gpu-encoder"]


def _config(plan: DeploymentPlan) -> dict:
    return agent.agent_config(plan, sources(plan), TARGET)


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variants_configuration_passes_the_agents_schema(variant: str) -> None:
    jsonschema.Draft4Validator(SCHEMA).validate(_config(sample_plan("aws", variant)))


def test_the_schema_check_refuses_a_key_the_agent_does_not_know() -> None:
    config = _config(sample_plan("aws", "gpu-llm"))
    config["logs"]["logs_collected"]["journald"]["collect_list"][0]["unit"] = "typo"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(SCHEMA).validate(config)


def test_metrics_go_to_the_targets_namespace_with_the_group_as_a_dimension_and_an_aggregate() -> None:
    metrics = _config(sample_plan("aws", "gpu-llm"))["metrics"]
    assert metrics["namespace"] == TARGET.metrics
    assert metrics["append_dimensions"]["AutoScalingGroupName"] == "${aws:AutoScalingGroupName}"
    assert metrics["aggregation_dimensions"] == [["AutoScalingGroupName"]]
    assert metrics["metrics_collected"]["disk"]["measurement"] == ["used_percent"]
    assert metrics["metrics_collected"]["disk"]["resources"] == ["/"]


def test_a_gpu_server_sends_gpu_memory_used_and_total_never_memory_bandwidth() -> None:
    gpu = _config(sample_plan("aws", "gpu-llm"))["metrics"]["metrics_collected"]["nvidia_gpu"]["measurement"]
    assert {"memory_used", "memory_total"} <= set(gpu) and "utilization_memory" not in gpu
    assert "nvidia_gpu" not in _config(sample_plan("aws", "cpu-llm"))["metrics"]["metrics_collected"]


def test_the_runtime_units_journals_and_the_access_and_boot_logs_go_to_the_targets_log_group() -> None:
    plan = sample_plan("aws", "gpu-llm")
    logs = _config(plan)["logs"]["logs_collected"]
    assert [f["file_path"] for f in logs["files"]["collect_list"]] == list(sources(plan).files)
    assert [u["units"] for u in logs["journald"]["collect_list"]] == [[f"{u}.service"] for u in sources(plan).units]
    entries = logs["files"]["collect_list"] + logs["journald"]["collect_list"]
    assert {e["log_group_name"] for e in entries} == {TARGET.logs}
    assert len({e["log_stream_name"] for e in entries}) == len(entries)  # one stream per server and source


def test_vllm_and_llama_server_are_scraped_on_loopback_and_native_llama_cpp_not_at_all() -> None:
    plan = sample_plan("aws", "gpu-llm")
    files = {path: content for path, content, _ in agent.agent_files(plan, sources(plan), TARGET)}
    scrape = yaml.safe_load(files[agent.PROMETHEUS_CONFIG_PATH])
    assert scrape["scrape_configs"][0]["static_configs"] == [{"targets": ["127.0.0.1:18000"]}]
    prometheus = _config(plan)["logs"]["metrics_collected"]["prometheus"]
    assert prometheus["emf_processor"]["metric_namespace"] == TARGET.metrics
    assert prometheus["log_group_name"] == TARGET.logs
    llama = sample_plan("aws", "cpu-llm")  # natively, llama-cpp-python: no metrics endpoint
    assert "metrics_collected" not in agent.agent_config(llama, sources(llama, "native"), TARGET)["logs"]
    assert agent.PROMETHEUS_CONFIG_PATH not in [
        p for p, _, _ in agent.agent_files(llama, sources(llama, "native"), TARGET)]
    assert agent.PROMETHEUS_CONFIG_PATH in [p for p, _, _ in agent.agent_files(llama, sources(llama), TARGET)]
    # Only the few series each runtime's alarms and graphs would read become metrics (each one is billed).
    selected = _config(llama)["logs"]["metrics_collected"]["prometheus"]["emf_processor"]["metric_declaration"]
    assert selected[0]["metric_selectors"] == agent.metric_selectors(RUNTIME_FACTS["llamacpp"])


@pytest.mark.parametrize("runtime", sorted(RUNTIME_FACTS))
def test_every_metric_selector_names_a_metric_the_pinned_runtime_exposes(runtime: str) -> None:
    # A selector no exposed name matches sends nothing, silently (vllm:gpu_cache_usage_perc, gone in vLLM 0.12.0).
    exposed = EXPOSED[runtime]["names"]
    for selector in agent.metric_selectors(RUNTIME_FACTS[runtime]):
        assert [name for name in exposed if re.fullmatch(selector.strip("^$"), name)], selector


def test_the_install_script_pins_the_version_and_amazons_key() -> None:  # shellcheck: test_bootstrap_render
    plan = sample_plan("aws", "gpu-llm")
    (script,) = [content for path, content, _ in agent.agent_files(plan, sources(plan), TARGET) if path == AGENT_SCRIPT]
    assert "AGENT_VERSION=1.300071.0b1720" in script
    assert "KEY_FINGERPRINT=937616F3450B7D806CBD9725D58167303B789C72" in script  # AWS docs: 9376 16F3 ... 3B78 9C72
    assert "--verify" in script and "DPkg::Lock::Timeout=600" in script and "| bash" not in script


def test_a_telemetry_enabled_bundle_carries_the_script_the_configuration_and_the_unit() -> None:
    plan = sample_plan("aws", "gpu-llm")
    options = {"model_bucket": "models-bucket", "region": plan.region}
    with_agent = render_bootstrap(plan, "aws", BootstrapOptions(**options, telemetry=TARGET))  # type: ignore[arg-type]
    files = {f["path"]: f for f in json.loads(with_agent.bundle)["files"]}
    assert files[AGENT_SCRIPT]["mode"] == "0755"
    assert json.loads(files[agent.CONFIG_PATH]["content"]) == _config(plan)
    assert f"/etc/systemd/system/{AGENT_UNIT}.service" in files
    without = render_bootstrap(plan, "aws", BootstrapOptions(**options))  # type: ignore[arg-type]
    assert AGENT_SCRIPT not in {f["path"] for f in json.loads(without.bundle)["files"]}
