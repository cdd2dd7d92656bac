#!/usr/bin/env python3
"""Watch the cloud's interruption notice on a server that may run on spot capacity; on a notice, drain the gateway.

Runs as `inferstack-interruption.service` (bootstrap/render.py `interruption_unit`), as root: on every cloud only root
may open the metadata server's HTTP port (boot.sh, phase metadata_firewall), and the unit takes every capability
away and lets it reach nothing but the metadata server and loopback. Every POLL_INTERVAL_S it reads its cloud's
notice from the instance metadata, as each vendor documents it:

| cloud   | notice (metadata path)                                  | no notice | a notice                        |
|---------|---------------------------------------------------------|-----------|---------------------------------|
| aws     | /latest/meta-data/spot/instance-action (IMDSv2 token)   | 404       | {"action": ..., "time": ...}    |
| gcp     | /computeMetadata/v1/instance/preempted                  | FALSE     | TRUE                            |
| alibaba | /latest/meta-data/instance/spot/termination-time (token)| 404       | the release time (UTC)          |

Huawei Cloud documents no notice in an ECS's metadata (UNWATCHED): the watcher is not installed there.

Draining: the watcher writes the drain flag (`--drain-flag`, the gateway's fixed `gateway.DRAIN_FLAG`); while it
exists the gateway's key-free health path answers 503, so the load balancer takes the server out and sends it no new
request, while every request already in flight is served to its end (nginx and the runtime keep running). It logs
one line when it drains. A notice that is gone again (a server that hibernated and resumed, or was stopped and
started) lifts the drain; a metadata server that does not answer changes nothing (the last answer stands).

AWS also posts a rebalance recommendation, an earlier "elevated risk" signal that may never become an interruption:
the group's capacity rebalancing starts a replacement and then retires this server through its normal scale-in,
whose deregistration delay drains it (components/aws). The watcher logs the recommendation once and drains only on
the interruption notice itself, so that a server keeps serving until its replacement does.

Standard library only (Python 3.8+); the metadata requests are cloud_access's (`metadata_get`, `metadata_session`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

if __package__:  # imported by the renderer (inferstack.bootstrap.interruption), for NOTICE_PATHS and UNWATCHED
    from inferstack.bootstrap.files.cloud_access import (
        CLOUDS,
        AccessError,
        Retry,
        log,
        metadata_get,
        metadata_session,
        read_text,
    )
else:  # run on the server, beside cloud_access.py
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from cloud_access import (  # type: ignore[import-not-found,no-redef,unused-ignore]  # the sibling file
        CLOUDS,
        AccessError,
        Retry,
        log,
        metadata_get,
        metadata_session,
        read_text,
    )

POLL_INTERVAL_S = 5.0
"""EC2 User Guide, "Spot Instance interruption notices" (read 2026-12-07): "We recommend that you check for these
interruption notices every 5 seconds." The shortest notice is GCP's: about 30 s before the VM stops."""

NOTICE_PATHS = {
    # EC2 User Guide, "Spot Instance interruption notices" (read 2026-12-07): instance-action is present once EC2 marks
    # the instance to stop, hibernate or terminate (two minutes before), {"action": ..., "time": ...}; absent (HTTP 404)
    # until then. Read with an IMDSv2 session token.
    "aws": "/latest/meta-data/spot/instance-action",
    # Compute Engine, "Create and use Spot VMs", detecting preemption (read 2026-12-07): with header
    # Metadata-Flavor: Google the value is TRUE once the VM is being preempted, FALSE before.
    "gcp": "/computeMetadata/v1/instance/preempted",
    # Alibaba Cloud ECS, "Detect and respond to spot instance interruption events" (updated 2026-04-02, read
    # 2026-12-07): HTTP 404 while no release is scheduled, else the release time in UTC (2015-01-05T18:02:00Z), read
    # with a token from PUT /latest/api/token (hardened mode, which works whether or not the instance enforces it).
    "alibaba": "/latest/meta-data/instance/spot/termination-time",
}
"""Where each cloud posts the interruption notice of a spot server (on cloud_access.METADATA_ENDPOINTS)."""
UNWATCHED = {
    "huawei": "Huawei Cloud documents no interruption notice in an ECS's instance metadata (ECS \"Obtaining ECS "
              "Details Using Metadata\" lists none; \"Purchasing a Spot ECS\" offers only a reclaim notification "
              "through Cloud Eye and SMN, outside the server; read 2026-12-07): its spot servers are not drained "
              "before they are reclaimed, and requests in flight then fail.",
}
"""Clouds whose servers cannot see an interruption coming, each with the reason (no watcher is installed there)."""
AWS_REBALANCE_PATH = "/latest/meta-data/events/recommendations/rebalance"
"""EC2 User Guide, "EC2 instance rebalance recommendations" (read 2026-12-07): {"noticeTime": ...} once EC2 sees the
Spot Instance at elevated risk of interruption; 404 before. Logged, never drained on (the module's docstring)."""
GCP_PREEMPTED = "TRUE"
SESSION_RENEW_S = 3600.0
"""A session token lives six hours (cloud_access.SESSION_TTL_S); a new one is asked for every hour."""
NOTICE_LOG_CHARS = 200
ONE_TRY = Retry(attempts=1, auth_grace_s=0.0)
"""The loop itself retries, every POLL_INTERVAL_S; a request that fails is not waited on."""


