"""Alibaba's monitoring agents on a server (bootstrap/agents/alibaba.py, files/agent_alibaba.sh): what the bundle of
a telemetry-enabled plan carries, and what the install script does on a server, run here against stand-ins (a
process named like the CloudMonitor agent, a Logtail binary, a systemctl that records its calls)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from sample_plans import sample_plan
from test_bootstrap_render import AGENT_TARGETS

from inferstack.bootstrap import render_bootstrap
from inferstack.bootstrap.agents.alibaba import LOGTAIL_IDENTITY_FILE, machine_group_identity
from inferstack.bootstrap.telemetry import AGENT_SCRIPT, AGENT_UNIT
from tests.bootstrap.test_bootstrap_render import options_for, written_files

TARGET = AGENT_TARGETS["alibaba"]


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    plan = sample_plan("alibaba", "gpu-llm")
    return written_files(render_bootstrap(plan, "alibaba", options_for(plan, telemetry=TARGET)))


def test_the_bundle_carries_the_agent_unit_its_script_and_the_machine_group_identity(files: dict[str, str]) -> None:
    assert f"ExecStart=/bin/bash {AGENT_SCRIPT}" in files[f"/etc/systemd/system/{AGENT_UNIT}.service"]
    assert files[AGENT_SCRIPT].startswith("#!/bin/bash\n")
    assert files[LOGTAIL_IDENTITY_FILE] == "inferstack-prod-server-logs-1a2b3c\n"


def test_without_telemetry_the_bundle_has_no_agent() -> None:
    plan = sample_plan("alibaba", "gpu-llm")
    assert not {AGENT_SCRIPT, LOGTAIL_IDENTITY_FILE} & set(written_files(render_bootstrap(plan, "alibaba",
                                                                                         options_for(plan))))


@pytest.mark.parametrize("logs", ["no-logstore", "/server-logs", "project/"])
def test_a_log_destination_that_is_not_project_and_logstore_is_refused(logs: str) -> None:
    with pytest.raises(ValueError, match="project/logstore"):
        machine_group_identity(logs)


class Server:
    """A root of stand-ins the script is pointed at (its INFERSTACK_* overrides) and a PATH with a systemctl that
    records its arguments."""

    def __init__(self, root: Path, script: str) -> None:
        self.root = root
        self.script = root / "agent.sh"
        self.script.write_text(script)
        self.identity = root / "etc/ilogtail/user_defined_id"
        self.identity.parent.mkdir(parents=True)
        self.identity.write_text("project-a\n")
        self.logtail = root / "usr/local/ilogtail/ilogtail"
        self.cloudmonitor = root / "usr/local/cloudmonitor/bin/argusagent"
        self.calls = root / "systemctl.calls"
        bin_dir = root / "bin"
        bin_dir.mkdir()
        (bin_dir / "systemctl").write_text(f'#!/bin/sh\necho "$*" >> {self.calls}\n')
        (bin_dir / "systemctl").chmod(0o755)
        self.path = f"{bin_dir}:{os.environ['PATH']}"

    def install_logtail(self) -> None:
        self.logtail.parent.mkdir(parents=True, exist_ok=True)
        self.logtail.write_text("#!/bin/sh\n")
        self.logtail.chmod(0o755)

    def run(self) -> subprocess.CompletedProcess[str]:
        env = {"PATH": self.path, "INFERSTACK_CLOUDMONITOR_AGENT": str(self.cloudmonitor),
               "INFERSTACK_CLOUDMONITOR_WAIT_S": "0", "INFERSTACK_LOGTAIL": str(self.logtail),
               "INFERSTACK_LOGTAIL_IDENTITY": str(self.identity), "INFERSTACK_STATE_DIR": str(self.root / "state")}
        return subprocess.run(["bash", str(self.script)], env=env, capture_output=True, text=True, timeout=120)

    def restarts(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []


@pytest.fixture
def server(files: dict[str, str], tmp_path: Path) -> Server:
    return Server(tmp_path, files[AGENT_SCRIPT])


@pytest.fixture
def cloudmonitor(server: Server):  # type: ignore[no-untyped-def]
    """A process whose command line starts with the CloudMonitor agent's path, as the real agent's does."""
    server.cloudmonitor.parent.mkdir(parents=True)
    shutil.copy(shutil.which("sleep") or "/bin/sleep", server.cloudmonitor)
    process = subprocess.Popen([str(server.cloudmonitor), "300"])
    yield process
    process.kill()
    process.wait()


@pytest.mark.usefixtures("cloudmonitor")
def test_logtail_is_restarted_once_per_identity_and_a_second_run_changes_nothing(server: Server) -> None:
    server.install_logtail()
    first = server.run()
    assert first.returncode == 0, first.stdout + first.stderr
    assert server.restarts() == ["restart ilogtaild"]
    again = server.run()
    assert again.returncode == 0 and server.restarts() == ["restart ilogtaild"]
    server.identity.write_text("project-b\n")
    assert server.run().returncode == 0 and server.restarts() == ["restart ilogtaild"] * 2


@pytest.mark.usefixtures("cloudmonitor")
def test_without_logtail_the_script_says_so_and_succeeds_when_cloudmonitor_runs(server: Server) -> None:
    result = server.run()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Logtail is not installed" in result.stdout and server.restarts() == []


def test_without_the_cloudmonitor_agent_the_unit_fails_and_says_why(server: Server) -> None:
    server.install_logtail()
    result = server.run()
    assert result.returncode != 0
    assert "the CloudMonitor agent" in result.stdout and "is not running" in result.stdout
