#!/usr/bin/env python3
"""Report this server's requests per second to Cloud Eye, where a Huawei GPU fleet's scaling alarms read them.

Huawei's Auto Scaling scales only on Cloud Eye alarms, and an AS policy's alarm may watch a custom-monitoring metric
(AS user guide, "Creating an AS Policy"). So every server of the fleet posts, every `interval_s` (60 s), one datapoint
of metric `requests_per_s` in the deployment's custom namespace, dimension `group` = its AS group's name: all the
group's servers write one series, whose one-minute average the scaling alarms compare with the plan's target per
server (components/huawei/fleet.py `_request_scaling`).

What is counted: the lines the gateway appended to its access log since the last reading (nginx writes one per
request when it ends, `gateway.ACCESS_LOG_FORMAT`), but the health path's (the load balancer's and the boot's checks)
and the key check's refusals (401: they never reach the runtime, and a scanner on the public address would otherwise
scale the fleet out). The value is that count over the seconds since the last reading (`interval_s` when on time).
The log is followed by inode and size: a log renamed away is read to its end (nginx writes to it until it reopens its
log), a new one from its start, a truncated one from its start again. Nothing is reported until the boot has marked the
server ready (`ready_file`): a server still loading its model takes no traffic, and zeros from it would pull the
fleet's average down.

The request, as Huawei's SDKs send CreateMetricData (huaweicloudsdkces v1 `_create_metric_data_http_info`,
huaweicloudsdkcore 3.1.219 `BasicCredentials.sign_request`): POST https://ces.{region}.myhuaweicloud.com/V1.0/
{project_id}/metric-data, a JSON array of datapoints, Content-Type application/json, X-Project-Id, the agency's
temporary AK/SK in an SDK-HMAC-SHA256 signature and its X-Security-Token (cloud_access `sign_huawei_apig`). Field rules
from the Cloud Eye API reference, "Adding Monitoring Data" (namespace service.item, each part a letter then letters,
digits or "_", 3-32 characters, its service not SYS, AGT or SRE; a dimension value of letters, digits, "_" and "-",
1-256; ttl at most 604800 s; collect_time in milliseconds).

Runs as root (`agents/huawei.py` unit, sandboxed): only root may reach the metadata server, where the agency's keys
are (boot.sh, phase metadata_firewall). A failed report is logged in one line and the next interval tries again; it
never stops the loop. Its only argument is its JSON configuration (`load_config`: every value checked against a tight
pattern; a bad one stops it before it reads or sends anything, exit status 2).

Standard library only (Python 3.8+); HTTP, signing and credentials are cloud_access's.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable
from typing import BinaryIO

if __package__:  # imported as part of the inferstack package
    from inferstack.bootstrap.files.cloud_access import (
        REGION_PATTERN,
        AccessError,
        CredentialSource,
        Request,
        Retry,
        huawei_project_id,
        log,
        send,
        sign_huawei_apig,
    )
else:  # run on the server, beside cloud_access.py
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from cloud_access import (  # type: ignore[import-not-found,no-redef,unused-ignore]  # the sibling file
        REGION_PATTERN,
        AccessError,
        CredentialSource,
        Request,
        Retry,
        huawei_project_id,
        log,
        send,
        sign_huawei_apig,
    )

METRIC_NAME = "requests_per_s"
DIMENSION_NAME = "group"
UNIT = "count/s"
TTL_S = 172800
"""How long Cloud Eye keeps the raw datapoints: two days (at most 604800)."""
INTERVAL_S = 60
"""One datapoint a minute: the scaling alarms' period is 60 s."""
NOT_PROXIED = b"-"
"""The gateway's `up=$upstream_status` of a request the runtime never saw (gateway.py ACCESS_LOG_FORMAT): refused for
its key, its size or its URI before the key check, answered by the cache or the gateway itself: not the load the fleet
scales on, and nothing a client without the key can add to."""
RETRY = Retry(attempts=3, backoff_s=2.0)
"""A 5xx or a network error is tried twice more (about 2 and 4 s later); after that the next interval tries."""
READ_CHUNK_BYTES = 1 << 20
CONFIG_EXIT_STATUS = 2
"""Exit status on a bad configuration (the unit does not restart on it: RestartPreventExitStatus=)."""

