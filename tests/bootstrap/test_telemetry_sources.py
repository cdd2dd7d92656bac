"""What every cloud's monitoring agent collects on a server (`bootstrap.telemetry.sources`): the runtime's Prometheus
endpoints on loopback (one per vLLM process, Triton's metrics port, none for llama.cpp), GPU metrics on a GPU server
only, the root disk, the units' journals and the access and boot logs."""

from __future__ import annotations

from inferstack.bootstrap.gateway import ACCESS_LOG
from inferstack.bootstrap.telemetry import BOOT_LOG, sources
from inferstack.plan import DeploymentPlan
from tests.sample_plans import sample_plan


def _processes(plan: DeploymentPlan, count: int) -> DeploymentPlan:
    return plan.model_copy(update={"serving": plan.serving.model_copy(update={"processes": count})})


def test_vllm_is_scraped_on_each_processs_own_loopback_port() -> None:
    one = sources(sample_plan("aws", "gpu-llm"))
    assert one.metrics_urls == ("http://127.0.0.1:18000/metrics",)
    two = sources(_processes(sample_plan("aws", "gpu-llm"), 2))
    assert two.metrics_urls == ("http://127.0.0.1:18001/metrics", "http://127.0.0.1:18002/metrics")
    assert two.units[:2] == ("inferstack-server-1", "inferstack-server-2")


def test_triton_is_scraped_on_its_metrics_port_and_llama_cpp_only_as_llama_server() -> None:
    assert sources(sample_plan("gcp", "gpu-encoder")).metrics_urls == ("http://127.0.0.1:8002/metrics",)
    llama = sample_plan("gcp", "cpu-llm")
    assert sources(llama, "native").metrics_urls == ()  # llama-cpp-python serves no /metrics
    assert sources(llama, "container").metrics_urls == ("http://127.0.0.1:18000/metrics",)  # llama-server --metrics
    assert sources(llama).metrics_urls == sources(llama, "container").metrics_urls  # auto installs the container


def test_every_metrics_url_is_on_loopback() -> None:
    for variant in ("gpu-llm", "cpu-llm", "cpu-encoder", "gpu-encoder"):
        assert all(url.startswith("http://127.0.0.1:") for url in sources(sample_plan("aws", variant)).metrics_urls)


def test_gpu_metrics_are_collected_on_a_gpu_server_only() -> None:
    assert sources(sample_plan("aws", "gpu-llm")).gpu is True
    assert sources(sample_plan("aws", "gpu-encoder")).gpu is True
    assert sources(sample_plan("aws", "cpu-llm")).gpu is False
    assert sources(sample_plan("aws", "cpu-encoder")).gpu is False


def test_the_runtime_gateway_and_boot_units_and_the_access_and_boot_logs_are_shipped() -> None:
    shipped = sources(sample_plan("aws", "cpu-llm"))
    assert shipped.units == ("inferstack-server", "inferstack-gateway", "inferstack-boot")
    assert shipped.files == (ACCESS_LOG, BOOT_LOG)
    assert shipped.disks == ("/",)
