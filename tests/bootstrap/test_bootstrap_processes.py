"""Several model processes per server: one unit per process on its own loopback port, pinned to its own NUMA node
or GPUs, and the gateway balancing across all of them; one process renders as before."""

from __future__ import annotations

import pytest
from sample_plans import one_at_a_time, sample_plan
from test_bootstrap_render import options_for, two_process_plan, written_files

from inferstack.bootstrap import render_bootstrap
from inferstack.bootstrap.runtimes import RUNTIME_PORT
from inferstack.errors import InputError
from inferstack.plan import MAX_PROCESSES_PER_SERVER

UNIT_DIR = "/etc/systemd/system"


def service_settings(unit_text: str) -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for line in unit_text.split("[Service]\n", 1)[1].split("\n[", 1)[0].splitlines():
        key, _, value = line.partition("=")
        settings.setdefault(key, []).append(value)
    return settings


def settings_env(files: dict[str, str]) -> dict[str, str]:
    lines = files["/etc/inferstack/bootstrap.env"].splitlines()[1:]
    return dict(line.split("=", 1) for line in lines)


def test_two_cpu_processes_get_two_units_on_their_own_ports_and_numa_nodes():
    plan = two_process_plan(sample_plan("aws", "cpu-llm"))
    files = written_files(render_bootstrap(plan, "aws", options_for(plan, "native")))
    assert f"{UNIT_DIR}/inferstack-server.service" not in files
    for index in (1, 2):
        service = service_settings(files[f"{UNIT_DIR}/inferstack-server-{index}.service"])
        assert service["NUMAPolicy"] == ["bind"] and service["NUMAMask"] == [str(index - 1)]
        assert service["CPUAffinity"] == ["numa"]
        assert f"--port {RUNTIME_PORT + index} " in service["ExecStart"][0]
        assert service["SyslogIdentifier"] == [f"inferstack-server-{index}"]
        assert service["User"] == ["inferstack"]
    env = settings_env(files)
    assert env["RUNTIME_UNITS"] == "inferstack-server-1.service,inferstack-server-2.service"
    assert env["RUNTIME_PORTS"] == f"{RUNTIME_PORT + 1},{RUNTIME_PORT + 2}"
    gateway = files["/etc/inferstack/gateway.conf"]
    upstream = gateway.split("upstream inferstack_runtime {", 1)[1].split("}", 1)[0]
    assert upstream.split() == ["least_conn;", "server", f"127.0.0.1:{RUNTIME_PORT + 1};", "server",
                                f"127.0.0.1:{RUNTIME_PORT + 2};", "keepalive", "32;"]


def test_two_gpu_processes_each_see_their_own_pair_of_gpus():
    plan = two_process_plan(sample_plan("gcp", "gpu-llm"))
    files = written_files(render_bootstrap(plan, "gcp", options_for(plan, "container")))
    starts = [service_settings(files[f"{UNIT_DIR}/inferstack-server-{i}.service"])["ExecStart"][0] for i in (1, 2)]
    for index, devices, start in ((1, "0,1", starts[0]), (2, "2,3", starts[1])):
        assert f"--name inferstack-server-{index} " in start
        assert f"-e CUDA_VISIBLE_DEVICES={devices} " in start
        assert f"-p 127.0.0.1:{RUNTIME_PORT + index}:{RUNTIME_PORT + index} " in start
        assert f"--port {RUNTIME_PORT + index} --tensor-parallel-size 2 " in start
    native = written_files(render_bootstrap(plan, "gcp", options_for(plan, "native")))
    service = service_settings(native[f"{UNIT_DIR}/inferstack-server-2.service"])
    assert "CUDA_VISIBLE_DEVICES=2,3" in service["Environment"] and "NUMAMask" not in service


def test_one_process_renders_one_unit_on_the_runtime_port_without_pinning():
    plan = one_at_a_time(sample_plan("aws", "cpu-llm"))
    files = written_files(render_bootstrap(plan, "aws", options_for(plan, "native")))
    assert [p for p in files if p.startswith(f"{UNIT_DIR}/inferstack-server")] == [
        f"{UNIT_DIR}/inferstack-server.service"]
    service = service_settings(files[f"{UNIT_DIR}/inferstack-server.service"])
    assert "NUMAMask" not in service and "CPUAffinity" not in service
    assert settings_env(files)["RUNTIME_PORTS"] == str(RUNTIME_PORT)
    assert "least_conn" not in files["/etc/inferstack/gateway.conf"]


def test_container_mode_cannot_pin_cpu_processes_and_says_so():
    plan = two_process_plan(sample_plan("aws", "cpu-llm"))
    with pytest.raises(InputError, match=r"options\.install_mode: container mode cannot bind each of the 2 processes"):
        render_bootstrap(plan, "aws", options_for(plan, "container"))


def test_the_loader_accepts_every_process_unit_up_to_the_bound_and_no_further():
    import fetch_bundle  # the server's loader (files/, on the path in conftest.py)

    plan = sample_plan("aws", "gpu-llm")
    most = plan.model_copy(update={"serving": plan.serving.model_copy(update={"processes": MAX_PROCESSES_PER_SERVER}),
                                   "accelerator": plan.accelerator.model_copy(update={"count": 8})})  # type: ignore[union-attr]
    files = written_files(render_bootstrap(most, "aws", options_for(most)))
    paths = [path for path in files if path.startswith(UNIT_DIR)]
    assert len(paths) == MAX_PROCESSES_PER_SERVER + 2  # the processes, the gateway and the boot unit
    assert all(fetch_bundle.ALLOWED_PATH.fullmatch(path) for path in paths), paths
    beyond = f"{UNIT_DIR}/inferstack-server-{MAX_PROCESSES_PER_SERVER + 1}.service"
    assert not fetch_bundle.ALLOWED_PATH.fullmatch(beyond)
