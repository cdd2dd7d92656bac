"""Plans the runtime can start: kernel floors by compute capability, the memory a card really shows, and the
planner inputs that name hardware or places (tensor-parallel sizes, regions, accelerator names)."""

import csv
import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest

from inferstack.bootstrap.runtimes import vllm_args
from inferstack.errors import InputError
from inferstack.sizing import planner
from inferstack.sizing.architecture import LlmArchitecture
from inferstack.sizing.catalog import offers
from inferstack.sizing.demand import demand_of
from inferstack.sizing.estimate import estimate
from inferstack.sizing.evaluate import Candidate
from inferstack.sizing.hardware import gpu_spec, gpu_specs
from inferstack.sizing.llm import LlmReplica
from inferstack.sizing.models import lookup, resolve
from inferstack.sizing.planner import plan_workload
from inferstack.spec import Engine, KvCacheDtype, Precision, WorkloadSpec, parse_workload

DATA = Path(__file__).resolve().parents[2] / "inferstack" / "sizing" / "data"


def kernel_floor_rows() -> dict[tuple[str, str], float | None]:
    """engine_kernels.csv read here on its own, so the test does not trust the module it checks."""
    with (DATA / "engine_kernels.csv").open(newline="", encoding="utf-8") as f:
        return {
            (row["engine"], row["precision"]): float(row["min_compute_capability"]) if row["min_compute_capability"]
            else None
            for row in csv.DictReader(f)
        }


def chat(model: str = "llama-3.1-8b", **placement: object) -> dict[str, object]:
    return {
        "name": "feasibility",
        "model": model,
        "traffic": {"requests_per_s": 0.5, "prompt_tokens": {"mean": 500, "p95": 1000},
                    "output_tokens": {"mean": 200, "p95": 400}},
        "stage": "internal",
        "placement": placement,
    }


def spec_of(data: dict[str, object], **changes: object) -> WorkloadSpec:
    return parse_workload({**data, **changes})


# ---- kernel floors -------------------------------------------------------------------------------------

MODELS = ("llama-3.1-8b", "bert-base")
ENGINES = (Engine.AUTO, Engine.VLLM, Engine.LLAMACPP, Engine.ONNXRUNTIME)


def gpu_candidates():
    """Every candidate the planner would size: catalog GPU offers × precisions × engines × an LLM and an encoder."""
    gpu_offers = [offer for offer in offers() if offer.gpu is not None]
    for model_name, precision, engine in itertools.product(MODELS, Precision, ENGINES):
        spec = spec_of(chat(model_name), precision=precision.value, engine=engine.value)
        demand = demand_of(spec, resolve(spec.model))
        for offer in gpu_offers:
            yield offer, precision, planner._candidate(demand, offer, precision)


def test_no_candidate_runs_a_dtype_or_kernel_below_its_gpus_compute_capability():
    floors = kernel_floor_rows()
    checked = excluded = 0
    for offer, precision, candidate in gpu_candidates():
        if isinstance(candidate, str):
            excluded += "compute capability" in candidate
            continue
        assert offer.gpu is not None
        floor = floors.get((candidate.engine.value, candidate.served_dtype.value))
        assert floor is None or offer.gpu.compute_capability >= floor, (
            f"{offer.name} ({offer.gpu.id}, {offer.gpu.compute_capability}) would run {precision.value} as "
            f"{candidate.served_dtype.value} on {candidate.engine.value}, whose floor is {floor}")
        if candidate.engine is Engine.VLLM:  # every dtype vLLM is asked to serve has a sourced row
            assert (candidate.engine.value, candidate.served_dtype.value) in floors
        checked += 1
    assert checked > 1000 and excluded > 100  # the sweep reached both outcomes


def test_bf16_on_a_t4_is_served_as_fp16_and_the_server_is_started_with_float16():
    report = plan_workload(spec_of(chat(gpus_allow=["T4"]), precision="bf16"), clouds=["aws"])
    plan = report.outcome("aws").chosen
    assert plan is not None and plan.accelerator is not None and plan.accelerator.id == "T4"
    assert plan.precision == "bf16" and plan.model.bucket_prefix.endswith("/bf16/")  # the checkpoint stays bf16
    assert plan.serving.dtype == "fp16"
    assert any("bf16 weights as fp16" in line and "7.5" in line for line in plan.rationale)
    words = vllm_args(plan, "native")
    assert words[words.index("--dtype") + 1] == "float16"