_PATH = r"^/[A-Za-z0-9._/-]{1,255}$"
CONFIG_PATTERNS = {
    "namespace": r"^(?=.{3,32}$)(?!SYS|AGT|SRE|SERVICE\.BMS$)[A-Za-z][A-Za-z0-9_]*\.[A-Za-z][A-Za-z0-9_]*$",
    "group": r"^[A-Za-z0-9][A-Za-z0-9_-]{0,255}$",
    "region": REGION_PATTERN,
    "health_path": r"^/[A-Za-z0-9._/-]{0,127}$",
    "access_log": _PATH,
    "ready_file": _PATH,
    # Optional: where to send (tests: a stand-in on loopback); the default is the region's Cloud Eye endpoint.
    "endpoint": r"^https?://[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?$",
    "metadata_endpoint": r"^https?://[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?$",
}
REQUIRED = ("namespace", "group", "region", "health_path", "access_log", "ready_file")
INTERVAL_RANGE_S = (1, 300)

# One line of the gateway's log formats (`inferstack`, `inferstack_cache`): '$remote_addr - [$time_local] "$request"
# $status ... up=$upstream_status'. nginx escapes a double quote inside a variable as \x22, so the request has none, and
# the upstream status is the line's last field (digits, "-", or several after a retry: "502, 200").
_LINE = re.compile(rb'^\S+ - \[[^\]]*\] "([^"]*)" (\d{3}) .* up=([-0-9, :]+)\r?\n?$')


class ConfigError(Exception):
    pass


