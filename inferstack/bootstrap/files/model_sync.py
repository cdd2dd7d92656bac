#!/usr/bin/env python3
"""Sync a model from the cloud's object storage to local disk: parallel, verified, atomic, incremental.

The bucket holds the model files under a prefix, with `manifest.json` beside them:

    {"format": "inferstack-manifest/1",
     "files": [{"path": "model.gguf", "size": 4368439584, "sha256": "…"}, …]}

(`inferstack manifest DIR` writes it.) On disk the model lives in versioned directories
with a `current` symlink that the server loads:

    DEST/current -> v-<manifest hash>     swapped atomically once every file is verified
    DEST/v-<manifest hash>/…              the files, read-only to the server
    DEST/.staging-<manifest hash>/…       a sync in progress (removed when it fails or finishes)

A new manifest downloads only the files whose size or sha256 changed; unchanged files are hard-linked from
the current version. Every byte is checked against the manifest's sha256 before the swap: a corrupted object
is never served. Large files are fetched as byte ranges on parallel connections; each request is retried with
backoff. Progress is logged every few seconds; the last stdout line says what happened:

    changed=1 version=v-0123456789abcdef path=DEST/current

Exit status: 0 ok, 2 bad manifest or usage, 3 checksum mismatch, 4 storage unreachable or denied, 5 disk full.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cloud_access import (  # type: ignore[import-not-found,unused-ignore]  # the sibling file
    CLOUDS,
    AccessError,
    CredentialSource,
    ObjectStore,
    log,
    split_ranges,
)

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "inferstack-manifest/1"
VERIFIED_STATE = ".verified.json"
CHUNK_BYTES = 1 << 20
PROGRESS_INTERVAL_S = 5.0
DISK_HEADROOM = 1.02
MIB = 1 << 20
GIB = 1 << 30

EXIT_OK, EXIT_MANIFEST, EXIT_CHECKSUM, EXIT_STORAGE, EXIT_DISK = 0, 2, 3, 4, 5


class SyncError(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class ManifestFile:
    path: str
    size: int
    sha256: str


#### Manifest ####


def parse_manifest(raw: bytes) -> list[ManifestFile]:
    """The manifest's files; rejects paths that would escape the model directory."""
    try:
        document = json.loads(raw.decode("utf-8"))
        if document.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"format is {document.get('format')!r}, expected {MANIFEST_FORMAT!r}")
        files = [ManifestFile(str(f["path"]), int(f["size"]), str(f["sha256"]).lower()) for f in document["files"]]
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise SyncError(f"manifest.json is not a valid inferstack manifest: {error}", EXIT_MANIFEST) from None
    for entry in files:
        parts = entry.path.split("/")
        if entry.path.startswith("/") or ".." in parts or "" in parts or entry.path.startswith(".") or \
                entry.size < 0 or len(entry.sha256) != 64:
            raise SyncError(f"manifest.json: unsafe or invalid entry {entry}", EXIT_MANIFEST)
    if not files or len({f.path for f in files}) != len(files):
        raise SyncError("manifest.json lists no files, or a path twice", EXIT_MANIFEST)
    return files


def version_of(raw_manifest: bytes) -> str:
    return "v-" + hashlib.sha256(raw_manifest).hexdigest()[:16]


#### Local state ####


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(8 * MIB), b""):
            digest.update(block)
    return digest.hexdigest()


def load_verified(dest: str) -> dict[str, list[object]]:
    try:
        with open(os.path.join(dest, VERIFIED_STATE)) as handle:
            state: dict[str, list[object]] = json.load(handle)
            return state
    except (OSError, ValueError):
        return {}


def save_verified(dest: str, version_dir: str, files: Sequence[ManifestFile]) -> None:
    """Remember (size, mtime, sha256) of verified files so that a re-run need not re-hash them."""
    state: dict[str, list[object]] = {}
    for entry in files:
        stat = os.stat(os.path.join(version_dir, entry.path))
        state[entry.path] = [stat.st_size, stat.st_mtime_ns, entry.sha256]
    temporary = os.path.join(dest, VERIFIED_STATE + ".tmp")
    with open(temporary, "w") as handle:
        json.dump(state, handle)
    os.replace(temporary, os.path.join(dest, VERIFIED_STATE))


def is_intact(version_dir: str, entry: ManifestFile, verified: dict[str, list[object]]) -> bool:
    """True when the local copy of `entry` matches the manifest (by the remembered stat, else by hashing)."""
    path = os.path.join(version_dir, entry.path)
    try:
        stat = os.stat(path)
    except OSError:
        return False
    if stat.st_size != entry.size:
        return False
    if verified.get(entry.path) == [stat.st_size, stat.st_mtime_ns, entry.sha256]:
        return True
    return file_sha256(path) == entry.sha256


def current_version_dir(dest: str) -> str | None:
    link = os.path.join(dest, "current")
    return os.path.realpath(link) if os.path.islink(link) and os.path.isdir(link) else None