def test_bf16_on_an_ampere_gpu_is_served_as_bf16():
    report = plan_workload(spec_of(chat(gpus_allow=["A10G"]), precision="bf16"), clouds=["aws"])
    plan = report.outcome("aws").chosen
    assert plan is not None and plan.serving.dtype == "bf16"
    words = vllm_args(plan, "native")
    assert words[words.index("--dtype") + 1] == "bfloat16"


@pytest.mark.parametrize(
    ("precision", "gpu", "floor"),
    [("int4-awq", "V100", "7.5"), ("fp8", "T4", "8.0"), ("mxfp4", "T4", "8.0"), ("int8", "V100", "8.0")],
)
def test_a_kernel_the_gpu_cannot_run_excludes_the_offer_with_its_reason(precision, gpu, floor):
    model = "gpt-oss-120b" if precision == "mxfp4" else "llama-3.1-8b"
    clouds = ["huawei"] if gpu == "V100" else ["aws"]
    report = plan_workload(spec_of(chat(model, gpus_allow=[gpu], device="gpu"), precision=precision), clouds=clouds)
    outcome = report.outcome(clouds[0])
    assert outcome.chosen is None
    assert any(f"{precision} on vllm excluded on {gpu}" in line and f"compute capability {floor}" in line
               for line in outcome.blocked_by), outcome.blocked_by


# ---- visible memory ------------------------------------------------------------------------------------


def test_gpu_memory_is_the_nvidia_smi_total_less_the_drivers_share_not_a_datasheet_factor():
    l40s, h100 = gpu_spec("L40S"), gpu_spec("H100-SXM")
    assert not l40s.visible_memory_estimated
    assert l40s.visible_memory_gib == pytest.approx(46068 / 1024 * 79.18 / (81559 / 1024))  # 44.72 GiB
    assert l40s.visible_memory_gib < 46068 / 1024 < 48 * 79.18 / 80  # below the old 47.5 GiB
    assert h100.visible_memory_gib == pytest.approx(79.18)  # the calibration anchor (row m03) is unchanged


def test_a_card_without_a_published_reading_falls_back_to_the_datasheet_factor_and_says_so():
    l20 = gpu_spec("L20")
    assert l20.visible_memory_estimated and l20.visible_memory_gib == pytest.approx(48 * 79.18 / 80)
    resized = gpu_spec("T4").with_memory(32)
    assert resized.visible_memory_estimated and resized.visible_memory_gib == pytest.approx(32 * 79.18 / 80)