def load_config(path: str) -> dict[str, object]:
    """The configuration at `path`, every value checked; ConfigError naming the first bad one."""
    try:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError) as error:
        raise ConfigError(f"cannot read the configuration {path}: {error}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"the configuration {path} is not a JSON object")
    unknown = sorted(set(config) - set(CONFIG_PATTERNS) - {"interval_s"})
    if unknown:
        raise ConfigError(f"unknown configuration keys {unknown}; known: {sorted([*CONFIG_PATTERNS, 'interval_s'])}")
    missing = [key for key in REQUIRED if key not in config]
    if missing:
        raise ConfigError(f"missing configuration keys {missing}")
    for key, pattern in CONFIG_PATTERNS.items():
        value = config.get(key)
        if key in config and not (isinstance(value, str) and re.fullmatch(pattern, value)):
            raise ConfigError(f"invalid {key} {value!r}: it must match {pattern}")
    interval = config.setdefault("interval_s", INTERVAL_S)
    low, high = INTERVAL_RANGE_S
    if type(interval) is not int or not low <= interval <= high:
        raise ConfigError(f"invalid interval_s {interval!r}: it must be a whole number of seconds, {low} to {high}")
    return config


#### The access log ####


class AccessLog:
    """Follows the gateway's access log across rotation and truncation; `new_lines` gives the complete lines appended
    since its last call. Lines already in the log when it starts are not counted."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.previous: _Followed | None = None
        """The log before a rotation, read until nginx stops writing to it (a reading that finds nothing new)."""
        self.current: _Followed | None = _Followed.open(path, at_end=True)

    def new_lines(self) -> list[bytes]:
        lines: list[bytes] = []
        if self.previous is not None:
            drained = self.previous.read()
            lines += drained
            if not drained:
                self.previous.close()
                self.previous = None
        if self.current is not None:
            lines += self.current.read()
        identity = _identity(self.path)
        if identity is not None and (self.current is None or identity != self.current.identity):
            if self.current is not None:  # renamed away: nginx may still write to it until it reopens its log
                if self.previous is not None:
                    self.previous.close()
                self.previous = self.current
            self.current = _Followed.open(self.path, at_end=False)
            if self.current is not None:
                lines += self.current.read()
        return lines

    def close(self) -> None:
        for followed in (self.previous, self.current):
            if followed is not None:
                followed.close()


def _identity(path: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


class _Followed:
    """One open log file, read from where the last reading stopped; a partial last line waits for its end."""

    def __init__(self, handle: BinaryIO, identity: tuple[int, int]) -> None:
        self.handle = handle
        self.identity = identity
        self.partial = b""

    @classmethod
    def open(cls, path: str, at_end: bool) -> _Followed | None:
        try:
            handle = open(path, "rb")  # noqa: SIM115  # kept open across readings
        except OSError:
            return None
        stat = os.fstat(handle.fileno())
        if at_end:
            handle.seek(0, os.SEEK_END)
        return cls(handle, (stat.st_dev, stat.st_ino))

    def read(self) -> list[bytes]:
        handle = self.handle
        if os.fstat(handle.fileno()).st_size < handle.tell():  # truncated in place (copytruncate)
            handle.seek(0)
            self.partial = b""
        data = self.partial
        while True:
            chunk = handle.read(READ_CHUNK_BYTES)
            if not chunk:
                break
            data += chunk
        *lines, self.partial = data.split(b"\n")
        return lines

    def close(self) -> None:
        self.handle.close()


def counted(line: bytes, health_path: str) -> bool:
    """Whether one access-log line is a request the fleet scales on: one the runtime received (`up=` a status), not the
    health path's. A line of another shape does not count: a client without the key can write none that does."""
    match = _LINE.match(line)
    if match is None:
        return False
    request, _status, upstream = match.groups()
    parts = request.split(b" ")
    path = parts[1].split(b"?", 1)[0] if len(parts) >= 2 else b""
    return path != health_path.encode() and upstream.strip() != NOT_PROXIED


#### Cloud Eye ####


def datapoint(namespace: str, group: str, value: float, collect_time_ms: int) -> dict[str, object]:
    """One CreateMetricData item (Cloud Eye API, "Adding Monitoring Data")."""
    return {"metric": {"namespace": namespace, "metric_name": METRIC_NAME,
                       "dimensions": [{"name": DIMENSION_NAME, "value": group}]},
            "ttl": TTL_S, "collect_time": collect_time_ms, "value": value, "unit": UNIT, "type": "float"}


class Reporter:
    """One reading at a time (`report`): counts the new log lines and posts their rate to Cloud Eye."""

    def __init__(self, config: dict[str, object], clock: Callable[[], float] = time.monotonic,
                 wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.namespace, self.group = str(config["namespace"]), str(config["group"])
        self.region, self.health_path = str(config["region"]), str(config["health_path"])
        self.ready_file = str(config["ready_file"])
        self.endpoint = str(config.get("endpoint") or f"https://ces.{self.region}.myhuaweicloud.com")
        metadata = config.get("metadata_endpoint")
        self.metadata_endpoint = str(metadata) if metadata else None
        self.credentials = CredentialSource("huawei", self.metadata_endpoint, RETRY)
        self.project_id: str | None = None
        self.clock, self.wall_clock_ms = clock, wall_clock_ms
        self.log = AccessLog(str(config["access_log"]))
        self.read_at = clock()
        self.was_ready = False

    def report(self) -> float | None:
        """Counts what the log gained since the last reading and posts its rate; the rate posted (None: none)."""
        lines = self.log.new_lines()
        now = self.clock()
        elapsed_s, self.read_at = now - self.read_at, now
        if not os.path.exists(self.ready_file):
            return None
        if not self.was_ready:
            self.was_ready = True
            log(f"metrics: {self.ready_file} exists: reporting {METRIC_NAME} to Cloud Eye namespace {self.namespace} "
                f"(group {self.group})")
        count = sum(1 for line in lines if counted(line, self.health_path))
        rate = round(count / elapsed_s, 4) if elapsed_s > 0 else 0.0
        try:
            self.post(datapoint(self.namespace, self.group, rate, self.wall_clock_ms()))
        except AccessError as error:
            log(f"metrics: {count} requests in {elapsed_s:.0f}s not reported: {error}")
            return None
        return rate

    def post(self, item: dict[str, object]) -> None:
        if self.project_id is None:
            self.project_id = huawei_project_id(self.metadata_endpoint, RETRY)
        project_id = self.project_id
        body = json.dumps([item], separators=(",", ":")).encode()
        url = f"{self.endpoint}/V1.0/{project_id}/metric-data"

        def build() -> Request:
            headers = {"Content-Type": "application/json", "X-Project-Id": project_id}
            return sign_huawei_apig(Request("POST", url, headers, body), self.credentials.get())

        send(build, lambda response: response.read(), retry=RETRY, what=f"Cloud Eye {METRIC_NAME}")


def run(config: dict[str, object], rounds: int | None = None) -> None:
    """Report every `interval_s`, on a fixed schedule, forever (or `rounds` times); nothing stops the loop."""
    interval_s = float(config["interval_s"])  # type: ignore[arg-type]
    reporter = Reporter(config)
    log(f"metrics: counting {config['access_log']} every {interval_s:g}s (not {config['health_path']}, not 401); "
        f"reporting once {config['ready_file']} exists")
    next_at = time.monotonic() + interval_s
    done = 0
    while rounds is None or done < rounds:
        time.sleep(max(next_at - time.monotonic(), 0.0))
        next_at = max(next_at + interval_s, time.monotonic())  # a late round moves the schedule, never bunches up
        try:
            reporter.report()
        except Exception as error:  # whatever happened, the next interval tries again
            log(f"metrics: reading failed: {error!r}")
        done += 1


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: huawei_metrics.py CONFIG.json", file=sys.stderr)
        return CONFIG_EXIT_STATUS
    try:
        config = load_config(args[0])
    except ConfigError as error:
        log(f"metrics: refusing to start: {error}")
        return CONFIG_EXIT_STATUS
    run(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
