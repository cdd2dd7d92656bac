"""A replica across servers at boot (bootstrap/replica.py): what is rendered for it, what is refused, and boot.sh's
replica phase, which finds the member a server is. The Ray cluster itself forms for real in test_replica_ray.py."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError
from test_bootstrap_render import assert_units_pass_systemd_analyze_verify, boot_sh_under, written_files

from inferstack.bootstrap import BootstrapOptions, gateway, render_bootstrap, replica
from inferstack.bootstrap.render import LIB_DIR, RenderedBootstrap
from inferstack.errors import InputError
from inferstack.plan import DeploymentPlan
from inferstack.sizing import planner
from inferstack.spec import parse_workload
from tests.sample_plans import sample_plan

HEAD, WORKER = "10.0.1.10", "10.0.1.11"
UNITS = "/etc/systemd/system"


def replica_plan(stage: str = "validation") -> DeploymentPlan:
    """Llama-3.1-405B on H100: one replica of two p5.48xlarge (validation, 0.5 requests/s: no fleet), or a fleet of
    them (internal, 1 request/s)."""
    spec = parse_workload({
        "name": "big", "model": "llama-3.1-405b", "precision": "bf16", "stage": stage,
        "traffic": {"requests_per_s": 0.5 if stage == "validation" else 1, "prompt_tokens": 1000,
                    "output_tokens": 200},
        "placement": {"gpus_allow": ["H100"], "clouds": ["aws"]}})
    plan = planner.plan_workload(spec).outcome("aws").chosen
    assert plan is not None and plan.replica_nodes is not None and plan.replica_nodes.nodes == 2
    assert stage != "validation" or (plan.fleet is None and plan.replicas == 1)
    return plan


def render(plan: DeploymentPlan | None = None, members: dict[str, object] | None = None) -> RenderedBootstrap:
    plan = plan or replica_plan()
    return render_bootstrap(plan, "aws", BootstrapOptions(
        model_bucket="acme-models", region=plan.region,
        replica=members if members is not None else {"head": HEAD, "workers": [WORKER]}))  # type: ignore[arg-type]


def test_the_head_runs_vllm_on_its_ray_node_after_every_worker_joined() -> None:
    files = written_files(render())
    server = files[f"{UNITS}/inferstack-server.service"]
    assert "Requires=inferstack-ray-head.service\nAfter=inferstack-ray-head.service\n" in server
    assert "EnvironmentFile=/etc/inferstack/replica.env\n" in server
    gate = next(line for line in server.splitlines() if "--entrypoint=python3" in line)
    assert gate.startswith("ExecStartPre=/usr/bin/docker run --rm --name inferstack-ray-gate ")
    assert gate.endswith(f"{LIB_DIR}/replica_gate.py --address ${{REPLICA_HEAD}}:6379 --nodes 2 --timeout 1800")
    start = next(line for line in server.splitlines() if line.startswith("ExecStart="))
    assert " --network=host " in start and " -p " not in start  # Ray and NCCL reach the worker; vLLM on loopback
    assert "-e RAY_ADDRESS=${REPLICA_HEAD}:6379 -e VLLM_HOST_IP=${REPLICA_HEAD} " in start
    assert start.endswith("--host 127.0.0.1 --port 18000 --tensor-parallel-size 8 --dtype bfloat16 "
                          "--distributed-executor-backend ray --pipeline-parallel-size 2 --max-model-len 1280 "
                          + start.split("--max-model-len 1280 ", 1)[1])
    assert f"TimeoutStartSec={600 + replica.GATE_TIMEOUT_S}\n" in server  # the gate waits within the start
    assert server.index("--entrypoint=python3") < server.index("ExecStart=")


def test_each_member_has_its_ray_unit_as_the_runtime_user_without_capabilities() -> None:
    files = written_files(render())
    for role in ("head", "worker"):
        unit = files[f"{UNITS}/inferstack-ray-{role}.service"]
        start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
        assert "--user=${RUNTIME_UID}:${RUNTIME_GID} --cap-drop=ALL --security-opt=no-new-privileges" in start
        assert "--network=host" in start and "--entrypoint=ray" in start
        assert "--node-ip-address=${REPLICA_SELF}" in start and "--node-manager-port=6380" in start
        assert "-e VLLM_HOST_IP=${REPLICA_SELF} " in start and "--ulimit nofile=1048576" in start
        assert "ConditionPathExists=/etc/inferstack/replica.env\n" in unit
        # started by the boot after the sync, never by itself before the model's disk is mounted
        assert "[Install]" not in unit and "ExecStartPre=/usr/bin/test -r ${MODEL_DIR}/config.json\n" in unit
    head = files[f"{UNITS}/inferstack-ray-head.service"]
    worker = files[f"{UNITS}/inferstack-ray-worker.service"]
    assert " start --head --port=6379 --include-dashboard=false --block " in head
    assert " start --address=${REPLICA_HEAD}:6379 --block " in worker


def test_the_heads_health_path_drains_while_its_watch_finds_a_worker_lost() -> None:
    result = render()
    files = written_files(result)
    assert f"if (-f {replica.DRAIN_FLAG}) {{\n                return 503 " in files[gateway.CONFIG_PATH]
    watch = files[f"{UNITS}/{replica.WATCH_UNIT}.service"]
    assert (f"ExecStart=/usr/bin/python3 {LIB_DIR}/replica_watch.py --workers {WORKER} --port 6380 "
            f"--drain-flag {replica.DRAIN_FLAG} --restart-unit inferstack-server.service\n") in watch
    assert "RuntimeDirectoryPreserve=yes\n" in watch  # a restarted watch keeps the drain
    assert f"REPLICA_HEAD={HEAD}\nREPLICA_WORKERS={WORKER}\n" in result.user_data.replace("    ", "")


def test_a_plan_of_one_server_per_replica_has_none_of_it() -> None:
    plan = sample_plan("aws", "gpu-llm")
    files = written_files(render_bootstrap(plan, "aws", BootstrapOptions(model_bucket="acme-models",
                                                                         region=plan.region)))
    assert not any("ray" in path or "replica" in path for path in files)
    assert replica.DRAIN_FLAG not in files[gateway.CONFIG_PATH]
    assert "--pipeline-parallel-size" not in files[f"{UNITS}/inferstack-server.service"]


def test_the_replica_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    assert_units_pass_systemd_analyze_verify(render(), tmp_path)


@pytest.mark.parametrize(("members", "message"), [
    (None, "is missing"),
    ({"head": HEAD, "workers": [HEAD]}, "names 1 different server"),
    ({"head": HEAD, "workers": [WORKER, "10.0.1.12"]}, "names 3 different server"),
])
def test_a_replica_without_its_members_addresses_is_refused(members: dict[str, object] | None, message: str) -> None:
    plan = replica_plan()
    with pytest.raises(InputError, match=message) as error:
        render_bootstrap(plan, "aws", BootstrapOptions(model_bucket="acme-models", region=plan.region,
                                                       replica=members))  # type: ignore[arg-type]
    assert error.value.problems[0].field == "options.replica"


def test_a_fleet_of_such_replicas_and_streamed_weights_are_refused() -> None:
    with pytest.raises(InputError, match="fleet of replicas across servers") as error:
        render(replica_plan("internal"))
    assert error.value.problems[0].field == "plan.fleet"
    plan = replica_plan()
    streamed = plan.model_copy(update={"startup": plan.startup.model_copy(update={"model_loading": "stream"})})
    with pytest.raises(InputError, match="no credentials of their own"):
        render_bootstrap(streamed, "aws", BootstrapOptions(
            model_bucket="acme-models", region=plan.region, replica={"head": HEAD, "workers": [WORKER]},
            model_reader_role="arn:aws:iam::123456789012:role/reader"))  # type: ignore[arg-type]


def test_members_for_a_plan_of_one_server_are_refused() -> None:
    with pytest.raises(InputError, match="one server"):
        render(sample_plan("aws", "gpu-llm"))


@pytest.mark.parametrize("address", ["10.0.1.300", "10.0.01.1", "10.0.1.1; reboot", "::1", "${HOME}"])
def test_a_members_address_must_be_a_dotted_ipv4_address(address: str) -> None:
    with pytest.raises(ValidationError):
        BootstrapOptions(model_bucket="acme-models", region="us-east-1",
                         replica={"head": HEAD, "workers": [address]})  # type: ignore[arg-type]


def _replica_phase(tmp_path: Path, source: str) -> tuple[int, str, str]:
    """boot.sh --phase replica, as shipped, its fixed paths under tmp_path and `ip` answering that the route to the
    head leaves from `source`. Returns (its status, replica.env or "", its detail)."""
    moved = dict.fromkeys(("/etc/inferstack/replica.env", "/var/lib/inferstack", "/run/inferstack-boot",
                           "/var/log/inferstack"), "")
    script, env = boot_sh_under(tmp_path, written_files(render()), moved,
                                f"ip() {{ echo '{HEAD} via 10.0.1.1 dev ens5 src {source} uid 0'; }}\n")
    subprocess.run(["bash", str(script), "--phase", "replica"], env=env, capture_output=True, text=True)
    run = tmp_path / "run-inferstack-boot"
    written = tmp_path / "etc-inferstack-replica.env"
    return (int((run / "replica.rc").read_text()), written.read_text() if written.exists() else "",
            (run / "replica.detail").read_text())


@pytest.mark.parametrize(("source", "role"), [(HEAD, "head"), (WORKER, "worker")])
def test_the_replica_phase_finds_which_member_the_server_is(tmp_path: Path, source: str, role: str) -> None:
    status, written, detail = _replica_phase(tmp_path, source)
    assert status == 0, detail
    assert written == f"REPLICA_SELF={source}\nREPLICA_HEAD={HEAD}\nREPLICA_ROLE={role}\n"
    assert detail.startswith(f"{role} of a replica across servers")


def test_a_server_that_is_no_member_of_its_replica_stops_the_boot(tmp_path: Path) -> None:
    status, written, detail = _replica_phase(tmp_path, "10.0.1.99")
    assert status != 0 and written == ""
    assert "is none of its replica's servers" in detail


def _worker_phase(tmp_path: Path, phase: str, port: int, unit_state: str) -> tuple[int, str]:
    """boot.sh --phase `phase` on a worker (replica.env says so), its Ray node expected on loopback `port` and its
    Ray unit in `unit_state`. Returns (status, detail)."""
    moved = dict.fromkeys(("/etc/inferstack/replica.env", "/var/lib/inferstack", "/run/inferstack-boot",
                           "/var/log/inferstack"), "")
    (tmp_path / "etc-inferstack-replica.env").write_text(
        f"REPLICA_SELF={WORKER}\nREPLICA_HEAD={HEAD}\nREPLICA_ROLE=worker\n")
    stubs = f"systemctl() {{ [ \"$1\" = is-active ] && echo {unit_state}; [ {unit_state} = active ]; }}\n"
    script, env = boot_sh_under(tmp_path, written_files(render()), moved, stubs)
    settings = (tmp_path / "bootstrap.env").read_text()
    assert "\nRAY_NODE_MANAGER_PORT=6380\n" in settings
    (tmp_path / "bootstrap.env").write_text(
        settings.replace("RAY_NODE_MANAGER_PORT=6380", f"RAY_NODE_MANAGER_PORT={port}"))
    subprocess.run(["bash", str(script), "--phase", phase], env=env, capture_output=True, text=True, timeout=60)
    run = tmp_path / "run-inferstack-boot"
    return int((run / f"{phase}.rc").read_text()), (run / f"{phase}.detail").read_text()


def test_a_worker_has_no_gateway_and_is_ready_once_its_ray_node_listens(tmp_path: Path) -> None:
    status, detail = _worker_phase(tmp_path, "gateway", 1, "active")
    assert status == 0 and detail.startswith("none: a replica's worker serves nothing itself")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        status, detail = _worker_phase(tmp_path, "model_load", listener.getsockname()[1], "active")
    assert status == 0 and detail == f"Ray worker joined to the replica whose head is {HEAD}"
    with socket.socket() as closed:  # a port nobody listens on, the unit failed: the boot stops
        closed.bind(("127.0.0.1", 0))
        status, detail = _worker_phase(tmp_path, "model_load", closed.getsockname()[1], "failed")
    assert status != 0 and "inferstack-ray-worker.service is not running" in detail


def test_boot_sh_names_the_replicas_units_and_file_as_the_renderer_does() -> None:
    script = written_files(render())[f"{LIB_DIR}/boot.sh"]
    for line in (f"REPLICA_ENV={replica.REPLICA_ENV}", f"RAY_WORKER_UNIT={replica.RAY_UNIT}-worker.service",
                 f"RAY_HEAD_UNIT={replica.RAY_UNIT}-head.service", f"REPLICA_WATCH_UNIT={replica.WATCH_UNIT}.service"):
        assert f"\n{line} #" in script, line
