"""The order of boot.sh's phases: the model sync beside the runtime's and the gateway's installs (and beside the
service and the load when the runtime streams the weights, the gateway opening only once the sync has verified them).
On a server of an AWS group with a warm pool: prepared for the pool, it boots to the end (the runtime's first
start writes its compile caches to the disk), stops the runtime and the gateway again and completes its launch hook;
on its way into service it boots to the end and completes the hook last.

The script runs as shipped, its fixed paths moved under tmp_path, with each phase replaced by one that only records
that it ran, and cloud_access.py by a stand-in that answers the target state and records each call (its requests
are tested against botocore and a loopback Auto Scaling in test_bootstrap_cloud_access.py and
test_bootstrap_signers.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_bootstrap_metadata_firewall import server_files

from inferstack.bootstrap import BootstrapOptions, render_bootstrap
from inferstack.bootstrap.render import AWS_LAUNCH_HOOK, LIB_DIR
from inferstack.plan import DeploymentPlan, WarmPool
from tests.sample_plans import sample_plan

PHASES = ["metadata_firewall", "driver", "runtime", "gateway", "model_sync", "service", "model_load"]

FAKE_CLOUD_ACCESS = '''#!{python}
import sys
with open({calls!r}, "a") as calls:
    calls.write(" ".join(sys.argv[1:]) + "\\n")
if sys.argv[1] == "target-lifecycle-state":
    print({state!r})
else:
    print("i-0123456789abcdef0 completed its launch")
'''


def _plan(warm_pool: bool) -> DeploymentPlan:
    plan = sample_plan("aws", "gpu-llm", "production")
    pool = WarmPool(servers=2, disk_gib=120, monthly_storage=None, storage_price_basis="x") if warm_pool else None
    return plan.model_copy(update={"startup": plan.startup.model_copy(update={"warm_pool": pool})})


def _boot(tmp_path: Path, plan: DeploymentPlan, target_state: str, *, bodies: dict[str, str] | None = None,
          settings: str = "", args: tuple[str, ...] = ()) -> tuple[int, str, list[str], list[str]]:
    """Run boot.sh (all phases, or `args`) for `plan`, each phase replaced by a stand-in that records it ran (and runs
    `bodies[name]` first) and `settings` lines added to bootstrap.env; returns (exit code, its output, the phases run,
    cloud_access calls)."""
    files = server_files(render_bootstrap(plan, "aws", BootstrapOptions(model_bucket="acme-models",
                                                                        region=plan.region)))
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "cloud_access.py").write_text(FAKE_CLOUD_ACCESS.format(
        python=sys.executable, calls=str(tmp_path / "calls.log"), state=target_state))
    overrides = tmp_path / "phases.sh"
    overrides.write_text("".join(
        f'phase_{name}() {{ {(bodies or {}).get(name, ":")}; echo {name} >>"{tmp_path}/phases.log"; '
        f'detail "{name} ran"; }}\n' for name in PHASES))
    script = files[f"{LIB_DIR}/boot.sh"].replace(LIB_DIR, str(lib))
    for fixed in ("/var/lib/inferstack", "/run/inferstack-boot", "/var/log/inferstack"):
        assert fixed in script, fixed
        script = script.replace(fixed, str(tmp_path / fixed.strip("/").replace("/", "-")))
    dispatch = 'if [ "${1:-}" = --phase ]; then'
    assert dispatch in script
    script = script.replace(dispatch, f". {overrides}\n{dispatch}", 1)
    (tmp_path / "boot.sh").write_text(script)
    (tmp_path / "bootstrap.env").write_text(files["/etc/inferstack/bootstrap.env"] + settings)
    env = {**os.environ, "INFERSTACK_CONFIG": str(tmp_path / "bootstrap.env")}
    result = subprocess.run(["bash", str(tmp_path / "boot.sh"), *args], env=env, capture_output=True, text=True)
    phases = (tmp_path / "phases.log").read_text().split() if (tmp_path / "phases.log").exists() else []
    calls = (tmp_path / "calls.log").read_text().splitlines() if (tmp_path / "calls.log").exists() else []
    return result.returncode, result.stdout + result.stderr, phases, calls


def _completed(region: str) -> str:
    return f"complete-lifecycle-action --region {region} --cloud aws --hook {AWS_LAUNCH_HOOK}"


def _in_boot_order(phases: list[str]) -> bool:
    """Every phase once; the sync (its own process, beside the installs) after the driver and before the service."""
    return (sorted(phases) == sorted(PHASES) and [p for p in phases if p != "model_sync"] == [
        p for p in PHASES if p != "model_sync"] and phases.index("driver") < phases.index("model_sync")
        < phases.index("service"))


@pytest.mark.parametrize("target_state", ["Warmed:Stopped", "Warmed:Hibernated"])
def test_a_server_prepared_for_the_warm_pool_boots_to_the_end_stops_its_units_and_completes_its_hook(
        tmp_path: Path, target_state: str) -> None:
    plan = _plan(warm_pool=True)
    code, output, phases, calls = _boot(tmp_path, plan, target_state)
    assert code == 0, output
    assert _in_boot_order(phases)  # the runtime starts once, writing its caches, before the pool stops the server
    assert calls == ["target-lifecycle-state", _completed(plan.region)]
    assert "summary: prepared for the warm pool" in output and "lifecycle: i-0123456789abcdef0 completed" in output
    assert output.index("summary: prepared") < output.index("lifecycle: i-0123456789abcdef0 completed")


@pytest.mark.parametrize("target_state", ["InService", ""])
def test_a_server_going_into_service_boots_to_the_end_and_completes_its_hook_last(tmp_path: Path,
                                                                                  target_state: str) -> None:
    plan = _plan(warm_pool=True)
    code, output, phases, calls = _boot(tmp_path, plan, target_state)
    assert code == 0, output
    assert _in_boot_order(phases)
    assert calls == ["target-lifecycle-state", _completed(plan.region)]
    assert output.index("summary: ready") < output.index("lifecycle: i-0123456789abcdef0 completed")


def test_a_group_without_a_warm_pool_neither_asks_nor_completes_anything(tmp_path: Path) -> None:
    code, output, phases, calls = _boot(tmp_path, _plan(warm_pool=False), "Warmed:Stopped")
    assert code == 0, output
    assert _in_boot_order(phases) and calls == []


def test_only_an_aws_fleet_with_a_warm_pool_names_the_launch_hook_in_its_settings() -> None:
    def settings(plan: DeploymentPlan) -> str:
        files = server_files(render_bootstrap(plan, plan.cloud, BootstrapOptions(model_bucket="acme-models",
                                                                                 region=plan.region)))
        return files["/etc/inferstack/bootstrap.env"]

    assert f"\nLIFECYCLE_HOOK={AWS_LAUNCH_HOOK}\n" in settings(_plan(warm_pool=True))
    assert "LIFECYCLE_HOOK" not in settings(_plan(warm_pool=False))


def _timeline(output: str) -> dict[str, tuple[float, float]]:
    return {record["phase"]: (record["start"], record["end"]) for record in (
        json.loads(line.split("inferstack-phase ", 1)[1]) for line in output.splitlines()
        if "inferstack-phase " in line)}


@pytest.mark.parametrize("loading", ["download", "stream"])
def test_the_model_sync_runs_beside_the_installs_and_a_streaming_runtime_starts_before_it_ends(
        tmp_path: Path, loading: str) -> None:
    slow = {"model_sync": "sleep 1.5", "runtime": "sleep 0.5"}
    code, output, _, _ = _boot(tmp_path, _plan(warm_pool=False), "", bodies=slow,
                               settings=f"MODEL_LOADING={loading}\n")
    assert code == 0, output
    timeline = _timeline(output)
    assert timeline["model_sync"][0] < timeline["runtime"][1]  # beside the runtime's install
    if loading == "download":
        assert timeline["service"][0] >= timeline["model_sync"][1]  # the runtime loads the synced files
    else:
        assert timeline["service"][0] < timeline["model_sync"][1]  # it streams them: it need not wait
    assert "summary: ready" in output


def test_a_failed_sync_fails_the_boot_even_when_the_runtime_streams(tmp_path: Path) -> None:
    code, output, _, _ = _boot(tmp_path, _plan(warm_pool=False), "", bodies={"model_sync": "false"},
                               settings="MODEL_LOADING=stream\n")
    assert code == 1 and "FAILED in phase model_sync" in output and "summary: ready" not in output


def _model_load(tmp_path: Path, sync_rc: str | None) -> tuple[int, str]:
    """boot.sh --phase model_load, as shipped, in stream mode: the runtime and the gateway answer at once (`healthy`
    stands in), opening the gateway is recorded, and the sync's result is `sync_rc` (None: never ends)."""
    plan = _plan(warm_pool=False)
    files = server_files(render_bootstrap(plan, "aws", BootstrapOptions(model_bucket="acme-models",
                                                                        region=plan.region)))
    run = tmp_path / "run-inferstack-boot"
    run.mkdir()
    if sync_rc is not None:
        (run / "model_sync.rc").write_text(sync_rc)
    stubs = tmp_path / "stubs.sh"
    stubs.write_text(f'healthy() {{ return 0; }}\n'
                     f'start_or_restart() {{ echo "started $1" >>"{tmp_path}/gateway.log"; }}\n')
    bin_dir = tmp_path / "bin"  # a systemctl that records what it is asked
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(f'#!/bin/sh\necho "systemctl $*" >>"{tmp_path}/gateway.log"\n')
    (bin_dir / "systemctl").chmod(0o755)
    script = files[f"{LIB_DIR}/boot.sh"]
    for fixed in ("/var/lib/inferstack", "/run/inferstack-boot", "/var/log/inferstack"):
        script = script.replace(fixed, str(tmp_path / fixed.strip("/").replace("/", "-")))
    dispatch = 'if [ "${1:-}" = --phase ]; then'
    script = script.replace(dispatch, f". {stubs}\n{dispatch}", 1)
    (tmp_path / "boot.sh").write_text(script)
    (tmp_path / "bootstrap.env").write_text(files["/etc/inferstack/bootstrap.env"]
                                            + "MODEL_LOADING=stream\nREADY_TIMEOUT_S=3\n")
    env = {**os.environ, "INFERSTACK_CONFIG": str(tmp_path / "bootstrap.env"),
           "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = subprocess.run(["bash", str(tmp_path / "boot.sh"), "--phase", "model_load"], env=env,
                            capture_output=True, text=True)
    return int((run / "model_load.rc").read_text()), result.stdout + result.stderr


