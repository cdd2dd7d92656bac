"""Benchmark the boot-time model sync: parallel vs single-stream download of a multi-file model.

Runs the real sync program (inferstack/bootstrap/files/model_sync.py, as the server runs it) against moto's
S3-compatible server on 127.0.0.1, and prints a Markdown table of median throughput per configuration:

    .venv/bin/python benchmarks/model_sync.py --files 8 --file-mib 32 --repeat 3

With `--chroot` it replays the boot's sync inside the end-to-end test's Debian 12 root file system (Debian's python3,
the program where the bundle puts it) with a multi-GB model (default 2 files x 1 GiB), once per connection count
(`--workers 1,2,4,8,16,32`, 64 MiB byte ranges as on the server), then reads the synced files back into memory with
the page cache dropped (the model load's disk read) and hashes them with the sync's own sha256 function (page cache
warm: the hash rate alone). `--record FILE` writes these figures to a CSV (inferstack/sizing/data/
coldstart_measured.csv), replacing earlier rows of the same quantity, connection count and cap:

    .venv/bin/python benchmarks/model_sync.py --chroot --record inferstack/sizing/data/coldstart_measured.csv

Needs `moto[server]` and `boto3` (test dependencies); `--chroot` needs root and debootstrap, as the end-to-end test.
The loopback server is a Python program: it, not the network, bounds the absolute figures, so read them as a
comparison between configurations on one machine. Cloud object stores cap each connection (tens of MB/s per stream
is typical), which is what parallel transfers overcome; `--per-connection-mbps N` puts a proxy in front of the server
that caps every connection at N MB/s to show that effect. The time includes reading the manifest, verifying every
file's sha256 and the atomic activation.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
FILES_DIR = REPO / "inferstack" / "bootstrap" / "files"
# The end-to-end test module imports tests/sample_plans.py and the boot programs by file name (tests/bootstrap/
# conftest.py sets the same path).
sys.path[:0] = [str(REPO / "tests" / "bootstrap"), str(REPO / "tests"), str(FILES_DIR)]

from bootstrap_fakes import metadata_server, s3_server, upload_model  # noqa: E402
from test_bootstrap_e2e import Chroot, debian_chroot, missing_prerequisite  # noqa: E402

from inferstack.bootstrap.manifest import write_manifest  # noqa: E402

SYNC = FILES_DIR / "model_sync.py"
MIB = 1 << 20
CONFIGURATIONS = {
    # name: (workers, part size MiB; 0 = one stream per file)
    "single stream (1 connection, whole files)": (1, 0),
    "parallel files (16 connections, whole files)": (16, 0),
    "parallel ranges (16 connections, 8 MiB parts)": (16, 8),
}
MODEL_DEFAULTS = {
    # mode: (files, MiB per file, runs per configuration)
    "host": (8, 32, 3),
    "chroot": (2, 1024, 1),  # a multi-GB model, as a server syncs at boot; one run of 2 GiB is steady enough
}
CHROOT_LIB = "/usr/local/lib/inferstack"
"""Where the bundle installs the boot programs (docs/bootstrap.md, "Files on the server")."""
CHROOT_MODEL_ROOT = "/var/lib/inferstack"
"""The sync's --root on a server without local NVMe (boot.sh model_root: $STATE_DIR)."""
HASH_TIMER = ("import sys, time; sys.path.insert(0, sys.argv[1]); from model_sync import file_sha256; "
              "started = time.perf_counter(); [file_sha256(path) for path in sys.argv[2:]]; "
              "print(time.perf_counter() - started)")
"""Run by the chroot's python3: the sync's own hash function over each file in turn, on one core."""
CSV_COLUMNS = ("quantity", "connections", "per_connection_cap_mb_s", "bytes_per_s", "model_bytes", "repeats",
               "machine", "date", "command")
QUANTITIES = ("sync", "load_read", "sha256")


class Figure(NamedTuple):
    quantity: str
    """sync (the sync program end to end), load_read (cold read of the synced files), sha256 (hash rate)"""
    connections: int | None
    bytes_per_s: float


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


def sync_arguments(storage: str, metadata: str, root: str, workers: int, part_mib: int) -> list[str]:
    return ["--cloud", "aws", "--region", "us-east-1", "--bucket", "bench", "--prefix", "models/bench/",
            "--root", root, "--name", "bench", "--endpoint", storage, "--metadata-endpoint", metadata,
            "--workers", str(workers), "--part-size-mib", str(part_mib)]