class MetadataReader:
    """One cloud's metadata items, with the session token (AWS IMDSv2, Alibaba hardened mode) kept and renewed."""

    def __init__(self, cloud: str, metadata_endpoint: str | None = None) -> None:
        self.cloud, self.metadata_endpoint = cloud, metadata_endpoint
        self._session: dict[str, str] | None = None
        self._session_at = 0.0

    def get(self, path: str) -> str | None:
        """The item's text, or None where the metadata server answers 404 (no such item: no notice yet)."""
        for attempt in (1, 2):
            try:
                return metadata_get(self.cloud, path, self.metadata_endpoint, ONE_TRY, read_text,
                                    headers=self._headers())
            except AccessError as error:
                if error.status == 404:
                    return None
                if error.status == 401 and attempt == 1:  # the token expired or was refused: a new one, once
                    self._session = None
                    continue
                raise
        raise AssertionError("unreachable")

    def _headers(self) -> dict[str, str]:
        if self._session is None or time.monotonic() - self._session_at > SESSION_RENEW_S:
            self._session = metadata_session(self.cloud, self.metadata_endpoint, ONE_TRY)
            self._session_at = time.monotonic()
        return self._session


def interruption_notice(reader: MetadataReader) -> str | None:
    """The cloud's interruption notice, as it reads (None: none posted)."""
    text = reader.get(NOTICE_PATHS[reader.cloud])
    if reader.cloud == "gcp":
        return "preempted" if text == GCP_PREEMPTED else None
    return text


def one_line(text: str) -> str:
    """Metadata text fit for one journal line: printable, at most NOTICE_LOG_CHARS characters."""
    printable = "".join(c if c.isprintable() else " " for c in text)
    return " ".join(printable.split())[:NOTICE_LOG_CHARS]


def set_drain(drain_flag: str, draining: bool) -> None:
    """Create (or remove) the drain flag. Its directory is root's (the unit's RuntimeDirectory=, 0755): the gateway's
    workers may see the flag, and no one but root may make or remove it."""
    if draining:
        os.makedirs(os.path.dirname(drain_flag), mode=0o755, exist_ok=True)
        with open(drain_flag, "w") as flag:
            flag.write("interruption notice\n")
    elif os.path.exists(drain_flag):
        os.unlink(drain_flag)


class Watcher:
    """One round at a time (`check`): reads the notice, drains or lifts the drain, logs what changed."""

    def __init__(self, cloud: str, drain_flag: str, metadata_endpoint: str | None = None) -> None:
        if cloud not in NOTICE_PATHS:
            raise ValueError(UNWATCHED.get(cloud, f"unknown cloud {cloud!r}"))
        self.reader = MetadataReader(cloud, metadata_endpoint)
        self.drain_flag = drain_flag
        self.draining = os.path.exists(drain_flag)  # left by an earlier run: lifted at the first "no notice"
        self.failing = False
        self.rebalance_logged = False

    def check(self) -> None:
        try:
            notice = interruption_notice(self.reader)
        except AccessError as error:
            if not self.failing:  # once per outage, not every round
                log(f"interruption: cannot read the notice ({error}); retrying every {POLL_INTERVAL_S:g}s")
            self.failing = True
            return
        if self.failing:
            log("interruption: the metadata server answers again")
            self.failing = False
        if notice is not None and not self.draining:
            set_drain(self.drain_flag, True)
            self.draining = True
            log(f"interruption: {self.reader.cloud} notice {one_line(notice)!r}: draining (the health path answers "
                "503, the load balancer sends no new request; requests in flight finish)")
        elif notice is None and self.draining:
            set_drain(self.drain_flag, False)
            self.draining = False
            log("interruption: no notice (any more): serving again (the health path answers as the runtime does)")
        if self.reader.cloud == "aws" and not self.rebalance_logged:
            self._log_rebalance()  # after the drain: a failed read of this log-only item never delays it

    def _log_rebalance(self) -> None:
        try:
            recommendation = self.reader.get(AWS_REBALANCE_PATH)
        except AccessError:
            return  # read again next round
        if recommendation is not None:
            self.rebalance_logged = True
            log(f"interruption: rebalance recommendation {one_line(recommendation)!r}: still serving (the group "
                "replaces this server first; draining waits for the interruption notice)")


def watch(cloud: str, drain_flag: str, metadata_endpoint: str | None = None,
          poll_interval_s: float = POLL_INTERVAL_S, rounds: int | None = None) -> None:
    """Check every `poll_interval_s`, forever (or `rounds` times)."""
    watcher = Watcher(cloud, drain_flag, metadata_endpoint)
    log(f"interruption: watching the {cloud} interruption notice every {poll_interval_s:g}s")
    done = 0
    while rounds is None or done < rounds:
        watcher.check()
        done += 1
        if rounds is None or done < rounds:
            time.sleep(poll_interval_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cloud", required=True, choices=CLOUDS)
    parser.add_argument("--drain-flag", required=True, help="the gateway's drain flag (gateway.DRAIN_FLAG)")
    parser.add_argument("--metadata-endpoint", help="metadata server override (a local server in tests)")
    parser.add_argument("--poll-interval-s", type=float, default=POLL_INTERVAL_S)
    args = parser.parse_args(argv)
    if not os.path.isabs(args.drain_flag) or ".." in args.drain_flag.split("/"):
        parser.error(f"--drain-flag must be an absolute path without '..': {args.drain_flag!r}")
    if args.cloud not in NOTICE_PATHS:
        print(f"inferstack interruption: {UNWATCHED[args.cloud]}", file=sys.stderr)
        return 2
    watch(args.cloud, args.drain_flag, args.metadata_endpoint, args.poll_interval_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