#### Download ####


class Progress:
    """Counts bytes and logs throughput every few seconds from a background thread."""

    def __init__(self, total_bytes: int, total_files: int) -> None:
        self.total_bytes, self.total_files = total_bytes, total_files
        self.done_bytes = 0
        self.done_files = 0
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._report, daemon=True)

    def add(self, count: int) -> None:
        with self._lock:
            self.done_bytes += count

    def file_done(self) -> None:
        with self._lock:
            self.done_files += 1

    def line(self) -> str:
        elapsed_s = max(time.monotonic() - self.started, 1e-6)
        percent = 100.0 * self.done_bytes / self.total_bytes if self.total_bytes else 100.0
        return (f"sync progress: {self.done_bytes / MIB:.1f}/{self.total_bytes / MIB:.1f} MiB ({percent:.0f}%), "
                f"{self.done_bytes / MIB / elapsed_s:.1f} MiB/s, files {self.done_files}/{self.total_files}")

    def _report(self) -> None:
        while not self._stop.wait(PROGRESS_INTERVAL_S):
            log(self.line())

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass(frozen=True)
class Part:
    key: str
    path: str
    byte_range: tuple[int, int] | None
    """Inclusive range, or None to fetch the whole object in one stream."""


def download_part(store: ObjectStore, credentials: CredentialSource, part: Part, progress: Progress) -> None:
    """Fetch one range into its place in the file; a stream cut mid-way is retried from the start of the part."""
    expected = part.byte_range[1] - part.byte_range[0] + 1 if part.byte_range else None
    offset = part.byte_range[0] if part.byte_range else 0
    for attempt in range(1, store.attempts + 1):
        written = 0
        try:
            with store.get(part.key, credentials, part.byte_range) as response:
                descriptor = os.open(part.path, os.O_WRONLY)
                try:
                    for chunk in iter(lambda: response.read(CHUNK_BYTES), b""):
                        os.pwrite(descriptor, chunk, offset + written)
                        written += len(chunk)
                        progress.add(len(chunk))
                finally:
                    os.close(descriptor)
            if expected is not None and written != expected:
                raise http.client.IncompleteRead(b"", expected - written)
            return
        except (OSError, http.client.HTTPException) as error:
            progress.add(-written)
            if attempt == store.attempts:
                raise AccessError(f"GET {part.key} failed mid-stream after {attempt} attempts: {error!r}") from None
            delay_s = store.backoff_s * 2 ** (attempt - 1)
            log(f"retry GET {part.key}: stream broke after {written} bytes ({error!r}); next in {delay_s:.1f}s")
            time.sleep(delay_s)


def plan_parts(store_prefix: str, staging: str, entries: Sequence[ManifestFile], part_size: int) -> list[Part]:
    """Create the empty target files and return the ranges to fetch (whole objects when part_size is 0)."""
    parts: list[Part] = []
    for entry in entries:
        path = os.path.join(staging, entry.path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.truncate(entry.size)
        key = store_prefix + entry.path
        if entry.size == 0:
            continue
        if part_size <= 0:
            parts.append(Part(key, path, None))
        else:
            parts.extend(Part(key, path, r) for r in split_ranges(entry.size, part_size))
    return parts


def fetch_files(store: ObjectStore, credentials: CredentialSource, prefix: str, staging: str,
                entries: Sequence[ManifestFile], workers: int, part_size: int) -> None:
    """Download `entries` into `staging` and verify each one's sha256; one re-download on mismatch."""
    for round_number in (1, 2):
        parts = plan_parts(prefix, staging, entries, part_size)
        with Progress(sum(e.size for e in entries), len(entries)) as progress, \
                ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(download_part, store, credentials, p, progress) for p in parts]:
                future.result()
            hashes = list(pool.map(lambda e: file_sha256(os.path.join(staging, e.path)), entries))
        mismatched = [(e, h) for e, h in zip(entries, hashes) if h != e.sha256]  # noqa: B905 (3.8)
        if not mismatched:
            return
        for entry, got in mismatched:
            log(f"checksum mismatch (round {round_number}/2): {entry.path}: manifest sha256 {entry.sha256}, "
                f"downloaded {got}")
        entries = [e for e, _ in mismatched]
    names = ", ".join(e.path for e in entries)
    raise SyncError(f"checksum mismatch for {names} after a re-download: the object in the bucket differs from "
                    "manifest.json. The model was NOT activated; re-upload the files and their manifest", EXIT_CHECKSUM)


#### Sync ####


def reuse_or_fetch(files: Sequence[ManifestFile], current: str | None,
                   verified: dict[str, list[object]]) -> tuple[list[ManifestFile], list[ManifestFile]]:
    reuse = [f for f in files if current and is_intact(current, f, verified)]
    return reuse, [f for f in files if f not in reuse]


