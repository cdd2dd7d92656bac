"""Benchmark the boot-time model sync: parallel vs single-stream download of a multi-file model.

Runs the real sync program (inferstack/bootstrap/files/model_sync.py, as the server runs it) against moto's
S3-compatible server on 127.0.0.1, and prints a Markdown table of median throughput per configuration:

    .venv/bin/python benchmarks/model_sync.py --files 8 --file-mib 32 --repeat 3

Needs `moto[server]` and `boto3` (test dependencies). The loopback server is a Python program: it, not the
network, bounds the absolute figures, so read them as a comparison between configurations on one machine.
Cloud object stores cap each connection (tens of MB/s per stream is typical), which is what parallel
transfers overcome; `--per-connection-mbps N` puts a proxy in front of the server that caps every connection
at N MB/s to show that effect. The time includes reading the manifest, verifying every file's sha256 and the
atomic activation.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "bootstrap"))

from bootstrap_fakes import metadata_server, s3_server, upload_model  # noqa: E402

from inferstack.bootstrap.manifest import write_manifest  # noqa: E402

SYNC = REPO / "inferstack" / "bootstrap" / "files" / "model_sync.py"
MIB = 1 << 20
CONFIGURATIONS = {
    # name: (workers, part size MiB; 0 = one stream per file)
    "single stream (1 connection, whole files)": (1, 0),
    "parallel files (16 connections, whole files)": (16, 0),
    "parallel ranges (16 connections, 8 MiB parts)": (16, 8),
}


@contextmanager
def throttled_proxy(upstream: str, bytes_per_s: float) -> Iterator[str]:
    """A loopback TCP proxy that caps what each connection receives at `bytes_per_s`."""
    host, port = upstream.removeprefix("http://").split(":")
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def pump(source: socket.socket, target: socket.socket, limit: float | None) -> None:
        started, sent = time.monotonic(), 0
        try:
            while chunk := source.recv(64 * 1024):
                target.sendall(chunk)
                sent += len(chunk)
                if limit:
                    time.sleep(max(0.0, sent / limit - (time.monotonic() - started)))
        except OSError:
            pass
        finally:
            for sock in (source, target):
                sock.close()

    def accept() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection((host, int(port)))
            threading.Thread(target=pump, args=(client, server, None), daemon=True).start()
            threading.Thread(target=pump, args=(server, client, bytes_per_s), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()


def make_model(directory: Path, files: int, file_mib: int) -> int:
    for index in range(files):
        with (directory / f"model-{index + 1:05d}-of-{files:05d}.safetensors").open("wb") as handle:
            for _ in range(file_mib):
                handle.write(os.urandom(MIB))  # incompressible, like weights
    write_manifest(directory)
    return files * file_mib * MIB


def timed_sync(storage: str, metadata: str, dest: Path, workers: int, part_mib: int) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, str(SYNC), "--cloud", "aws", "--region", "us-east-1", "--bucket", "bench",
                    "--prefix", "models/bench/", "--dest", str(dest), "--endpoint", storage,
                    "--metadata-endpoint", metadata, "--workers", str(workers), "--part-size-mib", str(part_mib)],
                   check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--file-mib", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--per-connection-mbps", type=float, default=0, help="cap per connection (0: none)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, s3_server() as server, metadata_server() as metadata:
        model = Path(scratch) / "model"
        model.mkdir()
        total_bytes = make_model(model, args.files, args.file_mib)
        upload_model(server, "bench", "models/bench/", model)
        cap = f"each connection capped at {args.per_connection_mbps:.0f} MB/s" if args.per_connection_mbps else \
            "no cap per connection"
        print(f"model: {args.files} files x {args.file_mib} MiB = {total_bytes / MIB:.0f} MiB; {cap}; "
              f"{os.cpu_count()} CPUs; median of {args.repeat} runs\n")
        capped = throttled_proxy(server, args.per_connection_mbps * 1e6) if args.per_connection_mbps else None
        with capped or nullcontext(server) as storage:
            table(storage, metadata, Path(scratch), total_bytes, args.repeat)
    return 0


def table(storage: str, metadata: str, scratch: Path, total_bytes: int, repeat: int) -> None:
    """Print one Markdown row per configuration: the median time of `repeat` fresh syncs."""
    print("| configuration | seconds | MB/s | MiB/s |\n|---|---:|---:|---:|")
    for name, (workers, part_mib) in CONFIGURATIONS.items():
        seconds = statistics.median(
            timed_sync(storage, metadata, scratch / f"dest-{workers}-{part_mib}-{run}", workers, part_mib)
            for run in range(repeat))
        print(f"| {name} | {seconds:.2f} | {total_bytes / seconds / 1e6:.0f} | {total_bytes / seconds / MIB:.0f} |")


if __name__ == "__main__":
    sys.exit(main())
