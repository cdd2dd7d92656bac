"""Deployment plans for tests of the bootstrap and the components.

`sample_plan(cloud, device, stage)` returns a realistic DeploymentPlan for each cloud: a GPU LLM on vLLM,
a CPU LLM on llama.cpp, or a CPU/GPU encoder on Triton; a production plan is a fleet of two to four
servers. Component and bootstrap tests take their plans from here so that they all exercise the same shapes.
"""

from __future__ import annotations

from typing import Literal

from inferstack.clouds import Cloud
from inferstack.plan import (
    Accelerator,
    DeploymentPlan,
    Fleet,
    MemoryBreakdown,
    ModelArtifact,
    Money,
    Performance,
    Price,
    Serving,
)
from inferstack.sizing.coldstart import (
    Server,
    cold_start,
    fleet_cold_start_s,
    health_check_grace_s,
    scale_in_cooldown_s,
)
from inferstack.spec import Stage

Variant = Literal["gpu-llm", "cpu-llm", "cpu-encoder", "gpu-encoder"]

# (instance type, offer, vcpus, memory GiB, local NVMe GB, accelerator, region, hourly price or None, currency)
_GPU_OFFERS: dict[Cloud, tuple[str, str, int, float, int | None, Accelerator, str, float | None, str]] = {
    "aws": ("g6.xlarge", "g6.xlarge", 4, 16.0, 250, Accelerator(id="L4", name="L4", memory_gib=24, count=1),
            "us-east-1", 0.8048, "USD"),
    "gcp": ("g2-standard-8", "g2-standard-8", 8, 32.0, None, Accelerator(id="L4", name="L4", memory_gib=24, count=1),
            "us-central1", 0.853624, "USD"),
    "alibaba": ("ecs.gn7i-c8g1.2xlarge", "ecs.gn7i-c8g1.2xlarge", 8, 30.0, 0,
                Accelerator(id="A10", name="A10", memory_gib=24, count=1), "ap-southeast-1", 18.065, "CNY"),
    "huawei": ("pi2.2xlarge.4", "pi2.2xlarge.4", 8, 32.0, 0,
               Accelerator(id="T4", name="T4", memory_gib=16, count=1), "ap-southeast-3", None, "USD"),
}
_CPU_OFFERS: dict[Cloud, tuple[str, int, float, str, float | None, str]] = {
    "aws": ("m7i.2xlarge", 8, 32.0, "us-east-1", 0.4032, "USD"),
    "gcp": ("n2-standard-8", 8, 32.0, "us-central1", 0.388472, "USD"),
    "alibaba": ("ecs.g7.2xlarge", 8, 32.0, "ap-southeast-1", 2.678178, "CNY"),
    "huawei": ("s7.2xlarge.4", 8, 32.0, "ap-southeast-3", None, "USD"),
}
_CNY_TO_USD = 0.14


def _price(hourly: float | None, currency: str, count: int, region: str) -> Price:
    if hourly is None:
        return Price(hourly_per_instance=None, monthly=None, monthly_ranking=None, per_million_output_tokens=None,
                     source=None, source_date=None, priced_region=None)
    monthly = hourly * 730 * count
    rate = 1.0 if currency == "USD" else _CNY_TO_USD
    return Price(hourly_per_instance=Money(amount=hourly, currency=currency),
                 monthly=Money(amount=monthly, currency=currency),
                 monthly_ranking=Money(amount=monthly * rate, currency="USD"),
                 per_million_output_tokens=None, source="sample", source_date="2026-01-21", priced_region=region)


def _llm_dtype(accelerator: Accelerator | None) -> str:
    """The dtype the planner serves the bf16 checkpoint at: fp16 on a T4 (vLLM runs bf16 from capability 8.0)."""
    if accelerator is None:
        return "q4_k_m"
    return "fp16" if accelerator.id == "T4" else "bf16"