def check_disk_space(dest: str, needed_bytes: int) -> None:
    free_bytes = shutil.disk_usage(dest).free
    if needed_bytes * DISK_HEADROOM > free_bytes:
        raise SyncError(f"not enough disk space in {dest}: {needed_bytes / GIB:.2f} GiB to download, "
                        f"{free_bytes / GIB:.2f} GiB free; grow the data disk", EXIT_DISK)


def activate(dest: str, staging: str, version: str, raw_manifest: bytes, files: Sequence[ManifestFile]) -> str:
    """Rename the verified staging directory into place and swap `current` to it atomically."""
    with open(os.path.join(staging, ".inferstack-manifest.json"), "wb") as handle:
        handle.write(raw_manifest)
    os.sync()
    version_dir = os.path.join(dest, version)
    if os.path.exists(version_dir):
        shutil.rmtree(version_dir)
    os.rename(staging, version_dir)
    link_tmp = os.path.join(dest, ".current.tmp")
    if os.path.lexists(link_tmp):
        os.unlink(link_tmp)
    os.symlink(version, link_tmp)
    os.replace(link_tmp, os.path.join(dest, "current"))
    save_verified(dest, version_dir, files)
    for name in os.listdir(dest):
        if name.startswith("v-") and name != version:
            shutil.rmtree(os.path.join(dest, name), ignore_errors=True)
    return version_dir


def sync(store: ObjectStore, prefix: str, dest: str, workers: int, part_size: int) -> tuple[bool, str]:
    """Bring DEST/current to the bucket's manifest; returns (changed, version)."""
    started = time.monotonic()
    os.makedirs(dest, exist_ok=True)
    credentials = CredentialSource(store.cloud, store.metadata_endpoint, store.attempts)
    with store.get(prefix + MANIFEST_NAME, credentials) as response:
        raw_manifest = response.read()
    files = parse_manifest(raw_manifest)
    version = version_of(raw_manifest)
    current = current_version_dir(dest)
    verified = load_verified(dest)
    reuse, fetch = reuse_or_fetch(files, current, verified)
    total_bytes = sum(f.size for f in files)
    if current and os.path.basename(current) == version and not fetch:
        log(f"sync: model unchanged ({version}, {len(files)} files, {total_bytes / GIB:.2f} GiB verified)")
        return False, version
    log(f"sync: {version}: {len(fetch)} file(s) to download ({sum(f.size for f in fetch) / MIB:.1f} MiB), "
        f"{len(reuse)} unchanged, {workers} connections")
    staging = os.path.join(dest, f".staging-{version}")
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    try:
        check_disk_space(dest, sum(f.size for f in fetch))
        for entry in reuse:
            link_or_copy(os.path.join(str(current), entry.path), os.path.join(staging, entry.path))
        fetch_files(store, credentials, prefix, staging, fetch, workers, part_size)
        activate(dest, staging, version, raw_manifest, files)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    elapsed_s = time.monotonic() - started
    fetched_mib = sum(f.size for f in fetch) / MIB
    log(f"sync done: {version}: downloaded {len(fetch)} file(s), {fetched_mib:.1f} MiB in {elapsed_s:.1f}s "
        f"({fetched_mib / max(elapsed_s, 1e-6):.1f} MiB/s), reused {len(reuse)}")
    return True, version


def link_or_copy(source: str, target: str) -> None:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Sync a model from object storage to local disk.")
    parser.add_argument("--cloud", required=True, choices=CLOUDS)
    parser.add_argument("--region", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--prefix", required=True, help="key prefix of the model files, ending in '/'")
    parser.add_argument("--dest", required=True, help="local directory; the model is at DEST/current")
    parser.add_argument("--endpoint", default=None, help="object-storage endpoint override (path-style)")
    parser.add_argument("--metadata-endpoint", default=None, help="metadata-server override")
    parser.add_argument("--workers", type=int, default=16, help="parallel connections")
    parser.add_argument("--part-size-mib", type=int, default=64, help="byte-range size; 0 = one stream per file")
    parser.add_argument("--attempts", type=int, default=5, help="tries per request before giving up")
    parser.add_argument("--backoff-s", type=float, default=1.0, help="first retry delay (doubles each time)")
    args = parser.parse_args(argv)
    prefix = args.prefix if args.prefix.endswith("/") or not args.prefix else args.prefix + "/"
    store = ObjectStore(args.cloud, args.region, args.bucket, args.endpoint, args.metadata_endpoint,
                        attempts=args.attempts, backoff_s=args.backoff_s)
    try:
        changed, version = sync(store, prefix, args.dest, max(args.workers, 1), args.part_size_mib * MIB)
    except SyncError as error:
        log(f"sync FAILED: {error}")
        return error.exit_code
    except AccessError as error:
        log(f"sync FAILED: object storage unreachable or access denied: {error}")
        return EXIT_STORAGE
    print(f"changed={int(changed)} version={version} path={os.path.join(args.dest, 'current')}", flush=True)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
