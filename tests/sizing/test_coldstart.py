"""The cold start in the plan: boot to first healthy answer, phase by phase under the boot script's own phase names,
from the server's network, disks and model; and the boot log's machine-readable phase lines read back."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError
from sample_plans import one_at_a_time, sample_plan

from inferstack.bootstrap.render import SYNC_WORKERS, shipped_copy
from inferstack.bootstrap.runtimes import resolve_mode
from inferstack.clouds import CLOUD_FACTS
from inferstack.plan import COLD_START_PHASES, ColdStart, DeploymentPlan
from inferstack.sizing import plan_workload
from inferstack.sizing.coldstart import (
    DRIVER_INSTALL_S,
    SYNC_CONNECTIONS,
    Server,
    cold_start,
    download_bytes_per_s,
    measured,
    measured_seconds,
    network_bytes_per_s,
    parse_phase_lines,
    sync_bytes_per_s,
    warm_start,
)
from inferstack.spec import CLOUDS, load_workload

WORKLOADS = Path(__file__).resolve().parents[2] / "examples" / "workloads"
BOOT_SH = Path(__file__).resolve().parents[2] / "inferstack" / "bootstrap" / "files" / "boot.sh"

# An 8B model in bf16 on a one-GPU server with local NVMe and 10 Gbit/s (AWS g6.xlarge's catalog row).
GPU_SERVER = Server(cloud="aws", runtime="vllm", device="gpu", model_gib=14.96, network_gbps=10.0,
                    local_nvme_gb=250, disk_gib=120)


@pytest.mark.parametrize(("runtime", "device", "processes"), [
    ("vllm", "gpu", 1), ("vllm", "gpu", 2), ("llamacpp", "gpu", 1), ("llamacpp", "cpu", 1), ("llamacpp", "cpu", 2),
    ("triton", "cpu", 1), ("triton", "gpu", 1)])
def test_the_runtime_phase_installs_the_way_the_bootstraps_auto_mode_does(runtime: str, device: str,
                                                                         processes: int) -> None:
    variant = {("vllm", "gpu"): "gpu-llm", ("llamacpp", "cpu"): "cpu-llm", ("triton", "cpu"): "cpu-encoder",
               ("triton", "gpu"): "gpu-encoder", ("llamacpp", "gpu"): "gpu-llm"}[runtime, device]
    plan = sample_plan("aws", variant)  # type: ignore[arg-type]
    plan = plan.model_copy(update={"serving": plan.serving.model_copy(update={"runtime": runtime,
                                                                              "processes": processes})})
    plan = one_at_a_time(plan) if device == "cpu" and processes > 1 else plan  # as the planner sizes them
    phase = next(p for p in cold_start(GPU_SERVER._replace(runtime=runtime, device=device,
                                                           processes=processes)).phases if p.phase == "runtime")
    assert ("pip builds" in phase.basis) == (resolve_mode(plan, "auto") == "native"), phase.basis


def test_the_phases_are_the_boot_scripts_in_order_and_the_sync_runs_beside_the_installs() -> None:
    estimate = cold_start(GPU_SERVER)
    phases = {p.phase: p for p in estimate.phases}
    assert tuple(phases) == COLD_START_PHASES
    assert all(p.basis for p in estimate.phases)
    # the sync starts with the runtime's install, once the driver is there; the runtime starts after both
    assert phases["model_sync"].start_s == phases["runtime"].start_s == phases["driver"].end_s
    assert phases["service"].start_s == max(phases["gateway"].end_s, phases["model_sync"].end_s)
    assert estimate.total_s == phases["model_load"].end_s
    assert estimate.total_s < sum(p.seconds for p in estimate.phases)


def test_a_plan_written_before_phases_had_starts_reads_them_as_sequential() -> None:
    estimate = cold_start(GPU_SERVER)
    old = {"total_s": sum(p.seconds for p in estimate.phases),
           "phases": [{"phase": p.phase, "seconds": p.seconds, "basis": p.basis} for p in estimate.phases]}
    again = ColdStart.model_validate(old)
    assert [p.start_s for p in again.phases][1] == estimate.phases[0].seconds


def test_a_breakdown_that_does_not_add_up_is_refused() -> None:
    estimate = cold_start(GPU_SERVER)
    with pytest.raises(ValidationError, match="not when its last phase ends"):
        ColdStart(total_s=estimate.total_s + 1, phases=estimate.phases)
    with pytest.raises(ValidationError, match="in that order"):
        ColdStart(total_s=estimate.total_s, phases=list(reversed(estimate.phases)))


def test_the_boot_script_runs_the_plans_phases_after_the_vm_boot_the_sync_started_where_the_estimate_starts_it(
        ) -> None:
    main = re.search(r"\nmain\(\) \{\n(.*?)\n\}\n", BOOT_SH.read_text(), re.S)
    assert main is not None
    run = [("model_sync" if line.strip() == "start_sync" else line.split()[1]) for line in main.group(1).splitlines()
           if re.fullmatch(r"\s*(step [a-z_]+|start_sync)", line)]
    assert sorted(("vm_boot", *run)) == sorted(COLD_START_PHASES)
    # the estimate starts the sync when the driver phase ends, beside the runtime's install (_timeline)
    assert run[run.index("model_sync") - 1] == "driver" and run[run.index("model_sync") + 1] == "runtime"
    assert [p for p in run if p != "model_sync"] == [p for p in COLD_START_PHASES[1:] if p != "model_sync"]


@pytest.mark.parametrize("cloud", CLOUDS)
def test_the_driver_takes_time_only_on_a_gpu_server_of_a_cloud_without_a_driver_ready_image(cloud: str) -> None:
    gpu = cold_start(GPU_SERVER._replace(cloud=cloud))  # type: ignore[arg-type]
    cpu = cold_start(GPU_SERVER._replace(cloud=cloud, runtime="llamacpp", device="cpu"))  # type: ignore[arg-type]
    assert gpu.seconds("driver") == (0 if CLOUD_FACTS[cloud].driver_ready_image else DRIVER_INSTALL_S)
    assert cpu.seconds("driver") == 0
    assert CLOUD_FACTS["alibaba"].driver_ready_image is False and CLOUD_FACTS["aws"].driver_ready_image is True


def test_local_nvme_loads_and_syncs_faster_than_the_boot_volume() -> None:
    nvme = cold_start(GPU_SERVER)
    gp3 = cold_start(GPU_SERVER._replace(local_nvme_gb=0))
    assert gp3.seconds("model_load") > nvme.seconds("model_load")
    assert gp3.seconds("model_sync") > nvme.seconds("model_sync")
    # gp3 at its 125 MiB/s baseline: 14.96 GiB read in 123 s, plus vLLM's 200 s warm-up with its caches empty
    assert gp3.seconds("model_load") == 123 + 200


def test_a_bigger_model_downloads_and_loads_longer() -> None:
    small = cold_start(GPU_SERVER)
    large = cold_start(GPU_SERVER._replace(model_gib=140.0))
    rate, _ = download_bytes_per_s(GPU_SERVER)
    extra_gib = 140.0 - 14.96
    # the extra bytes cross the network (at the sync's rate) and are hashed (at the benchmark's measured rate)
    extra = extra_gib * 2**30
    assert large.seconds("model_sync") - small.seconds("model_sync") >= extra / rate + extra / measured(
        "sha256").bytes_per_s - 2
    assert large.seconds("model_load") > small.seconds("model_load")
    assert large.total_s > small.total_s


def test_the_download_is_limited_by_the_network_the_bucket_or_the_disk() -> None:
    assert download_bytes_per_s(GPU_SERVER._replace(network_gbps=1.0)) == (125e6, "network")
    rate, limit = download_bytes_per_s(GPU_SERVER._replace(network_gbps=100.0))
    assert (rate, limit) == (16 * 50e6, "bucket, 16 connections")
    assert download_bytes_per_s(GPU_SERVER._replace(local_nvme_gb=None))[1] == "gp3"
    slow = cold_start(GPU_SERVER._replace(network_gbps=1.0))
    assert slow.seconds("model_sync") > cold_start(GPU_SERVER).seconds("model_sync")


def test_an_instance_without_a_network_figure_gets_the_conservative_default() -> None:
    assert download_bytes_per_s(GPU_SERVER._replace(network_gbps=None)) == (5e9 / 8, "network")


def test_the_estimate_counts_the_model_syncs_own_parallelism() -> None:
    assert SYNC_CONNECTIONS == SYNC_WORKERS


@pytest.mark.parametrize("workload", ["chat-8b-public.yaml", "embeddings-bert.yaml"])
def test_every_plan_carries_its_cold_start_in_its_json_and_a_fleet_waits_for_it(workload: str) -> None:
    report = plan_workload(load_workload(WORKLOADS / workload))
    plans = [o.chosen for o in report.clouds if o.chosen is not None]
    assert plans
    for plan in plans:
        assert plan.cold_start is not None
        again = DeploymentPlan.model_validate_json(plan.model_dump_json())
        assert again.cold_start == plan.cold_start
        assert [p["phase"] for p in plan.model_dump()["cold_start"]["phases"]] == list(COLD_START_PHASES)
        assert any("estimated healthy after" in line for line in plan.rationale)
        if plan.fleet is not None:
            assert plan.cold_start.total_s <= plan.fleet.cold_start_s < plan.cold_start.total_s + 10


def _boot_functions() -> str:
    """now_s and phase_record exactly as the server gets them (the shipped, comment-free boot.sh)."""
    lines = shipped_copy("boot.sh").splitlines()
    start = lines.index("phase_record() {")
    end = lines.index("}", start)
    return "\n".join([line for line in lines if line.startswith("now_s() ")] + lines[start:end + 1])


def test_a_phase_line_written_by_the_boot_script_reads_back() -> None:
    script = _boot_functions() + '\nphase_record model_sync ok 1764590000.123 1764590041.323\n' \
                                 'phase_record driver reboot 1764590041.5 1764590300\n'
    written = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    journal = "".join(f"Dec 01 11:00:0{n} ip-10-0-1-5 boot.sh[812]: {line}\n"
                      for n, line in enumerate(written.splitlines()))
    journal += "Dec 01 11:00:09 ip-10-0-1-5 boot.sh[812]: 2026-12-01T11:00:09Z inferstack phase=service status=ok\n"
    sync, driver = parse_phase_lines(journal)
    assert (sync.phase, sync.status, sync.start, sync.end, sync.seconds) == (
        "model_sync", "ok", 1764590000.123, 1764590041.323, 41.2)
    assert (driver.phase, driver.status, driver.seconds) == ("driver", "reboot", 258.5)
    totals = measured_seconds([sync, driver, driver])
    assert list(totals)[: len(COLD_START_PHASES)] == list(COLD_START_PHASES)
    assert totals["driver"] == 517.0 and totals["model_sync"] == 41.2 and totals["vm_boot"] == 0.0


def test_an_image_that_holds_the_installs_skips_them_but_not_the_runtimes_first_compile() -> None:
    default = cold_start(GPU_SERVER)
    baked, brought = cold_start(GPU_SERVER._replace(image="baked")), cold_start(GPU_SERVER._replace(image="brought"))
    for phase in ("runtime", "gateway"):
        assert baked.seconds(phase) == brought.seconds(phase) < default.seconds(phase)
    # the bake does not start the model: its compile caches are written at the server's first start
    assert baked.seconds("model_load") == brought.seconds("model_load") == default.seconds("model_load")
    assert "caches empty" in baked.phases[-1].basis


def test_a_streamed_model_loads_beside_the_sync_and_the_endpoint_waits_for_both() -> None:
    fast = GPU_SERVER._replace(image="baked", network_gbps=25.0)  # room for the stream beside the sync
    download, stream = cold_start(fast), cold_start(fast._replace(stream=True))
    phases = {p.phase: p for p in stream.phases}
    assert phases["service"].start_s == phases["gateway"].end_s < phases["model_sync"].end_s
    assert stream.total_s == max(phases["model_load"].end_s, phases["model_sync"].end_s)
    assert stream.total_s < download.total_s
    assert "stream" in phases["model_load"].basis and "runai-model-streamer" in phases["model_load"].basis
    # a slow link is shared with the sync: the stream gets what is left, at least half
    slow_server = GPU_SERVER._replace(stream=True, network_gbps=1.0)
    slow = {p.phase: p for p in cold_start(slow_server).phases}
    assert "beside the sync" in slow["model_load"].basis and "beside the stream" in slow["model_sync"].basis
    # together they never take more than the link
    assert sync_bytes_per_s(slow_server)[0] <= network_bytes_per_s(slow_server) / 2


def test_a_warm_pool_server_starts_with_its_caches_and_fetches_a_model_kept_on_instance_storage_again() -> None:
    cold, warm = cold_start(GPU_SERVER), warm_start(GPU_SERVER)
    assert warm.seconds("model_load") < cold.seconds("model_load")  # cached warm-up
    assert warm.seconds("model_sync") == cold.seconds("model_sync")  # NVMe is empty after a stop
    on_ebs = warm_start(GPU_SERVER._replace(local_nvme_gb=None))
    assert on_ebs.seconds("model_sync") < warm.seconds("model_sync")
    assert warm.total_s < cold.total_s
