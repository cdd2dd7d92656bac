"""The runtime never reaches the instance metadata server, on every cloud and in both install modes.

boot.sh's metadata_firewall phase runs for real against stand-ins for `iptables` and `ip6tables` that keep their
chains in files: only root may open port 80 of the cloud's metadata addresses (host processes), no container at all
(Docker's DOCKER-USER chain), DNS stays open, a second run adds nothing. The rendered runtime units apply the rules
before they start, and a native runtime's unit is denied the addresses outright (`IPAddressDeny=`) while its secret
fetch, which needs the metadata server, runs in a unit of its own. Session tokens (AWS, Alibaba) change none of it:
they stop an SSRF, not code running on the server."""

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
# Each cloud's metadata addresses as its own documentation gives them (the sources are beside CloudFacts in
# inferstack/clouds.py): written out here, so that a cloud dropped from the registry's list fails these tests.
METADATA_ADDRESSES = {"aws": ["169.254.169.254", "fd00:ec2::254"], "gcp": ["169.254.169.254"],
                      "alibaba": ["100.100.100.200"], "huawei": ["169.254.169.254"]}
CLOUDS = sorted(METADATA_ADDRESSES)


def owner_rule(address: str) -> list[str]:
    """Port 80 of `address` refused to every process but root's (from the host: the OUTPUT chain)."""
    prefix = "128" if ":" in address else "32"
    return ["-d", f"{address}/{prefix}", "-p", "tcp", "--dport", "80", "-m", "owner", "!", "--uid-owner", "0",
            "-j", "REJECT", "--reject-with", "tcp-reset"]


def container_rule(address: str) -> list[str]:
    """Port 80 of `address` refused to every container (forwarded from Docker's bridge: DOCKER-USER)."""
    return ["-d", f"{address}/32", "-p", "tcp", "--dport", "80", "-j", "REJECT", "--reject-with", "tcp-reset"]


def ipv4(cloud: str) -> list[str]:
    return [address for address in METADATA_ADDRESSES[cloud] if ":" not in address]


def ipv6(cloud: str) -> list[str]:
    return [address for address in METADATA_ADDRESSES[cloud] if ":" in address]