@pytest.mark.parametrize(("sync_rc", "opened"), [("0", True), ("1", False), (None, False)])
def test_a_streaming_runtimes_gateway_opens_only_once_the_sync_has_verified_the_weights(
        tmp_path: Path, sync_rc: str | None, opened: bool) -> None:
    code, output = _model_load(tmp_path, sync_rc)
    assert (code == 0) == opened, output
    assert (tmp_path / "gateway.log").exists() == opened
    if opened:  # started, but not enabled: after a reboot it waits for that boot's sync again
        assert (tmp_path / "gateway.log").read_text().splitlines()[:2] == [
            "started inferstack-gateway.service", "systemctl disable --quiet inferstack-gateway.service"]
    if sync_rc == "1":
        assert "the gateway stays closed" in output
    if sync_rc is None:
        assert "did not end within" in output


def test_the_install_phases_start_with_an_image_builds_settings_alone(tmp_path: Path) -> None:
    """An image build runs boot.sh's install phases with their own settings only (components/aws/image.py
    INSTALL_SETTINGS): nothing the script reads before it dispatches a phase may need another setting (set -u)."""
    from inferstack.components.aws.image import INSTALL_SETTINGS  # here: pulumi_aws is slow to import

    plan = _plan(warm_pool=False)
    files = server_files(render_bootstrap(plan, "aws", BootstrapOptions(model_bucket="acme-models",
                                                                        region=plan.region)))
    settings = [line for line in files["/etc/inferstack/bootstrap.env"].splitlines()
                if line.split("=", 1)[0] in INSTALL_SETTINGS]
    (tmp_path / "bootstrap.env").write_text("\n".join(settings) + "\n")
    script = files[f"{LIB_DIR}/boot.sh"]
    for fixed in ("/var/lib/inferstack", "/run/inferstack-boot", "/var/log/inferstack"):
        script = script.replace(fixed, str(tmp_path / fixed.strip("/").replace("/", "-")))
    (tmp_path / "boot.sh").write_text(script)
    result = subprocess.run(["bash", str(tmp_path / "boot.sh"), "--phase", "no_such_phase"], capture_output=True,
                            text=True, env={**os.environ, "INFERSTACK_CONFIG": str(tmp_path / "bootstrap.env")})
    assert "unbound variable" not in result.stderr, result.stderr
    assert "unknown phase no_such_phase" in result.stdout + result.stderr