def timed_sync(storage: str, metadata: str, root: Path, workers: int, part_mib: int) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, str(SYNC), *sync_arguments(storage, metadata, str(root), workers, part_mib)],
                   check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, help="model files (default 8; 2 with --chroot)")
    parser.add_argument("--file-mib", type=int, help="MiB per file (default 32; 1024 with --chroot)")
    parser.add_argument("--repeat", type=int, help="runs per configuration, median (default 3; 1 with --chroot)")
    parser.add_argument("--per-connection-mbps", type=float, default=0, help="cap per connection (0: none)")
    parser.add_argument("--chroot", action="store_true", help="run the sync in the Debian 12 chroot, as the server")
    parser.add_argument("--workers", default="1,2,4,8,16,32", help="--chroot: connection counts, comma-separated")
    parser.add_argument("--part-size-mib", type=int, default=64, help="--chroot: byte-range size (server: 64)")
    parser.add_argument("--record", type=Path, help="--chroot: write the figures to this CSV")
    args = parser.parse_args()
    mode = "chroot" if args.chroot else "host"
    if args.record and mode != "chroot":
        parser.error("--record needs --chroot: the recorded figures are the server's sync, in Debian")
    if mode == "chroot" and (reason := missing_prerequisite()):
        parser.error(f"--chroot: {reason}")
    defaults = MODEL_DEFAULTS[mode]
    files, file_mib, repeat = (given or default for given, default in
                               zip((args.files, args.file_mib, args.repeat), defaults, strict=True))
    with tempfile.TemporaryDirectory() as scratch, s3_server() as server, metadata_server() as metadata:
        model = Path(scratch) / "model"
        model.mkdir()
        total_bytes = make_model(model, files, file_mib)
        upload_model(server, "bench", "models/bench/", model)
        shutil.rmtree(model)  # the bucket holds it now; the chroot's copy is the one read back
        cap = f"each connection capped at {args.per_connection_mbps:.0f} MB/s" if args.per_connection_mbps else \
            "no cap per connection"
        print(f"model: {files} files x {file_mib} MiB = {total_bytes / MIB:.0f} MiB; {cap}; "
              f"{os.cpu_count()} CPUs; median of {repeat} runs\n")
        capped = throttled_proxy(server, args.per_connection_mbps * 1e6) if args.per_connection_mbps else None
        with capped or nullcontext(server) as storage:
            if mode == "host":
                table(storage, metadata, Path(scratch), total_bytes, repeat)
                return 0
            workers = [int(count) for count in args.workers.split(",")]
            figures = chroot_figures(storage, metadata, total_bytes, workers, args.part_size_mib, repeat)
    if args.record:
        record(args.record, figures, args.per_connection_mbps, total_bytes, repeat)
        print(f"\nrecorded in {args.record}")
    return 0


def table(storage: str, metadata: str, scratch: Path, total_bytes: int, repeat: int) -> None:
    """Print one Markdown row per configuration: the median time of `repeat` fresh syncs."""
    print("| configuration | seconds | MB/s | MiB/s |\n|---|---:|---:|---:|")
    for name, (workers, part_mib) in CONFIGURATIONS.items():
        seconds = statistics.median(
            timed_sync(storage, metadata, scratch / f"dest-{workers}-{part_mib}-{run}", workers, part_mib)
            for run in range(repeat))
        print(f"| {name} | {seconds:.2f} | {total_bytes / seconds / 1e6:.0f} | {total_bytes / seconds / MIB:.0f} |")


#### The boot's sync, replayed in Debian ####


def chroot_figures(storage: str, metadata: str, total_bytes: int, workers: list[int], part_mib: int,
                   repeat: int) -> list[Figure]:
    """Sync into a fresh Debian 12 root file system once per connection count, then time the model's read back and
    its hashing; prints each table as it is measured."""
    figures: list[Figure] = []
    with debian_chroot() as box:
        box.path(CHROOT_LIB).mkdir(parents=True, exist_ok=True)
        for program in (SYNC, FILES_DIR / "cloud_access.py"):
            shutil.copy(program, box.path(CHROOT_LIB))
        print(f"sync ({box.run('python3', '--version').stdout.strip()} in Debian 12, {part_mib} MiB byte ranges):\n\n"
              "| connections | seconds | MB/s |\n|---:|---:|---:|", flush=True)
        for count in workers:
            seconds = statistics.median(chroot_sync(box, storage, metadata, count, part_mib) for _ in range(repeat))
            figures.append(Figure("sync", count, total_bytes / seconds))
            print(f"| {count} | {seconds:.2f} | {total_bytes / seconds / 1e6:.0f} |", flush=True)
        model_files = sorted(p for p in box.path(f"{CHROOT_MODEL_ROOT}/models/bench/current").iterdir()
                             if p.suffix == ".safetensors")
        figures += read_and_hash(box, model_files, repeat)
    return figures