def test_every_gpu_row_carries_a_compute_capability_and_a_memory_source():
    with (DATA / "gpus.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        assert 7.0 <= float(row["compute_capability"]) <= 10.0 and row["compute_capability_source"], row["id"]
        reading, source = row["visible_memory_mib"], row["visible_memory_source"]
        if reading:
            assert 0.9 < int(reading) / 1024 / float(row["vram_gb"]) < 1.03 and "github.com" in source, row["id"]
        else:
            assert source.startswith("estimated"), row["id"]


def test_the_memory_model_sizes_the_kv_cache_from_the_visible_memory():
    llama = lookup("llama-3.1-8b")
    assert llama.arch is not None
    replica = LlmReplica(arch=llama.arch, precision=Precision.BF16, kv_dtype=KvCacheDtype.AUTO,
                         engine=Engine.VLLM, gpu=gpu_spec("L40S"))
    assert replica.capacity_gib == pytest.approx(gpu_spec("L40S").visible_memory_gib)
    assert replica.usable_gib == pytest.approx(0.9 * 44.72, abs=0.01)
    result = estimate(llama, precision=Precision.BF16, engine=Engine.VLLM, gpu=gpu_spec("L40S"))
    assert result.capacity_gib == pytest.approx(44.72, abs=0.01)


# ---- tensor parallelism and memory utilisation in `estimate` -------------------------------------------


def test_the_tensor_parallel_rule_divides_heads_and_divides_or_replicates_kv_heads():
    llama = lookup("llama-3.1-8b").arch  # 32 heads, 8 KV heads
    assert isinstance(llama, LlmArchitecture)
    assert llama.tensor_parallel_sizes(16) == [1, 2, 4, 8, 16]
    assert "32 attention heads" in (llama.tensor_parallel_problem(3) or "")
    forty_heads = replace(llama, heads=40)  # 5 GPUs divide 40 heads but neither divide nor replicate 8 KV heads
    assert "8 KV heads" in (forty_heads.tensor_parallel_problem(5) or "")
    assert forty_heads.tensor_parallel_sizes(10) == [1, 2, 4, 8]


def test_estimate_refuses_a_gpu_count_that_cannot_split_the_heads():
    with pytest.raises(InputError) as error:
        estimate(lookup("llama-3.1-8b"), precision=Precision.BF16, engine=Engine.VLLM, gpu=gpu_spec("H100-SXM"),
                 gpus=3)
    text = str(error.value)
    assert "--gpus" in text and "32 attention heads" in text and "(got 3)" in text and "use 1, 2, 4 or 8" in text


@pytest.mark.parametrize("utilization", [1.5, 0.0, -0.2])
def test_estimate_refuses_a_memory_utilization_outside_zero_to_one(utilization):
    with pytest.raises(InputError, match=r"--gpu-memory-utilization.*\(0, 1\]"):
        estimate(lookup("llama-3.1-8b"), precision=Precision.BF16, engine=Engine.VLLM, gpu=gpu_spec("H100-SXM"),
                 gpu_memory_utilization=utilization)


# ---- --region without --cloud --------------------------------------------------------------------------


@pytest.mark.parametrize(("region", "cloud"), [("us-central1", "gcp"), ("europe-west4", "gcp"),
                                               ("cn-hangzhou", "alibaba")])
def test_a_region_only_one_cloud_uses_picks_that_cloud(region, cloud):
    report = planner.plan_once(spec_of(chat()), region=region)
    assert [o.cloud for o in report.clouds] == [cloud] and report.clouds[0].regions == [region]


def test_a_region_the_workload_lists_for_one_cloud_picks_that_cloud():
    spec = spec_of(chat(regions={"huawei": ["cn-north-4"]}))
    report = planner.plan_once(spec, region="cn-north-4")
    assert [o.cloud for o in report.clouds] == ["huawei"]


def test_a_region_name_several_clouds_use_asks_for_cloud():
    with pytest.raises(InputError) as error:
        planner.plan_once(spec_of(chat()), region="us-east-1")  # AWS and Alibaba both have us-east-1
    text = str(error.value)
    assert "--region" in text and "'us-east-1'" in text and "--cloud aws" in text and "--cloud alibaba" in text


def test_a_region_no_allowed_cloud_uses_is_an_error_with_examples():
    with pytest.raises(InputError, match=r"--region: is not a region name of the workload's clouds \(gcp\)"):
        planner.plan_once(spec_of(chat(clouds=["gcp"])), region="cn-hangzhou")


# ---- accelerator names ---------------------------------------------------------------------------------


def test_an_unknown_accelerator_name_is_an_error_naming_it_and_listing_the_known_ones():
    spec = spec_of(chat(gpus_allow=["T4", "V1OO"], gpus_deny=["h100x"]))
    with pytest.raises(InputError) as error:
        planner.plan_once(spec)
    text = str(error.value)
    assert "placement.gpus_allow[1]: is not a known accelerator (got 'V1OO')" in text
    assert "placement.gpus_deny[0]: is not a known accelerator (got 'h100x')" in text
    assert all(name in text for name in ("V100", "L40S", "H100-SXM", "Inferentia2"))


def test_known_accelerator_names_match_case_insensitively():
    names = {spec.id for spec in gpu_specs().values()}
    assert "L40S" in names
    report = planner.plan_once(spec_of(chat(gpus_allow=["l40s", "a10g"])), clouds=["aws"])
    chosen = report.outcome("aws").chosen
    assert chosen is not None and chosen.accelerator is not None and chosen.accelerator.id in {"L40S", "A10G"}


def test_candidate_keeps_the_checkpoint_precision_and_reports_the_served_dtype():
    offer = next(o for o in offers() if o.gpu is not None and o.gpu.id == "T4")
    candidate = Candidate(offer, Engine.VLLM, Precision.BF16, dtype=Precision.FP16)
    assert candidate.precision is Precision.BF16 and candidate.served_dtype is Precision.FP16


def test_estimate_says_what_the_engine_would_really_run_on_the_gpu():
    llama = lookup("llama-3.1-8b")
    on_t4 = estimate(llama, precision=Precision.BF16, engine=Engine.VLLM, gpu=gpu_spec("T4"), gpus=2)
    assert any("bf16 weights as fp16" in note for note in on_t4.notes)
    on_v100 = estimate(llama, precision=Precision.INT4_AWQ, engine=Engine.VLLM, gpu=gpu_spec("V100-SXM2-16GB"))
    assert any("int4-awq on vllm excluded on V100-SXM2-16GB" in note for note in on_v100.notes)
    on_h100 = estimate(llama, precision=Precision.BF16, engine=Engine.VLLM, gpu=gpu_spec("H100-SXM"))
    assert not any("compute capability" in note for note in on_h100.notes)


# ---- the model's context limit -------------------------------------------------------------------------


def _llama2(**traffic: object) -> WorkloadSpec:
    return parse_workload({"name": "ctx", "model": "llama-2-7b", "precision": "bf16",
                           "traffic": {"requests_per_s": 1, **traffic}, "placement": {"clouds": ["aws"]}})


def test_a_context_longer_than_the_models_is_refused_naming_the_field_and_the_limit():
    with pytest.raises(InputError) as error:
        demand_of(_llama2(context_tokens=8192), lookup("llama-2-7b"))
    (problem,) = error.value.problems
    assert (problem.field, problem.value) == ("traffic.context_tokens", 8192)
    assert "context of 4096 tokens" in problem.message and "set it to 4096 or less" in (problem.fix or "")


def test_p95_lengths_past_the_models_context_are_refused_unless_a_shorter_context_is_given():
    with pytest.raises(InputError, match=r"traffic: p95 prompt \(4000\) \+ p95 output \(512\) = 4512 tokens, longer "
                       r"than llama-2-7b's context of 4096 tokens"):
        demand_of(_llama2(prompt_tokens=4000, output_tokens=512), lookup("llama-2-7b"))
    # Saying how long a sequence the server accepts says that longer requests are truncated, and the plan says so.
    demand = demand_of(_llama2(prompt_tokens=4000, output_tokens=512, context_tokens=4096),
                       lookup("llama-2-7b"))
    assert demand.max_model_len == 4096
    assert any("longer requests are truncated by their clients" in line for line in demand.assumptions)


def test_a_p95_sequence_that_fits_is_rounded_up_no_further_than_the_models_context():
    demand = demand_of(_llama2(prompt_tokens=3900, output_tokens=190), lookup("llama-2-7b"))
    assert demand.max_model_len == 4096
    assert not any("truncated" in line for line in demand.assumptions)


def test_a_config_that_states_no_context_limit_is_not_refused_on_a_guessed_one(tmp_path):
    config = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
              "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256}
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = parse_workload({"name": "ctx", "model": {"name": "my-llama", "config": str(tmp_path / "config.json")},
                           "traffic": {"requests_per_s": 1, "context_tokens": 8192}, "placement": {"clouds": ["aws"]}})
    assert demand_of(spec, resolve(spec.model)).max_model_len == 8192
    (tmp_path / "config.json").write_text(json.dumps(config | {"max_position_embeddings": 4096}))
    with pytest.raises(InputError, match=r"traffic\.context_tokens: is longer than my-llama's context of 4096"):
        demand_of(spec, resolve(spec.model))
