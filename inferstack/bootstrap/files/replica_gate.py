#!/usr/bin/env python3
"""Wait until every server of a replica has joined its Ray cluster; the head's runtime starts only then.

Runs in the runtime's image (where Ray is) as the last ExecStartPre of the head's vLLM unit (bootstrap/replica.py):
vLLM places its pipeline's stages on the Ray cluster's GPUs when it starts, so it must not start before the workers
(which sync the whole model first) have joined. It waits for the head's Ray node to accept connections, connects to
the cluster as a driver, and counts the alive nodes every POLL_INTERVAL_S until there are `--nodes` of them; it exits
1 when `--timeout` passes first (systemd then restarts the unit, and the boot's health wait reports it).

Python 3.8+, Ray from the image; nothing else.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time

POLL_INTERVAL_S = 2.0


def _listening(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:
        return False


def alive_nodes(address: str) -> int:
    """Alive nodes of the Ray cluster at `address` (connects once, as a driver)."""
    import ray  # type: ignore[import-not-found]  # the runtime image's, not a dependency of ours

    if not ray.is_initialized():
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    return sum(1 for node in ray.nodes() if node.get("Alive"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True, help="the head's Ray address, host:port")
    parser.add_argument("--nodes", type=int, required=True, help="servers in the replica")
    parser.add_argument("--timeout", type=float, required=True, help="seconds to wait at most")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.timeout
    joined, reported = 0, -1
    while time.monotonic() < deadline:
        if _listening(args.address):
            joined = alive_nodes(args.address)
            if joined != reported:
                print(f"replica: {joined} of {args.nodes} servers in the Ray cluster", flush=True)
                reported = joined
            if joined >= args.nodes:
                return 0
        time.sleep(POLL_INTERVAL_S)
    print(f"replica: {joined} of {args.nodes} servers joined the Ray cluster at {args.address} within "
          f"{args.timeout:g} s; the runtime does not start", file=sys.stderr, flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