def chroot_sync(box: Chroot, storage: str, metadata: str, workers: int, part_mib: int) -> float:
    """Seconds of one sync into an empty model root, as boot.sh runs it (Debian's python3, the bundle's copy)."""
    shutil.rmtree(box.path(CHROOT_MODEL_ROOT), ignore_errors=True)
    started = time.perf_counter()
    box.run("python3", f"{CHROOT_LIB}/model_sync.py",
            *sync_arguments(storage, metadata, CHROOT_MODEL_ROOT, workers, part_mib))
    return time.perf_counter() - started


def read_and_hash(box: Chroot, model_files: list[Path], repeat: int) -> list[Figure]:
    """The synced files read whole into memory after the page cache is dropped (what a runtime's load reads from
    disk), then hashed by the sync's file_sha256 with the files cached (the hash rate alone)."""
    model_bytes = sum(path.stat().st_size for path in model_files)
    read_runs = [cold_read_seconds(model_files) for _ in range(repeat)]
    cold = all(dropped for dropped, _ in read_runs)
    read_s = statistics.median(seconds for _, seconds in read_runs)
    inside = [f"/{path.relative_to(box.root)}" for path in model_files]
    hash_s = statistics.median(float(box.run("python3", "-c", HASH_TIMER, CHROOT_LIB, *inside).stdout)
                               for _ in range(repeat))
    page_cache = "dropped before each read" if cold else "WARM: /proc/sys/vm/drop_caches is not writable"
    print(f"\n| quantity | seconds | MB/s |\n|---|---:|---:|\n"
          f"| load_read ({len(model_files)} files into memory; page cache {page_cache}) | {read_s:.2f} | "
          f"{model_bytes / read_s / 1e6:.0f} |\n"
          f"| sha256 (model_sync.file_sha256, one core) | {hash_s:.2f} | {model_bytes / hash_s / 1e6:.0f} |")
    figures = [Figure("sha256", None, model_bytes / hash_s)]
    return ([Figure("load_read", None, model_bytes / read_s)] if cold else []) + figures


def cold_read_seconds(paths: list[Path]) -> tuple[bool, float]:
    """(whether the page cache was dropped, seconds to read every file whole into memory)."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        dropped = True
    except OSError:  # not root, or /proc/sys read-only (a container)
        dropped = False
    started = time.perf_counter()
    for path in paths:
        path.read_bytes()
    return dropped, time.perf_counter() - started


#### Recording ####


def record(path: Path, figures: list[Figure], cap_mb_s: float, model_bytes: int, repeat: int) -> None:
    """Write the figures as CSV rows (CSV_COLUMNS), replacing earlier rows of the same quantity, connection count and
    cap; the rows are sorted by those."""
    rows = [{"quantity": f.quantity, "connections": "" if f.connections is None else str(f.connections),
             "per_connection_cap_mb_s": f"{cap_mb_s:g}" if cap_mb_s and f.quantity == "sync" else "",
             "bytes_per_s": f"{f.bytes_per_s:.0f}", "model_bytes": str(model_bytes), "repeats": str(repeat),
             "machine": machine(), "date": datetime.date.today().isoformat(), "command": shlex.join(sys.orig_argv)}
            for f in figures]

    def key(row: Mapping[str, str]) -> tuple[int, float, int]:
        return (QUANTITIES.index(row["quantity"]), float(row["per_connection_cap_mb_s"] or 0),
                int(row["connections"] or 0))

    new_keys = {key(row) for row in rows}
    if path.exists():
        with path.open(newline="") as handle:
            rows += [row for row in csv.DictReader(handle) if key(row) not in new_keys]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(sorted(rows, key=key))


def machine() -> str:
    """E.g. "AMD EPYC, 2 cores, Debian 12 chroot, loopback moto S3 server"."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    return f"{cpu}, {os.cpu_count()} cores, Debian 12 chroot, loopback moto S3 server"


if __name__ == "__main__":
    sys.exit(main())