# A stand-in for iptables and ip6tables: chains and rules in a JSON file per tool, every call logged with the tool's
# name; -w (wait for the lock) is accepted.
FAKE_IPTABLES = '''#!{python}
import json, os, sys
tool = os.path.basename(sys.argv[0])
state_file, log_file = os.path.join({state_dir!r}, tool + ".json"), {log!r}
args = [a for a in sys.argv[1:] if a != "-w"]
with open(log_file, "a") as log:
    log.write(" ".join([tool, *args]) + "\\n")
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


def boot_files(cloud: str, variant: str, install_mode: str = "auto", hub_token_secret: str | None = None
               ) -> dict[str, str]:
    plan = sample_plan(cloud, variant)  # type: ignore[arg-type]
    plan = one_at_a_time(plan) if install_mode == "native" else plan
    return server_files(render_bootstrap(plan, cloud, BootstrapOptions(  # type: ignore[arg-type]
        model_bucket="acme-models", region=plan.region, install_mode=install_mode,
        hub_token_secret=hub_token_secret)))


def server_files(result: RenderedBootstrap) -> dict[str, str]:
    """What the server ends up with: the user data's files and the bundle's."""
    files = {f["path"]: f["content"] for f in yaml.safe_load(result.user_data)["write_files"]}
    return {**files, **{f["path"]: f["content"] for f in json.loads(result.bundle)["files"]}}


def run_phase(tmp_path: Path, files: dict[str, str], chains: dict[str, list[list[str]]],
              chains6: dict[str, list[list[str]]] | None = None, ipv6_stack: bool = True,
              resolv_conf: str = "nameserver 127.0.0.53\n") -> tuple[str, list[str]]:
    """Run `boot.sh --phase metadata_firewall` with its state, lock, resolver file and IPv6 marker under tmp_path;
    `chains` and `chains6` are iptables' and ip6tables' chains before the first run. Returns detail and calls."""
    log = tmp_path / "iptables.log"
    for tool, start in (("iptables", chains), ("ip6tables", chains6 if chains6 is not None else {"OUTPUT": []})):
        if not (tmp_path / f"{tool}.json").exists():
            (tmp_path / f"{tool}.json").write_text(json.dumps(start))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("iptables", "ip6tables"):
        fake = bin_dir / tool
        fake.write_text(FAKE_IPTABLES.format(python=sys.executable, state_dir=str(tmp_path), log=str(log)))
        fake.chmod(0o755)
    (tmp_path / "if_inet6").write_text("00000000000000000000000000000001 01 80 10 80       lo\n")
    (tmp_path / "resolv.conf").write_text(resolv_conf)
    # The script as shipped, its fixed paths moved under tmp_path (the only change).
    script = files[f"{LIB_DIR}/boot.sh"]
    moved = {"/proc/net/if_inet6": str(tmp_path / ("if_inet6" if ipv6_stack else "no-ipv6")),
             "/etc/resolv.conf": str(tmp_path / "resolv.conf")}
    for fixed in ("/var/lib/inferstack", "/run/inferstack-boot", "/run/inferstack-metadata-firewall.lock",
                  "/var/log/inferstack"):
        moved[fixed] = str(tmp_path / fixed.strip("/").replace("/", "-"))
    for fixed, there in moved.items():
        assert fixed in script, fixed
        script = script.replace(fixed, there)
    (tmp_path / "boot.sh").write_text(script)
    (tmp_path / "bootstrap.env").write_text(files["/etc/inferstack/bootstrap.env"])
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "INFERSTACK_CONFIG": str(tmp_path / "bootstrap.env")}
    result = subprocess.run(["bash", str(tmp_path / "boot.sh"), "--phase", "metadata_firewall"], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    detail = (tmp_path / "run-inferstack-boot" / "metadata_firewall.detail").read_text()
    calls = log.read_text().splitlines() if log.exists() else []
    return detail, calls


def chains_of(tmp_path: Path, tool: str = "iptables") -> dict[str, list[list[str]]]:
    chains: dict[str, list[list[str]]] = json.loads((tmp_path / f"{tool}.json").read_text())
    return chains


def reached(cloud: str) -> str:
    return " ".join(f"[{a}]:80" if ":" in a else f"{a}:80" for a in METADATA_ADDRESSES[cloud])


@pytest.mark.parametrize("cloud", CLOUDS)
def test_only_root_reaches_the_metadata_server_from_the_host_and_no_container_does(tmp_path: Path, cloud: str) -> None:
    files = boot_files(cloud, "gpu-llm")  # vLLM in a container
    assert "INSTALL_MODE=container" in files["/etc/inferstack/bootstrap.env"]
    detail, _ = run_phase(tmp_path, files, {"OUTPUT": [], "FORWARD": []})
    assert chains_of(tmp_path) == {"OUTPUT": [owner_rule(a) for a in reversed(ipv4(cloud))], "FORWARD": [],
                                   "DOCKER-USER": [container_rule(a) for a in reversed(ipv4(cloud))]}
    assert chains_of(tmp_path, "ip6tables") == {"OUTPUT": [owner_rule(a) for a in reversed(ipv6(cloud))]}
    assert detail == (f"only root reaches {reached(cloud)} (non-root processes and containers are refused; DNS stays "
                      "open)")


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_native_runtime_gets_the_host_rule_and_no_docker_chain(tmp_path: Path, cloud: str) -> None:
    files = boot_files(cloud, "cpu-llm", "native")  # llama.cpp installed natively
    assert "INSTALL_MODE=native" in files["/etc/inferstack/bootstrap.env"]
    detail, _ = run_phase(tmp_path, files, {"OUTPUT": []})
    assert chains_of(tmp_path) == {"OUTPUT": [owner_rule(a) for a in reversed(ipv4(cloud))]}
    assert chains_of(tmp_path, "ip6tables") == {"OUTPUT": [owner_rule(a) for a in reversed(ipv6(cloud))]}
    assert detail == f"only root reaches {reached(cloud)} (non-root processes are refused; DNS stays open)"


def test_a_second_run_adds_nothing(tmp_path: Path) -> None:
    files = boot_files("aws", "gpu-llm")
    _, first_calls = run_phase(tmp_path, files, {"OUTPUT": [], "FORWARD": []})
    first, first6 = chains_of(tmp_path), chains_of(tmp_path, "ip6tables")
    _, calls = run_phase(tmp_path, files, {})
    assert chains_of(tmp_path) == first and chains_of(tmp_path, "ip6tables") == first6
    second_calls = [call.split() for call in calls[len(first_calls):]]
    assert second_calls and not [call for call in second_calls if call[1] in ("-I", "-N")]


def test_rules_go_before_those_docker_already_has(tmp_path: Path) -> None:
    docker_was_here = {"OUTPUT": [["-j", "ACCEPT"]], "DOCKER-USER": [["-j", "RETURN"]]}
    run_phase(tmp_path, boot_files("alibaba", "cpu-encoder"), docker_was_here)  # Triton in a container
    chains = chains_of(tmp_path)
    assert chains["OUTPUT"] == [owner_rule("100.100.100.200"), ["-j", "ACCEPT"]]
    assert chains["DOCKER-USER"] == [container_rule("100.100.100.200"), ["-j", "RETURN"]]


def test_a_kernel_without_ipv6_gets_no_ipv6_rule(tmp_path: Path) -> None:
    detail, calls = run_phase(tmp_path, boot_files("aws", "gpu-llm"), {"OUTPUT": []}, ipv6_stack=False)
    assert not [call for call in calls if call.startswith("ip6tables")]
    assert chains_of(tmp_path)["OUTPUT"] == [owner_rule("169.254.169.254")]
    assert detail.startswith("only root reaches 169.254.169.254:80 (")


@pytest.mark.parametrize(("install_mode", "resolver", "warned"), [
    ("native", "169.254.169.254", True), ("native", "127.0.0.53", False), ("container", "169.254.169.254", False)])
def test_a_native_runtime_resolving_through_the_metadata_address_is_warned_of(
        tmp_path: Path, install_mode: str, resolver: str, warned: bool) -> None:
    """Google's metadata server is also the VM's resolver: a native runtime, denied the address outright, resolves
    names only through a local stub (systemd-resolved's 127.0.0.53 on the Ubuntu images the components boot). A
    container's DNS is not the unit's: only port 80 is refused to it."""
    files = boot_files("gcp", "cpu-llm" if install_mode == "native" else "gpu-llm", install_mode)
    detail, _ = run_phase(tmp_path, files, {"OUTPUT": [], "FORWARD": []},
                          resolv_conf=f"# managed\nsearch c.project.internal\nnameserver {resolver}\n")
    warning = "; WARNING: " in detail
    assert warning is warned, detail
    if warned:
        assert detail.endswith("names the resolver 169.254.169.254, which the runtime may not reach: it resolves no "
                               "names")


#### The runtime's units ####


def unit_settings(files: dict[str, str], unit: str = "inferstack-server.service") -> list[tuple[str, str]]:
    lines = files[f"/etc/systemd/system/{unit}"].splitlines()
    return [(key, value) for key, _, value in (line.partition("=") for line in lines) if _]


@pytest.mark.parametrize("cloud", CLOUDS)
@pytest.mark.parametrize(("variant", "install_mode"), [("gpu-llm", "container"), ("cpu-llm", "native")])
def test_the_runtime_applies_the_rules_before_it_starts_and_before_it_fetches_its_secret(
        cloud: str, variant: str, install_mode: str) -> None:
    files = boot_files(cloud, variant, install_mode, hub_token_secret="hub-token")
    pre = [value for key, value in unit_settings(files) if key == "ExecStartPre"]
    assert pre[0] == f"+{LIB_DIR}/boot.sh --phase metadata_firewall" and "fetch_secret.py" in pre[1]


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_native_runtimes_unit_is_denied_the_metadata_addresses_and_fetches_its_secret_in_a_unit_of_its_own(
        cloud: str) -> None:
    """IPAddressDeny= filters every process of the unit, its ExecStartPre= lines too (systemd.resource-control(5)):
    the secret fetch, which reads the instance's credentials from the metadata server, runs as a transient unit."""
    settings = unit_settings(boot_files(cloud, "cpu-llm", "native", hub_token_secret="hub-token"))
    assert ("IPAddressDeny", " ".join(METADATA_ADDRESSES[cloud])) in settings
    (fetch,) = [value for key, value in settings if key == "ExecStartPre" and "fetch_secret.py" in value]
    assert fetch.startswith("+/usr/bin/systemd-run --quiet --wait --pipe --collect /usr/bin/python3 ")


def test_a_container_runtimes_unit_has_no_ip_filter_as_it_would_filter_only_the_docker_client() -> None:
    """The container's packets leave from its own network namespace and cgroup (DOCKER-USER refuses them); the
    unit's processes are the docker client and the secret fetch, which keeps its plain root ExecStartPre=."""
    settings = unit_settings(boot_files("aws", "gpu-llm", "container", hub_token_secret="hub-token"))
    assert "IPAddressDeny" not in dict(settings)
    (fetch,) = [value for key, value in settings if key == "ExecStartPre" and "fetch_secret.py" in value]
    assert fetch.startswith("+/usr/bin/python3 ")
