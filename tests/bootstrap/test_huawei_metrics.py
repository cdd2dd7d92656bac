"""A Huawei GPU fleet's request-rate reporter (bootstrap/files/huawei_metrics.py, agents/huawei.py, agent_huawei.sh).

The reporter runs against a stand-in Cloud Eye on loopback, which checks every request's signature with Huawei's own
SDK signer (huaweicloudsdkcore) and answers 403 to a wrong one, and the stand-in metadata server (the agency's keys,
the project id). It posts exactly the datapoint the fleet's scaling alarms read: the requests of the last interval,
health checks and refusals for the key left out, across a rotated or truncated access log; nothing before the server
is ready; a failure is logged and the next interval reports again. A bad configuration value stops it before it sends
anything. The bundle's reporter unit and install script pass systemd-analyze verify and shellcheck, and the script
(re)starts the reporter only when what it runs changed."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path

import huawei_metrics
import pytest
import vendor_signers as vendor
from bootstrap_fakes import HUAWEI_PROJECT, SESSION_TOKEN, QuietHandler
from cloud_access import Retry
from sample_plans import sample_plan
from test_bootstrap_python38 import PYTHON_3_8

from inferstack.bootstrap import render_bootstrap
from inferstack.bootstrap.agents.huawei import CONFIG_PATH, PROGRAM_PATH, REPORTER_UNIT, agent_files
from inferstack.bootstrap.render import shipped_copy
from inferstack.bootstrap.telemetry import AGENT_SCRIPT, AGENT_UNIT, TelemetryTarget, sources
from tests.bootstrap.test_bootstrap_render import options_for, shellchecked, written_files

NAMESPACE, GROUP = "INFERSTACK.serving", "inferstack-prod-fleet-1a2b3c"
TARGET = TelemetryTarget(logs=None, metrics=NAMESPACE, metrics_dimension=GROUP)
SIGNED_HEADERS = {"content-type", "host", "x-project-id", "x-sdk-date", "x-security-token"}
COLLECT_TIME_MS = 1_796_000_000_000


#### A stand-in Cloud Eye ####


@dataclass
class CloudEye:
    """Cloud Eye's CreateMetricData on loopback: accepts a POST to /V1.0/<project>/metric-data signed as Huawei's SDK
    signs it (SIGNED_HEADERS among the signed ones, the agency's token, the project id), else 403. `fail_next`: that
    many requests answered 500 first."""

    url: str = ""
    fail_next: int = 0
    accepted: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    """(path, headers with lowercase names, body) of each request accepted"""
    statuses: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bodies(self) -> list[object]:
        with self.lock:
            return [json.loads(body) for _, _, body in self.accepted]


class _CloudEyeHandler(QuietHandler):
    server: _CloudEyeServer

    def do_POST(self) -> None:
        cloud_eye = self.server.cloud_eye
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        with cloud_eye.lock:
            failing, cloud_eye.fail_next = cloud_eye.fail_next > 0, max(cloud_eye.fail_next - 1, 0)
        problem = _problem(self.path, headers, body)
        status = 500 if failing else 403 if problem else 201
        with cloud_eye.lock:
            cloud_eye.statuses.append(status)
            if status == 201:
                cloud_eye.accepted.append((self.path, headers, body))
        self._reply(status, problem or "")


def _problem(path: str, headers: dict[str, str], body: bytes) -> str | None:
    """Why Cloud Eye would refuse the request (None: it would not)."""
    if path != f"/V1.0/{HUAWEI_PROJECT}/metric-data":
        return f"no such API: {path}"
    authorization = headers.get("authorization", "")
    signed = authorization.partition("SignedHeaders=")[2].partition(",")[0].split(";")
    if not set(signed) >= SIGNED_HEADERS:
        return f"{sorted(SIGNED_HEADERS)} must be signed, not only {signed}"
    if (headers.get("x-security-token"), headers.get("x-project-id")) != (SESSION_TOKEN, HUAWEI_PROJECT):
        return "not the agency's security token and the project's id"
    expected = vendor.apig_authorization("POST", f"http://{headers['host']}{path}",
                                         {k: v for k, v in headers.items() if k in signed}, body)
    return None if authorization == expected else f"SignatureDoesNotMatch: expected {expected!r}"


class _CloudEyeServer(ThreadingHTTPServer):
    cloud_eye: CloudEye


@contextmanager
def cloud_eye_server() -> Iterator[CloudEye]:
    cloud_eye = CloudEye()
    server = _CloudEyeServer(("127.0.0.1", 0), _CloudEyeHandler)
    server.cloud_eye = cloud_eye
    cloud_eye.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield cloud_eye
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def cloud_eye() -> Iterator[CloudEye]:
    with cloud_eye_server() as stand_in:
        yield stand_in


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reporter's retries (3 tries, 2 s then 4 s apart), milliseconds apart here."""
    monkeypatch.setattr(huawei_metrics, "RETRY", Retry(attempts=3, backoff_s=0.01))


#### A server's access log ####


def access_line(path: str, status: int = 200, method: str = "POST", upstream: str | None = None) -> str:
    """One line in the gateway's format (gateway.ACCESS_LOG_FORMAT): `upstream` the runtime's status, by default the
    answer's ("-" for a 401: the runtime never sees a request without the key)."""
    up = upstream if upstream is not None else ("-" if status == 401 else str(status))
    return f'10.0.1.7 - [07/Dec/2026:12:00:00 +0000] "{method} {path} HTTP/1.1" {status} 512 0.734 up={up}\n'


def append(log: Path, *lines: str) -> None:
    with log.open("a") as handle:
        handle.write("".join(lines))


API = access_line("/v1/chat/completions")


class Server:
    """The reporter's files on a server (access log, ready flag, configuration) and a clock the test moves."""

    def __init__(self, root: Path, cloud_eye: CloudEye, metadata: str) -> None:
        self.log, self.ready = root / "gateway-access.log", root / "ready"
        self.log.write_text(API * 7)  # served before the reporter started: never counted
        self.ready.write_text("model=m\n")
        self.config: dict[str, object] = {
            "namespace": NAMESPACE, "group": GROUP, "region": "ap-southeast-3", "health_path": "/health",
            "access_log": str(self.log), "ready_file": str(self.ready), "endpoint": cloud_eye.url,
            "metadata_endpoint": metadata, "interval_s": 60}
        self.now = 1000.0
        self.reporter = huawei_metrics.Reporter(self.config, clock=lambda: self.now,
                                                wall_clock_ms=lambda: COLLECT_TIME_MS)

    def minute_later(self) -> float | None:
        self.now += 60
        return self.reporter.report()


@pytest.fixture
def server(tmp_path: Path, cloud_eye: CloudEye, metadata_url: str) -> Server:
    return Server(tmp_path, cloud_eye, metadata_url)


def expected_datapoint(value: float) -> list[object]:
    return [{"metric": {"namespace": NAMESPACE, "metric_name": "requests_per_s",
                        "dimensions": [{"name": "group", "value": GROUP}]},
             "ttl": 172800, "collect_time": COLLECT_TIME_MS, "value": value, "unit": "count/s", "type": "float"}]


#### What it reports ####


def test_it_posts_the_minutes_requests_per_second_leaving_out_health_checks_and_refusals(
        server: Server, cloud_eye: CloudEye) -> None:
    append(server.log, API * 12, access_line("/health", method="GET"), access_line("/health", method="HEAD"),
           access_line("/health?probe=1", method="GET"), access_line("/health", 503, "GET"),
           access_line("/v1/chat/completions", 401), access_line("/v1/models", 200, "GET"),
           # refused before the key check (nginx: body or URI too large, a bad header): the runtime never saw them
           access_line("/v1/chat/completions", 413, upstream="-"), access_line("/" + "a" * 40, 414, "GET", "-"),
           access_line("/v1/completions", 400, upstream="-"),
           access_line("/v1/completions", 200, upstream="-"),  # answered by the cache
           access_line("/v1/completions", 200, upstream="502, 200"),  # the runtime answered after a retry
           "a line of no known shape\n")
    assert server.minute_later() == round(14 / 60, 4)
    assert cloud_eye.bodies() == [expected_datapoint(round(14 / 60, 4))]
    assert server.minute_later() == 0.0  # a quiet minute is a zero, not a gap: the alarm's average sees it
    assert cloud_eye.bodies()[-1] == expected_datapoint(0.0)


def test_the_count_follows_the_log_across_rotation_and_truncation(server: Server, cloud_eye: CloudEye) -> None:
    append(server.log, API * 3)
    rotated = server.log.with_name("gateway-access.log.1")
    server.log.rename(rotated)
    append(rotated, API * 2)  # nginx writes to the renamed log until it reopens its own
    append(server.log, API * 4)  # ... then to the new one
    assert server.minute_later() == round(9 / 60, 4)
    append(rotated, API)  # a last line before the reopen reached every worker
    append(server.log, API * 5)
    assert server.minute_later() == round(6 / 60, 4)
    server.log.write_text("")  # copytruncate
    append(server.log, API * 2)
    assert server.minute_later() == round(2 / 60, 4)
    assert [body[0]["value"] for body in cloud_eye.bodies()] == [0.15, 0.1, 0.0333]  # type: ignore[index]


def test_a_line_is_counted_once_it_is_whole(server: Server) -> None:
    append(server.log, API, API[:20])
    assert server.minute_later() == round(1 / 60, 4)
    append(server.log, API[20:])
    assert server.minute_later() == round(1 / 60, 4)


def test_nothing_is_reported_before_the_server_is_ready(server: Server, cloud_eye: CloudEye) -> None:
    server.ready.unlink()
    append(server.log, API * 30, access_line("/health", method="GET"))  # the boot's own checks, a model loading
    assert server.minute_later() is None
    assert cloud_eye.bodies() == []
    server.ready.write_text("model=m\n")
    append(server.log, API * 6)
    assert server.minute_later() == round(6 / 60, 4)  # the minute it became ready, not what came before
    assert cloud_eye.bodies() == [expected_datapoint(0.1)]


def test_a_server_error_is_retried_within_the_interval(server: Server, cloud_eye: CloudEye) -> None:
    cloud_eye.fail_next = 2
    append(server.log, API * 6)
    assert server.minute_later() == 0.1
    assert cloud_eye.statuses == [500, 500, 201]


def test_a_failed_report_is_one_log_line_and_the_next_interval_reports_again(
        server: Server, cloud_eye: CloudEye, capsys: pytest.CaptureFixture[str]) -> None:
    cloud_eye.fail_next = 3
    append(server.log, API * 6)
    assert server.minute_later() is None
    failures = [line for line in capsys.readouterr().err.splitlines() if "not reported" in line]
    assert len(failures) == 1 and "6 requests in 60s not reported" in failures[0], failures
    append(server.log, API * 3)
    assert server.minute_later() == 0.05
    assert cloud_eye.statuses == [500, 500, 500, 201]


def test_the_loop_survives_a_reading_that_raises(server: Server, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    rounds: list[int] = []

    def broken(self: huawei_metrics.Reporter) -> None:
        rounds.append(1)
        raise RuntimeError("boom")

    monkeypatch.setattr(huawei_metrics.Reporter, "report", broken)
    huawei_metrics.run({**server.config, "interval_s": 0.01}, rounds=2)
    assert len(rounds) == 2
    assert capsys.readouterr().err.count("reading failed: RuntimeError('boom')") == 2


#### Huawei's signature ####


def test_the_request_is_the_one_huaweis_sdk_signs_with_the_agencys_temporary_keys(
        server: Server, cloud_eye: CloudEye) -> None:
    append(server.log, API)
    server.minute_later()
    (path, headers, body), = cloud_eye.accepted
    url = f"http://{headers['host']}{path}"
    sdk = vendor.apig_sdk_signed_headers("POST", url, headers["content-type"], headers["x-sdk-date"], body,
                                         HUAWEI_PROJECT)
    assert set(sdk) == {*SIGNED_HEADERS, "authorization"}
    assert {name: headers[name] for name in sdk} == sdk
    assert headers["content-type"] == "application/json"  # huaweicloudsdkces v1 CreateMetricData's


#### Its configuration ####


def bad(**change: object) -> dict[str, object]:
    config: dict[str, object] = {"namespace": NAMESPACE, "group": GROUP, "region": "ap-southeast-3",
                                 "health_path": "/health", "access_log": "/var/log/inferstack/gateway-access.log",
                                 "ready_file": "/var/lib/inferstack/ready"}
    config.update(change)
    return {k: v for k, v in config.items() if v is not None}


@pytest.mark.parametrize(("config", "named"), [
    (bad(namespace="SYS.serving"), "namespace"), (bad(namespace="INFERSTACK"), "namespace"),
    (bad(namespace="INFERSTACK.serving.requests"), "namespace"), (bad(namespace="I." + "s" * 31), "namespace"),
    (bad(namespace="SERVICE.BMS"), "namespace"), (bad(namespace="INFERSTACK.9serving"), "namespace"),
    (bad(group="fleet;reboot"), "group"), (bad(group="-fleet"), "group"), (bad(group="g" * 257), "group"),
    (bad(group=7), "group"), (bad(region="ap-southeast-3.evil.example#"), "region"),
    (bad(health_path="health"), "health_path"), (bad(health_path="/health x"), "health_path"),
    (bad(access_log="gateway-access.log"), "access_log"), (bad(ready_file="/var/lib/../ready\n"), "ready_file"),
    (bad(endpoint="http://attacker.example/V1.0"), "endpoint"),
    (bad(metadata_endpoint="file:///etc"), "metadata_endpoint"),
    (bad(interval_s=0), "interval_s"), (bad(interval_s="60"), "interval_s"), (bad(interval_s=True), "interval_s"),
    (bad(group=None), re.escape("missing configuration keys ['group']")),
    (bad(extra="x"), "unknown configuration keys"),
])
def test_a_bad_configuration_value_is_refused(config: dict[str, object], named: str, tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(huawei_metrics.ConfigError, match=named):
        huawei_metrics.load_config(str(path))


def test_the_configuration_it_is_given_passes(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(bad(namespace="A.b", group="g")))
    assert huawei_metrics.load_config(str(path))["interval_s"] == 60


def write_programs(folder: Path) -> Path:
    for name in ("cloud_access.py", "huawei_metrics.py"):
        (folder / name).write_text(shipped_copy(name))
    return folder / "huawei_metrics.py"


def test_the_shipped_reporter_refuses_to_start_on_a_bad_value(tmp_path: Path, cloud_eye: CloudEye) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(bad(group="fleet $(reboot)", endpoint=cloud_eye.url)))
    result = subprocess.run([sys.executable, str(write_programs(tmp_path)), str(config)], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 2
    assert "refusing to start: invalid group 'fleet $(reboot)'" in result.stderr
    assert cloud_eye.statuses == []


#### On a server ####


def test_the_shipped_reporter_is_python_3_8() -> None:
    ast.parse(shipped_copy("huawei_metrics.py"), feature_version=(3, 8))


def reported(cloud_eye: CloudEye) -> list[list[dict[str, object]]]:
    """The bodies posted with a rate above zero."""
    return [body for body in cloud_eye.bodies() if body[0]["value"] > 0]  # type: ignore[index]


def test_the_shipped_reporter_reports_every_interval(tmp_path: Path, cloud_eye: CloudEye, metadata_url: str) -> None:
    """The program as the server runs it (under Python 3.8 where there is one), beside cloud_access.py."""
    server = Server(tmp_path, cloud_eye, metadata_url)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**server.config, "interval_s": 1}))
    started_ms = int(time.time() * 1000)
    output = tmp_path / "output"
    with output.open("w") as out:
        process = subprocess.Popen([PYTHON_3_8 or sys.executable, str(write_programs(tmp_path)), str(config)],
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while "metrics: counting" not in output.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)  # it follows the log from its end once it says so
        append(server.log, API * 4, access_line("/health", method="GET"))
        while not reported(cloud_eye) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert reported(cloud_eye), output.read_text()
    (point,) = reported(cloud_eye)[0]
    assert started_ms <= point.pop("collect_time") <= int(time.time() * 1000)
    assert 4 / 1.6 <= point.pop("value") <= 4  # 4 requests in one reading, a second or a little more after the last
    assert point == {"metric": {"namespace": NAMESPACE, "metric_name": "requests_per_s",
                                "dimensions": [{"name": "group", "value": GROUP}]},
                     "ttl": 172800, "unit": "count/s", "type": "float"}


