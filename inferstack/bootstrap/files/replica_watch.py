#!/usr/bin/env python3
"""Watch a replica's workers from its head; while one is lost, drain the head's gateway.

Runs as `inferstack-replica-watch.service` on the head of a replica across servers (bootstrap/replica.py), as root:
only root makes or removes the drain flag. Every POLL_INTERVAL_S it opens a TCP connection to each worker's Ray
node-manager port (fixed by `ray start --node-manager-port`): a worker whose Ray node has stopped refuses it, one that
is gone or cut off lets it time out. After LOST_AFTER_ROUNDS failed rounds in a row it writes the drain flag; while the
flag exists the gateway's key-free health path answers 503 (bootstrap/gateway.py), so that the load balancer takes
the replica out (vLLM's pipeline has lost a stage: it cannot answer). The first round in which every worker answers
again restarts the head's runtime (`--restart-unit`: vLLM's engine died with the lost stage and its process stays up,
answering 503, so nothing else would start it again) and lifts the drain. It logs one line at each change.

Standard library only (Python 3.8+).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable

POLL_INTERVAL_S = 5.0
CONNECT_TIMEOUT_S = 3.0
LOST_AFTER_ROUNDS = 2  # one refused connection (a restarting node) is not yet a lost worker


def answers(address: str, port: int, timeout_s: float = CONNECT_TIMEOUT_S) -> bool:
    """Whether `address` accepts a TCP connection on `port` within the timeout."""
    try:
        with socket.create_connection((address, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def set_drain(drain_flag: str, lost: list[str]) -> None:
    """Create the drain flag naming the lost workers, or remove it when none is lost."""
    if lost:
        os.makedirs(os.path.dirname(drain_flag), mode=0o755, exist_ok=True)
        with open(drain_flag, "w") as flag:
            flag.write("lost: " + " ".join(lost) + "\n")
    elif os.path.exists(drain_flag):
        os.unlink(drain_flag)


class Watch:
    """One round at a time (`check`): probes every worker, drains after LOST_AFTER_ROUNDS failed rounds in a row."""

    def __init__(self, workers: list[str], port: int, drain_flag: str, rounds: int = LOST_AFTER_ROUNDS,
                 restart: Callable[[], None] = lambda: None) -> None:
        self.workers, self.port, self.drain_flag, self.rounds = workers, port, drain_flag, rounds
        self.restart = restart
        self.failed = {worker: 0 for worker in workers}
        self.draining = os.path.exists(drain_flag)

    def check(self) -> bool:
        """One round; returns whether the head is drained after it."""
        for worker in self.workers:
            self.failed[worker] = 0 if answers(worker, self.port) else self.failed[worker] + 1
        lost = [worker for worker in self.workers if self.failed[worker] >= self.rounds]
        answering = all(count == 0 for count in self.failed.values())
        if lost and not self.draining:
            set_drain(self.drain_flag, lost)
            self.draining = True
            print(f"replica degraded: worker(s) {' '.join(lost)} do not answer on port {self.port}; draining the "
                  "head's health path", flush=True)
        elif self.draining and answering:
            self.restart()  # the runtime joins the whole cluster again; the health path waits for it to load
            set_drain(self.drain_flag, [])
            self.draining = False
            print("replica whole again: every worker answers; the head's runtime restarted", flush=True)
        return self.draining


def _addresses(text: str) -> list[str]:
    workers = [str(ipaddress.IPv4Address(part)) for part in text.split(",")]
    if not workers:
        raise ValueError("no worker")
    return workers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=_addresses, required=True, help="the workers' addresses, comma-separated")
    parser.add_argument("--port", type=int, required=True, help="the workers' Ray node-manager port")
    parser.add_argument("--drain-flag", required=True)
    parser.add_argument("--restart-unit", default=None, help="the head's runtime unit, restarted once whole again")
    parser.add_argument("--interval", type=float, default=POLL_INTERVAL_S)
    parser.add_argument("--rounds", type=int, default=None, help="run this many rounds, then exit (tests)")
    args = parser.parse_args(argv)
    unit = args.restart_unit

    def restart() -> None:
        if unit:
            subprocess.run(["systemctl", "restart", "--no-block", unit], check=False)

    watch = Watch(args.workers, args.port, args.drain_flag, restart=restart)
    done = 0
    while args.rounds is None or done < args.rounds:
        watch.check()
        done += 1
        if args.rounds is None or done < args.rounds:
            time.sleep(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
