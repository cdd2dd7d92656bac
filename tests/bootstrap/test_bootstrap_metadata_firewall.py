"""boot.sh's metadata_firewall phase, run for real against a stand-in `iptables` that keeps its chains in a file:
on clouds without metadata session tokens only root may reach 169.254.169.254:80 (host processes and containers),
DNS stays open, a second run adds nothing, and clouds with tokens get no rule at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from sample_plans import one_at_a_time, sample_plan

from inferstack.bootstrap import BootstrapOptions, render_bootstrap
from inferstack.bootstrap.render import RenderedBootstrap

LIB_DIR = "/usr/local/lib/inferstack"
OWNER_RULE = ["-d", "169.254.169.254/32", "-p", "tcp", "--dport", "80", "-m", "owner", "!", "--uid-owner", "0",
              "-j", "REJECT", "--reject-with", "tcp-reset"]
CONTAINER_RULE = ["-d", "169.254.169.254/32", "-p", "tcp", "--dport", "80", "-j", "REJECT", "--reject-with",
                  "tcp-reset"]

# A stand-in for iptables: chains and rules in a JSON file, every call logged; -w (wait for the lock) is accepted.
FAKE_IPTABLES = '''#!{python}
import json, sys
state_file, log_file = {state!r}, {log!r}
args = [a for a in sys.argv[1:] if a != "-w"]
with open(log_file, "a") as log:
    log.write(" ".join(args) + "\\n")
chains = json.load(open(state_file))
def save():
    json.dump(chains, open(state_file, "w"))
if args[:2] == ["-n", "-L"]:
    sys.exit(0 if args[2] in chains else 1)
op, chain, rest = args[0], args[1], args[2:]
if op == "-N":
    if chain in chains: sys.exit(1)
    chains[chain] = []; save(); sys.exit(0)
if chain not in chains: sys.exit(2)
if op == "-C":
    sys.exit(0 if rest in chains[chain] else 1)
if op == "-I":
    chains[chain].insert(int(rest[0]) - 1, rest[1:]); save(); sys.exit(0)
sys.exit(3)
'''


def boot_files(cloud: str, variant: str, install_mode: str = "auto") -> dict[str, str]:
    plan = sample_plan(cloud, variant)  # type: ignore[arg-type]
    plan = one_at_a_time(plan) if install_mode == "native" else plan
    return server_files(render_bootstrap(plan, cloud, BootstrapOptions(
        model_bucket="acme-models", region=plan.region, install_mode=install_mode)))


def server_files(result: RenderedBootstrap) -> dict[str, str]:
    """What the server ends up with: the user data's files and the bundle's."""
    files = {f["path"]: f["content"] for f in yaml.safe_load(result.user_data)["write_files"]}
    return {**files, **{f["path"]: f["content"] for f in json.loads(result.bundle)["files"]}}


def run_phase(tmp_path: Path, files: dict[str, str], chains: dict[str, list[list[str]]]) -> tuple[str, list[str]]:
    """Run `boot.sh --phase metadata_firewall` with its state and lock under tmp_path; returns detail and calls."""
    state, log = tmp_path / "iptables.json", tmp_path / "iptables.log"
    if not state.exists():
        state.write_text(json.dumps(chains))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "iptables"
    fake.write_text(FAKE_IPTABLES.format(python=sys.executable, state=str(state), log=str(log)))
    fake.chmod(0o755)
    # The script as shipped, its fixed state paths moved under tmp_path (the only change).
    script = files[f"{LIB_DIR}/boot.sh"]
    for fixed in ("/var/lib/inferstack", "/run/inferstack-boot", "/run/inferstack-metadata-firewall.lock",
                  "/var/log/inferstack"):
        script = script.replace(fixed, str(tmp_path / fixed.strip("/").replace("/", "-")))
    (tmp_path / "boot.sh").write_text(script)
    (tmp_path / "bootstrap.env").write_text(files["/etc/inferstack/bootstrap.env"])
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "INFERSTACK_CONFIG": str(tmp_path / "bootstrap.env")}
    result = subprocess.run(["bash", str(tmp_path / "boot.sh"), "--phase", "metadata_firewall"], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    detail = (tmp_path / "run-inferstack-boot" / "phase-detail").read_text()
    calls = log.read_text().splitlines() if log.exists() else []
    return detail, calls


def chains_of(tmp_path: Path) -> dict[str, list[list[str]]]:
    chains: dict[str, list[list[str]]] = json.loads((tmp_path / "iptables.json").read_text())
    return chains


@pytest.mark.parametrize("cloud", ["gcp", "huawei"])
def test_only_root_reaches_the_metadata_server_from_the_host_and_no_container_does(tmp_path: Path, cloud: str) -> None:
    files = boot_files(cloud, "gpu-llm")  # vLLM in a container
    assert "METADATA_FIREWALL=1" in files["/etc/inferstack/bootstrap.env"]
    detail, _ = run_phase(tmp_path, files, {"OUTPUT": [], "FORWARD": []})
    assert chains_of(tmp_path) == {"OUTPUT": [OWNER_RULE], "FORWARD": [], "DOCKER-USER": [CONTAINER_RULE]}
    assert detail == ("only root reaches 169.254.169.254:80 (non-root processes and containers are refused; DNS "
                      "stays open)")


def test_a_second_run_adds_nothing(tmp_path: Path) -> None:
    files = boot_files("gcp", "gpu-llm")
    _, first_calls = run_phase(tmp_path, files, {"OUTPUT": [], "FORWARD": []})
    first = chains_of(tmp_path)
    _, calls = run_phase(tmp_path, files, {})
    assert chains_of(tmp_path) == first
    second_calls = calls[len(first_calls):]
    assert second_calls and not [call for call in second_calls if call.startswith(("-I", "-N"))]


def test_rules_go_before_those_docker_already_has(tmp_path: Path) -> None:
    docker_was_here = {"OUTPUT": [["-j", "ACCEPT"]], "DOCKER-USER": [["-j", "RETURN"]]}
    run_phase(tmp_path, boot_files("huawei", "cpu-encoder"), docker_was_here)  # Triton in a container
    chains = chains_of(tmp_path)
    assert chains["OUTPUT"] == [OWNER_RULE, ["-j", "ACCEPT"]]
    assert chains["DOCKER-USER"] == [CONTAINER_RULE, ["-j", "RETURN"]]


def test_a_native_server_gets_the_host_rule_and_no_docker_chain(tmp_path: Path) -> None:
    files = boot_files("huawei", "cpu-llm", "native")  # llama.cpp installed natively
    assert "INSTALL_MODE=native" in files["/etc/inferstack/bootstrap.env"]
    detail, _ = run_phase(tmp_path, files, {"OUTPUT": []})
    assert chains_of(tmp_path) == {"OUTPUT": [OWNER_RULE]}
    assert "non-root processes are refused" in detail


@pytest.mark.parametrize("cloud", ["aws", "alibaba"])
def test_clouds_whose_metadata_demands_tokens_get_no_rule(tmp_path: Path, cloud: str) -> None:
    files = boot_files(cloud, "gpu-llm")
    detail, calls = run_phase(tmp_path, files, {"OUTPUT": []})
    assert calls == [] and chains_of(tmp_path) == {"OUTPUT": []}
    assert detail == f"{cloud} metadata server demands session tokens: no host rule needed"
    assert "metadata_firewall" not in files["/etc/systemd/system/inferstack-server.service"]


def test_the_server_applies_the_rules_before_it_starts_and_before_it_fetches_its_secret() -> None:
    plan = sample_plan("gcp", "gpu-llm")
    result = render_bootstrap(plan, "gcp", BootstrapOptions(model_bucket="bucket", region=plan.region,
                                                            hub_token_secret="projects/p/secrets/k"))
    unit = server_files(result)["/etc/systemd/system/inferstack-server.service"]
    pre = [line for line in unit.splitlines() if line.startswith("ExecStartPre=")]
    assert pre[0] == f"ExecStartPre=+{LIB_DIR}/boot.sh --phase metadata_firewall" and "fetch_secret.py" in pre[1]