@pytest.fixture(scope="module")
def bundle() -> dict[str, str]:
    plan = sample_plan("huawei", "gpu-llm")
    return written_files(render_bootstrap(plan, "huawei", options_for(plan, telemetry=TARGET)))


def test_the_bundle_carries_the_reporter_its_configuration_unit_and_install_script(
        bundle: dict[str, str], tmp_path: Path) -> None:
    unit = bundle[f"/etc/systemd/system/{REPORTER_UNIT}.service"]
    assert f"ExecStart=/usr/bin/python3 {PROGRAM_PATH} {CONFIG_PATH}\n" in unit
    assert bundle[PROGRAM_PATH] == shipped_copy("huawei_metrics.py")
    config = tmp_path / "config.json"
    config.write_text(bundle[CONFIG_PATH])
    assert huawei_metrics.load_config(str(config)) == {
        "namespace": NAMESPACE, "group": GROUP, "region": sample_plan("huawei", "gpu-llm").region,
        "health_path": "/health", "access_log": "/var/log/inferstack/gateway-access.log",
        "ready_file": "/var/lib/inferstack/ready", "interval_s": 60}


def test_the_reporter_runs_as_root_with_nothing_else_of_roots(bundle: dict[str, str]) -> None:
    """Root: the metadata firewall refuses every other user the agency's keys (boot.sh phase_metadata_firewall)."""
    unit = bundle[f"/etc/systemd/system/{REPORTER_UNIT}.service"]
    assert "User=" not in unit and "DynamicUser" not in unit
    for setting in ("NoNewPrivileges=yes", "CapabilityBoundingSet=\n", "ProtectSystem=strict", "ProtectHome=yes",
                    "PrivateDevices=yes", "InaccessiblePaths=-/run/inferstack-secrets", "RestartPreventExitStatus=2"):
        assert setting in unit, setting


