"""Interruption: a server that may run on spot capacity watches its cloud's notice and drains itself.

The watcher (`files/interruption_watch.py`) against the loopback stand-in of the metadata servers
(bootstrap_fakes.metadata_server), each cloud's notice in the shape its vendor documents; the rendered unit and the
gateway's drain check for an interruptible plan, and neither for any other; and Debian's nginx with the rendered
configuration answering 503 on the health path while the drain flag exists, while a request already in flight
finishes. The chroot end-to-end test (test_bootstrap_e2e.py) runs the whole: the booted watcher, a notice, the drain.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import interruption_watch
import pytest
from bootstrap_fakes import (
    ALIBABA_TERMINATION_TIME,
    AWS_INSTANCE_ACTION,
    AWS_REBALANCE,
    GCP_PREEMPTED,
    SESSION_TOKEN_PREFIX,
    MetadataNotices,
    free_port,
    metadata_server,
)
from sample_plans import one_at_a_time, sample_plan
from test_bootstrap_python38 import PYTHON_3_8
from test_bootstrap_render import assert_units_pass_systemd_analyze_verify, options_for, written_files
from test_gateway import API_KEY, Gateway, local_config, nginx_serving, runtime

from inferstack.bootstrap import gateway, interruption, render_bootstrap
from inferstack.bootstrap.render import LIB_DIR, UNIT_DIR, shipped_copy
from inferstack.clouds import CLOUD_FACTS
from inferstack.plan import DeploymentPlan

AWS_NOTICE = json.dumps({"action": "terminate", "time": "2026-12-07T08:22:00Z"})
NOTICES = {  # cloud: (the notice's path, the body the cloud posts once it interrupts the server)
    "aws": (AWS_INSTANCE_ACTION, AWS_NOTICE),
    "gcp": (GCP_PREEMPTED, "TRUE"),
    "alibaba": (ALIBABA_TERMINATION_TIME, "2026-12-07T08:27:00Z"),
}
UNIT_PATH = f"{UNIT_DIR}/{interruption.UNIT}.service"
WATCHER_PATH = f"{LIB_DIR}/{interruption.WATCHER}"


@pytest.fixture
def notices() -> Iterator[tuple[MetadataNotices, str]]:
    posted = MetadataNotices()
    with metadata_server(notices=posted) as url:
        yield posted, url


def spot(plan: DeploymentPlan) -> DeploymentPlan:
    return plan.model_copy(update={"spot": True})


#### The watcher, against the stand-in metadata server ####


@pytest.mark.parametrize("cloud", sorted(NOTICES))
def test_a_notice_drains_the_server_and_nothing_before_it(cloud: str, notices: tuple[MetadataNotices, str],
                                                          tmp_path: Path) -> None:
    posted, url = notices
    flag = tmp_path / "drain" / "draining"
    watcher = interruption_watch.Watcher(cloud, str(flag), url)
    for _ in range(3):  # no notice: every round reads it again, and nothing drains
        watcher.check()
    assert not flag.exists()
    path, body = NOTICES[cloud]
    posted.posted[path] = body
    watcher.check()
    assert flag.exists() and watcher.draining
    assert [asked for asked, _ in posted.asked].count(path) == 4


def test_aws_reads_the_notice_with_one_imdsv2_token_and_renews_it_when_refused(
        notices: tuple[MetadataNotices, str], tmp_path: Path) -> None:
    posted, url = notices
    watcher = interruption_watch.Watcher("aws", str(tmp_path / "draining"), url)
    for _ in range(3):
        watcher.check()
    assert posted.tokens_issued == [f"{SESSION_TOKEN_PREFIX}1"]  # one PUT /latest/api/token, kept
    assert {header for path, header in posted.asked if path == AWS_INSTANCE_ACTION} == {f"{SESSION_TOKEN_PREFIX}1"}
    posted.tokens_revoked = 1  # the token expires: 401, a new token, the same round reads the notice
    posted.posted[AWS_INSTANCE_ACTION] = AWS_NOTICE
    watcher.check()
    assert posted.tokens_issued == [f"{SESSION_TOKEN_PREFIX}1", f"{SESSION_TOKEN_PREFIX}2"]
    reads = [header for path, header in posted.asked if path == AWS_INSTANCE_ACTION]
    assert reads[-2:] == [f"{SESSION_TOKEN_PREFIX}1", f"{SESSION_TOKEN_PREFIX}2"]
    assert watcher.draining


def test_alibaba_reads_the_notice_with_a_hardened_mode_token_and_gcp_with_its_flavor_header(
        notices: tuple[MetadataNotices, str], tmp_path: Path) -> None:
    posted, url = notices
    interruption_watch.Watcher("alibaba", str(tmp_path / "a"), url).check()
    interruption_watch.Watcher("gcp", str(tmp_path / "g"), url).check()
    assert posted.asked == [(ALIBABA_TERMINATION_TIME, f"{SESSION_TOKEN_PREFIX}1"), (GCP_PREEMPTED, "Google")]


def test_the_watch_loop_keeps_polling_at_its_interval_while_there_is_no_notice(
        notices: tuple[MetadataNotices, str], tmp_path: Path) -> None:
    posted, url = notices
    started = time.monotonic()
    interruption_watch.watch("aws", str(tmp_path / "draining"), url, poll_interval_s=0.05, rounds=5)
    assert time.monotonic() - started >= 4 * 0.05
    assert [path for path, _ in posted.asked if path == AWS_INSTANCE_ACTION] == [AWS_INSTANCE_ACTION] * 5
    assert not (tmp_path / "draining").exists()


def test_a_notice_that_is_gone_lifts_the_drain_and_a_stale_flag_is_lifted_at_start(
        notices: tuple[MetadataNotices, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    posted, url = notices
    flag = tmp_path / "draining"
    flag.write_text("left by a run before a hibernation\n")
    watcher = interruption_watch.Watcher("alibaba", str(flag), url)
    watcher.check()
    assert not flag.exists()
    posted.posted[ALIBABA_TERMINATION_TIME] = NOTICES["alibaba"][1]
    watcher.check()
    watcher.check()
    assert flag.exists()
    del posted.posted[ALIBABA_TERMINATION_TIME]
    watcher.check()
    assert not flag.exists()
    lines = capsys.readouterr().err.splitlines()
    assert sum("draining" in line for line in lines) == 1  # one line when it drains, not one per round
    assert "inferstack interruption: alibaba notice '2026-12-07T08:27:00Z': draining" in lines[1]


def test_a_metadata_server_that_does_not_answer_changes_nothing_and_is_logged_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flag = tmp_path / "draining"
    flag.write_text("draining\n")
    watcher = interruption_watch.Watcher("gcp", str(flag), f"http://127.0.0.1:{free_port()}")
    for _ in range(3):
        watcher.check()
    assert flag.exists() and watcher.draining  # an unanswered read is not "no notice"
    assert capsys.readouterr().err.count("cannot read the notice") == 1


def test_an_aws_rebalance_recommendation_is_logged_once_and_does_not_drain(
        notices: tuple[MetadataNotices, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    posted, url = notices
    posted.posted[AWS_REBALANCE] = json.dumps({"noticeTime": "2026-12-07T08:17:00Z"})
    watcher = interruption_watch.Watcher("aws", str(tmp_path / "draining"), url)
    for _ in range(3):
        watcher.check()
    assert not watcher.draining
    assert capsys.readouterr().err.count("rebalance recommendation") == 1


def test_a_failed_read_of_the_rebalance_recommendation_never_holds_back_the_drain(
        notices: tuple[MetadataNotices, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    posted, url = notices
    path, body = NOTICES["aws"]
    posted.posted[path] = body
    watcher = interruption_watch.Watcher("aws", str(tmp_path / "draining"), url)
    read = watcher.reader.get

    def rebalance_unreadable(item: str) -> str | None:
        if item == AWS_REBALANCE:
            raise interruption_watch.AccessError("the metadata server timed out")
        return read(item)

    monkeypatch.setattr(watcher.reader, "get", rebalance_unreadable)
    watcher.check()
    assert watcher.draining and (tmp_path / "draining").exists()


def test_a_notice_from_the_metadata_server_is_logged_on_one_line_and_cut_short() -> None:
    assert interruption_watch.one_line("a\nb\x1b[31m" + "x" * 500) == "a b [31m" + "x" * 192


def test_every_cloud_is_watched_or_says_why_not() -> None:
    assert set(interruption_watch.NOTICE_PATHS) | set(interruption_watch.UNWATCHED) == set(CLOUD_FACTS)
    assert not set(interruption_watch.NOTICE_PATHS) & set(interruption_watch.UNWATCHED)
    assert "no interruption notice" in (interruption.unwatched_reason("huawei") or "")
    with pytest.raises(ValueError, match="Huawei Cloud documents no interruption notice"):
        interruption_watch.Watcher("huawei", "/run/inferstack-drain/draining")


def test_the_shipped_watcher_drains_as_the_server_runs_it(notices: tuple[MetadataNotices, str],
                                                          tmp_path: Path) -> None:
    """The program as the bundle ships it (no comments, its sibling cloud_access.py), run as the unit runs it, on
    Python 3.8 where one is installed (the oldest the boot programs support)."""
    posted, url = notices
    for name in ("cloud_access.py", interruption.WATCHER):
        (tmp_path / name).write_text(shipped_copy(name))
    flag = tmp_path / "drain" / "draining"
    watcher = subprocess.Popen([PYTHON_3_8 or sys.executable, str(tmp_path / interruption.WATCHER), "--cloud", "aws",
                                "--drain-flag", str(flag), "--metadata-endpoint", url, "--poll-interval-s", "0.1"],
                               stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        assert not flag.exists() and watcher.poll() is None
        posted.posted[AWS_INSTANCE_ACTION] = AWS_NOTICE
        deadline = time.monotonic() + 5
        while not flag.exists():
            assert time.monotonic() < deadline and watcher.poll() is None, "no drain"
            time.sleep(0.02)
        assert flag.parent.stat().st_mode & 0o777 == 0o755  # the gateway's workers may see the flag
    finally:
        watcher.terminate()
        _, errors = watcher.communicate(timeout=10)
    assert errors.count("draining") == 1, errors


def test_the_watcher_refuses_a_relative_drain_flag_and_a_cloud_without_a_notice() -> None:
    with pytest.raises(SystemExit):
        interruption_watch.main(["--cloud", "aws", "--drain-flag", "../draining"])
    assert interruption_watch.main(["--cloud", "huawei", "--drain-flag", "/run/inferstack-drain/draining"]) == 2


#### What the bootstrap renders ####


@pytest.mark.parametrize("cloud", sorted(NOTICES))
def test_an_interruptible_plan_gets_the_watcher_and_the_gateways_drain_check(cloud: str, tmp_path: Path) -> None:
    plan = spot(one_at_a_time(sample_plan(cloud, "cpu-llm")))  # type: ignore[arg-type]
    assert plan.interruptible
    files = written_files(render_bootstrap(plan, cloud, options_for(plan, "native")))
    assert files[WATCHER_PATH] == shipped_copy(interruption.WATCHER)
    unit = files[UNIT_PATH]
    assert (f"ExecStart=/usr/bin/python3 {WATCHER_PATH} --cloud {cloud} --drain-flag {interruption.DRAIN_FLAG}\n"
            in unit)
    # root, for the host rule that lets only root reach the metadata server; and nothing else of root's
    assert "User=" not in unit and "CapabilityBoundingSet=\n" in unit and "ProtectSystem=strict\n" in unit
    addresses = " ".join(CLOUD_FACTS[cloud].metadata_addresses)
    assert f"IPAddressDeny=any\nIPAddressAllow=localhost {addresses}\n" in unit
    assert "RuntimeDirectory=inferstack-drain\nRuntimeDirectoryMode=0755\n" in unit
    assert f"if (-f {interruption.DRAIN_FLAG}) {{\n                return 503 " in files[gateway.CONFIG_PATH]
    assert_units_pass_systemd_analyze_verify(render_bootstrap(plan, cloud, options_for(plan, "native")), tmp_path)


@pytest.mark.parametrize(("cloud", "interruptible"), [("aws", False), ("gcp", False), ("huawei", True)])
def test_no_watcher_and_no_drain_check_where_the_server_is_never_interrupted_or_cannot_see_it(
        cloud: str, interruptible: bool) -> None:
    plan = sample_plan(cloud, "gpu-llm")  # type: ignore[arg-type]
    plan = spot(plan) if interruptible else plan
    assert plan.interruptible == interruptible
    files = written_files(render_bootstrap(plan, cloud, options_for(plan)))
    assert WATCHER_PATH not in files and UNIT_PATH not in files
    assert interruption.DRAIN_FLAG not in files[gateway.CONFIG_PATH]


#### Debian's nginx, with the rendered configuration ####

HOLD_S = 1.5


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed (make test installs it)")
def test_with_the_drain_flag_the_health_path_answers_503_and_a_request_in_flight_finishes(tmp_path: Path) -> None:
    plan = spot(sample_plan("aws", "cpu-llm", "production"))
    # Where nginx's workers (www-data, when the test runs as root) may look, as in /run/inferstack-drain (0755): in a
    # directory they cannot search, `-f` is false, and the server would never drain.
    drain_dir = Path(tempfile.mkdtemp(prefix="inferstack-drain-"))
    drain_dir.chmod(0o755)
    flag = drain_dir / "draining"
    with runtime() as backend:
        port = free_port()
        config = local_config(plan, tmp_path, port, backend.port, api_key=True,
                              moved_too={interruption.DRAIN_FLAG: str(flag)})
        with nginx_serving(config, tmp_path, port, plan.serving.health_path), ThreadPoolExecutor(2) as pool:
            gateway_ = Gateway(port, backend, tmp_path / "access.log")
            assert gateway_.request("GET", "/health")[0] == 200
            in_flight = pool.submit(gateway_.request, "POST", "/v1/completions", API_KEY, {"hold_s": HOLD_S})
            while not any(seen.path == "/v1/completions" for seen in backend.seen):
                time.sleep(0.01)
            flag.write_text("interruption notice\n")
            status, body = gateway_.request("GET", "/health")
            assert status == 503 and json.loads(body)["error"]["type"] == "service_unavailable"
            assert gateway_.request("HEAD", "/health")[0] == 503
            assert not in_flight.done()
            assert in_flight.result(timeout=10) == (200, b'{"path": "/v1/completions"}')
            assert gateway_.request("POST", "/v1/completions", API_KEY)[0] == 200  # nginx still serves
            os.unlink(flag)
            assert gateway_.request("GET", "/health")[0] == 200
    shutil.rmtree(drain_dir)