def sample_plan(cloud: Cloud = "aws", variant: Variant = "gpu-llm", stage: Stage = "internal") -> DeploymentPlan:
    """A realistic plan for `cloud`; production plans have two replicas in two zones."""
    replicas = 2 if stage == "production" else 1
    gpu = variant.startswith("gpu")
    if gpu:
        itype, offer, vcpus, mem, nvme, acc, region, hourly, currency = _GPU_OFFERS[cloud]
    else:
        itype, vcpus, mem, region, hourly, currency = _CPU_OFFERS[cloud]
        offer, nvme, acc = itype, 0, None
    llm = variant.endswith("llm")
    precision = None
    if llm:
        model = ModelArtifact(
            name="llama-3.1-8b", kind="llm", source_uri="meta-llama/Llama-3.1-8B-Instruct", params_b=8.03,
            artifact_format="safetensors" if gpu else "gguf", size_gib=14.96 if gpu else 4.58,
            bucket_prefix="models/llama-3.1-8b/bf16/" if gpu else "models/llama-3.1-8b/q4_k_m/")
        serving = Serving(
            runtime="vllm" if gpu else "llamacpp", engine="vllm" if gpu else "llamacpp",
            health_path="/health", max_model_len=4096, max_num_seqs=32 if gpu else 4,
            gpu_memory_utilization=0.9 if gpu else None, dtype=_llm_dtype(acc),
            quantization=None if gpu else "gguf", threads=None if gpu else vcpus // 2)
        precision = "bf16" if gpu else "q4_k_m"
    else:
        model = ModelArtifact(
            name="bert-base", kind="encoder", source_uri="google-bert/bert-base-uncased", params_b=0.11,
            artifact_format="onnx", size_gib=0.41, bucket_prefix="models/bert-base/fp16/")
        serving = Serving(
            runtime="triton", engine="onnxruntime", backend="onnxruntime" if gpu else "openvino",
            metrics_port=8002, health_path="/v2/health/ready", dtype="fp16" if gpu else "fp32",
            threads=None if gpu else vcpus // 2)
    disk_gib = 100 if gpu else 50
    # The catalog has no network figure for most of these types: the estimate's stated default applies.
    estimate = cold_start(Server(cloud=cloud, runtime=serving.runtime, device="gpu" if gpu else "cpu",
                                 model_gib=model.size_gib, network_gbps=None, local_nvme_gb=nvme, disk_gib=disk_gib))
    start = fleet_cold_start_s(estimate)
    return DeploymentPlan(
        workload=f"sample-{variant}", stage=stage, cloud=cloud, region=region, instance_type=itype, offer=offer,
        instance_count=replicas, replicas=replicas, zones=replicas, device="gpu" if gpu else "cpu", vcpus=vcpus,
        memory_gib=mem, local_nvme_gb=nvme, accelerator=acc, tensor_parallel=1, model=model,
        precision=precision or serving.dtype, serving=serving, disk_gib=disk_gib,
        memory=MemoryBreakdown(
            device="gpu" if gpu else "cpu", capacity_gib=acc.memory_gib if acc else mem,
            usable_gib=(acc.memory_gib * 0.9) if acc else mem - 4, weights_gib=model.size_gib, overhead_gib=2.0,
            kv_cache_gib=4.0 if llm else 0.0, kv_cache_needed_gib=2.0 if llm else 0.0,
            total_gib=model.size_gib + 4.0, kv_cache_bytes_per_token=131072 if llm else 0,
            kv_cache_capacity_tokens=32768 if llm else 0, max_concurrency=8 if llm else 0),
        performance=Performance(
            ttft_p95_ms=400.0 if llm else None, tpot_p95_ms=40.0 if llm else None, latency_p95_ms=2000.0,
            output_tokens_per_s=300.0 if llm else None, capacity_requests_per_s=2.0, load_requests_per_s=1.0,
            utilization=0.5, concurrency_per_replica=4),
        price=_price(hourly, currency, replicas, region),
        rationale=["sample plan for tests"], warnings=[] if hourly else ["no published price for this instance"],
        # Production runs as a fleet of its two replicas, up to four, as the planner makes it.
        cold_start=estimate,
        fleet=Fleet(min_replicas=2, max_replicas=4, target_requests_per_s=1.6, cold_start_s=start,
                    health_check_grace_s=health_check_grace_s(start), scale_out_cooldown_s=start,
                    scale_in_cooldown_s=scale_in_cooldown_s(start))
        if stage == "production" else None)


def one_at_a_time(plan: DeploymentPlan) -> DeploymentPlan:
    """`plan` with one request at a time per process (serving.max_num_seqs 1), as llama.cpp's native install
    (llama-cpp-python) serves it and as the planner sizes a CPU plan of several processes."""
    return plan.model_copy(update={"serving": plan.serving.model_copy(update={"max_num_seqs": 1})})