def test_the_units_pass_systemd_analyze_verify_and_the_script_shellcheck(tmp_path: Path) -> None:
    plan = sample_plan("huawei", "gpu-llm")
    result = render_bootstrap(plan, "huawei", options_for(plan, telemetry=TARGET))
    files = written_files(result)
    root = tmp_path / "root"
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    for path, body in {**files, "/usr/bin/python3": "#!/bin/sh\n", "/bin/bash": "#!/bin/sh\n"}.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
        target.chmod(0o755 if not path.endswith((".service", ".json")) else 0o644)
    units = [str(root / f"etc/systemd/system/{unit}.service") for unit in (REPORTER_UNIT, AGENT_UNIT)]
    verified = subprocess.run(["systemd-analyze", f"--root={root}", "verify", *units], capture_output=True,
                              text=True)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    # A setting systemd cannot parse is only a warning ("... ignoring assignment"), yet it is lost.
    assert "ignoring" not in verified.stdout + verified.stderr, verified.stdout + verified.stderr
    assert shellchecked(result, tmp_path) == {"/usr/local/lib/inferstack/boot.sh", AGENT_SCRIPT}


def test_a_target_without_the_group_is_refused() -> None:
    plan = sample_plan("huawei", "gpu-llm")
    with pytest.raises(ValueError, match="metrics_dimension"):
        agent_files(plan, sources(plan), TelemetryTarget(logs=None, metrics=NAMESPACE))


def run_install_script(root: Path, script: str) -> list[str]:
    """agent_huawei.sh against `root` and a systemctl that records its arguments; the calls it made."""
    bin_dir, calls = root / "bin", root / "systemctl-calls"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "systemctl").write_text(f'#!/bin/bash\necho "$*" >>"{calls}"\n')
    (bin_dir / "systemctl").chmod(0o755)
    calls.write_text("")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "INFERSTACK_LIB_DIR": str(root / "lib"),
           "INFERSTACK_CONFIG_DIR": str(root / "etc"), "INFERSTACK_UNIT_DIR": str(root / "units"),
           "INFERSTACK_STATE_DIR": str(root / "state")}
    result = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr
    return calls.read_text().splitlines()


def test_the_install_script_restarts_the_reporter_only_when_what_it_runs_changed(
        bundle: dict[str, str], tmp_path: Path) -> None:
    for folder, path in (("lib", PROGRAM_PATH), ("etc", CONFIG_PATH),
                         ("units", f"/etc/systemd/system/{REPORTER_UNIT}.service")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / Path(path).name).write_text(bundle[path])
    script = bundle[AGENT_SCRIPT]
    enable, start, restart = (f"{verb} {REPORTER_UNIT}.service" for verb in ("enable --quiet", "start", "restart"))
    assert run_install_script(tmp_path, script) == [enable, restart]
    assert run_install_script(tmp_path, script) == [enable, start]  # a second run changes nothing
    (tmp_path / "etc" / Path(CONFIG_PATH).name).write_text(bundle[CONFIG_PATH].replace(GROUP, "another-group"))
    assert run_install_script(tmp_path, script) == [enable, restart]  # a new bundle's configuration
