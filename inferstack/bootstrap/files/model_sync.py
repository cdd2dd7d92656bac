#!/usr/bin/env python3
"""Sync a model from the cloud's object storage to local disk: parallel, verified, atomic, incremental.

The bucket holds the model files under a prefix, with `manifest.json` beside them:

    {"format": "inferstack-manifest/1",
     "files": [{"path": "model.gguf", "size": 4368439584, "sha256": "…"}, …]}

(`inferstack manifest DIR` writes it.) A plan that serves a model revision passes `--revision R`; its manifest must
then say `"revision": "R"` (`inferstack manifest DIR --revision R` writes it), so that files of another revision
uploaded under the prefix by mistake are never served. On disk the model lives in versioned directories
with a `current` symlink that the server loads, in DEST = ROOT/models/NAME:

    DEST/current -> v-<manifest hash>     swapped atomically once every file is verified
    DEST/v-<manifest hash>/…              the files, read-only to the server
    DEST/.staging-<manifest hash>/…       a sync in progress (removed when it fails or finishes)

DEST must resolve to exactly realpath(ROOT)/models/NAME (no symlink below ROOT), and nothing outside DEST is ever
written or deleted: a symlink found in DEST is removed, never followed. Manifest paths must be plain relative
paths, as `inferstack manifest` writes them: no empty, hidden, `.` or `..` component, no backslash or control
character, at most 255 bytes a component and 1024 a path, each listed once and never both as a file and as a
directory; sha256 in lowercase hex.

A new manifest downloads only the files whose size or sha256 changed; unchanged files are hard-linked from
the current version. Every byte is checked against the manifest's sha256 before the swap: a corrupted object
is never served. Large files are fetched as byte ranges on parallel connections; each request is retried with
backoff (cloud_access.send), and refused ones for a few minutes: the instance's role may be brand new. Progress
is logged every few seconds; the last stdout line says what happened:

    changed=1 version=v-0123456789abcdef path=DEST/current

Exit status: 0 ok, 2 bad manifest or usage (model name, bucket, region, destination), 3 checksum mismatch,
4 storage unreachable or denied, 5 disk full.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import http.client
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cloud_access import (  # type: ignore[import-not-found,unused-ignore]  # the sibling file
    CLOUDS,
    AccessError,
    CredentialSource,
    ObjectStore,
    Retry,
    log,
)

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "inferstack-manifest/1"
VERIFIED_STATE = ".verified.json"
MAX_MANIFEST_BYTES = 16 << 20
MAX_PATH_BYTES = 1024
MAX_COMPONENT_BYTES = 255  # NAME_MAX of Linux file systems
SHA256_HEX = re.compile("[0-9a-f]{64}")
MODEL_NAME = re.compile("[a-z0-9][a-z0-9._-]{0,63}")
REVISION = re.compile("[a-z0-9][a-z0-9._-]{0,39}")  # the workload's model.revision (inferstack/spec.py)
VERSION_NAME = re.compile("v-[0-9a-f]{16}")
CHUNK_BYTES = 1 << 20
PROGRESS_INTERVAL_S = 5.0
DISK_HEADROOM = 1.02
MIB = 1 << 20
GIB = 1 << 30

EXIT_OK, EXIT_USAGE, EXIT_CHECKSUM, EXIT_STORAGE, EXIT_DISK = 0, 2, 3, 4, 5  # 2: usage or bad manifest


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


def parse_manifest(raw: bytes, revision: str | None = None) -> list[ManifestFile]:
    """The manifest's files, each a plain relative path inside the model directory; SyncError otherwise, and when
    `revision` is given and the manifest names another one (or none)."""
    try:
        document = json.loads(raw)
        files = [ManifestFile(e["path"], e["size"], e["sha256"]) for e in document["files"]]
        if document["format"] != MANIFEST_FORMAT or not files:
            raise ValueError(f"format {MANIFEST_FORMAT!r} with at least one file expected")
        found = document.get("revision")
    except (ValueError, RecursionError, TypeError, KeyError, AttributeError) as error:  # of the wrong shape
        raise bad_manifest(f"{error!r:.200}") from None
    if revision is not None and found != revision:
        raise SyncError(f"manifest.json is of revision {found!r:.60}, the plan serves revision {revision!r}: upload "
                        f"revision {revision}'s files under its own prefix, with the manifest `inferstack manifest DIR "
                        f"--revision {revision}` writes. The model was NOT activated", EXIT_USAGE)
    for entry in files:
        if not is_plain(entry):
            raise bad_manifest(f"{entry!r:.300} needs a relative path of plain names, a size and a sha256")
    # Listed twice, or as a file and as another's directory ("a" and "a/b"): the disk cannot hold both.
    counts = collections.Counter(entry.path for entry in files)
    directories = {path[:i] for path in counts for i, c in enumerate(path) if c == "/"}
    for path, count in counts.items():
        if count > 1 or path in directories:
            raise bad_manifest(f"{path!r} is listed twice, or as a file and as a directory")
    return files


def is_plain(entry: ManifestFile) -> bool:
    """A path of names that are not empty, hidden, '.' or '..', without backslash or control, format or surrogate
    character (isprintable() is False for those, NUL included), short enough; a size; a lowercase sha256. Such a
    path is rejected rather than repaired, so that `a/./b` beside `a/b` cannot stand for one file twice."""
    path = entry.path
    return isinstance(path, str) and path.isprintable() and "\\" not in path and \
        len(path.encode()) <= MAX_PATH_BYTES and \
        all(part and part[0] != "." and len(part.encode()) <= MAX_COMPONENT_BYTES for part in path.split("/")) and \
        type(entry.size) is int and entry.size >= 0 and isinstance(entry.sha256, str) and \
        bool(SHA256_HEX.fullmatch(entry.sha256))


def bad_manifest(problem: str) -> SyncError:
    return SyncError(f"manifest.json is not a valid inferstack manifest: {problem}", EXIT_USAGE)


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
    remove(temporary)  # open() would follow a symlink left there
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
    """DEST/v-… that `current` names, when it is one of ours (a plain directory beside it)."""
    link = os.path.join(dest, "current")
    target = os.readlink(link) if os.path.islink(link) else ""
    path = os.path.join(dest, target)
    return path if VERSION_NAME.fullmatch(target) and os.path.isdir(path) and not os.path.islink(path) else None


def model_dest(root: str, name: str) -> str:
    """ROOT/models/NAME, created; SyncError when NAME is not a plain name or a symlink would lead elsewhere."""
    if not MODEL_NAME.fullmatch(name):
        raise SyncError(f"model name {name!r} must match {MODEL_NAME.pattern}", EXIT_USAGE)
    os.makedirs(root, exist_ok=True)
    dest = os.path.join(os.path.realpath(root), "models", name)
    if os.path.realpath(dest) != dest:  # a symlink on the way (checked before anything is created through it)
        raise SyncError(f"{dest} resolves to {os.path.realpath(dest)}, not a directory of its own", EXIT_USAGE)
    os.makedirs(dest, exist_ok=True)
    return dest


def remove(path: str) -> None:
    """Delete a file, a symlink (never what it points to) or a directory tree."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.unlink(path)


#### Download ####


@dataclass(frozen=True)
class Part:
    key: str
    path: str
    byte_range: tuple[int, int] | None
    """Inclusive range, or None to fetch the whole object in one stream."""


def download_part(store: ObjectStore, credentials: CredentialSource, part: Part) -> int:
    """Fetch one range into its place in the file and return its size; `send` fetches a stream cut short again."""
    start, end = part.byte_range or (0, None)

    def write(response: http.client.HTTPResponse) -> int:
        written = 0
        with open(part.path, "r+b") as handle:
            handle.seek(start)
            for chunk in iter(lambda: response.read(CHUNK_BYTES), b""):
                written += handle.write(chunk)
        if end is not None and written != end - start + 1:  # (a body short of Content-Length: `send` sees it)
            raise http.client.IncompleteRead(b"")
        return written

    written: int = store.get(part.key, credentials, write, part.byte_range)
    return written


def plan_parts(store_prefix: str, staging: str, entries: Sequence[ManifestFile], part_size: int) -> list[Part]:
    """Create the empty target files and return the ranges to fetch (whole objects when part_size is 0)."""
    parts: list[Part] = []
    for entry in entries:
        path = os.path.join(staging, entry.path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.truncate(entry.size)
        key = store_prefix + entry.path
        if part_size <= 0:
            parts += [Part(key, path, None)] if entry.size else []
        else:
            parts += [Part(key, path, (start, min(start + part_size, entry.size) - 1))
                      for start in range(0, entry.size, part_size)]
    return parts


def fetch_files(store: ObjectStore, credentials: CredentialSource, prefix: str, staging: str,
                entries: Sequence[ManifestFile], workers: int, part_size: int) -> None:
    """Download `entries` into `staging`, logging progress every few seconds, and verify each one's sha256; one
    re-download of the files that do not match."""
    for round_number in (1, 2):
        total_mib, done_mib, logged = sum(e.size for e in entries) / MIB, 0.0, time.monotonic()
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for future in as_completed([pool.submit(download_part, store, credentials, p) for p in
                                        plan_parts(prefix, staging, entries, part_size)]):
                done_mib += future.result() / MIB
                if time.monotonic() - logged > PROGRESS_INTERVAL_S:
                    logged = time.monotonic()
                    log(f"sync progress: {done_mib:.1f}/{total_mib:.1f} MiB")
            hashes = list(pool.map(lambda e: file_sha256(os.path.join(staging, e.path)), entries))
        mismatched = [(e, h) for e, h in zip(entries, hashes) if h != e.sha256]  # noqa: B905 (3.8)
        for entry, got in mismatched:
            log(f"checksum mismatch (round {round_number}/2): {entry.path}: manifest sha256 {entry.sha256}, "
                f"downloaded {got}")
        entries = [e for e, _ in mismatched]
        if not entries:
            return
    raise SyncError(f"checksum mismatch for {', '.join(e.path for e in entries)} after a re-download: the object in "
                    "the bucket differs from manifest.json. The model was NOT activated; re-upload the files and "
                    "their manifest", EXIT_CHECKSUM)


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
    remove(version_dir)
    os.rename(staging, version_dir)
    link_tmp = os.path.join(dest, ".current.tmp")
    if os.path.lexists(link_tmp):
        os.unlink(link_tmp)
    os.symlink(version, link_tmp)
    os.replace(link_tmp, os.path.join(dest, "current"))
    save_verified(dest, version_dir, files)
    for name in os.listdir(dest):  # entries of DEST only; remove() never follows a symlink
        if name.startswith("v-") and name != version:
            remove(os.path.join(dest, name))
    return version_dir


def sync(store: ObjectStore, prefix: str, dest: str, workers: int, part_size: int,
         revision: str | None = None) -> tuple[bool, str]:
    """Bring DEST/current to the bucket's manifest (of `revision`, when given); returns (changed, version)."""
    started = time.monotonic()
    credentials = CredentialSource(store.cloud, store.metadata_endpoint, store.retry)
    raw_manifest = store.get(prefix + MANIFEST_NAME, credentials, read_manifest)
    files = parse_manifest(raw_manifest, revision)
    version = version_of(raw_manifest)
    current = current_version_dir(dest)
    verified = load_verified(dest)
    reuse, fetch = reuse_or_fetch(files, current, verified)
    if current and os.path.basename(current) == version and not fetch:
        log(f"sync: model unchanged ({version}, {len(files)} files verified)")
        return False, version
    fetched_mib = sum(f.size for f in fetch) / MIB
    log(f"sync: {version}: {len(fetch)} file(s) to download ({fetched_mib:.1f} MiB), {len(reuse)} unchanged")
    staging = os.path.join(dest, f".staging-{version}")
    remove(staging)
    os.mkdir(staging)
    try:
        check_disk_space(dest, sum(f.size for f in fetch))
        for entry in reuse:
            link_or_copy(os.path.join(str(current), entry.path), os.path.join(staging, entry.path))
        fetch_files(store, credentials, prefix, staging, fetch, workers, part_size)
        activate(dest, staging, version, raw_manifest, files)
    finally:
        remove(staging)
    elapsed_s = max(time.monotonic() - started, 1e-6)
    log(f"sync done: {version}: {fetched_mib:.1f} MiB in {elapsed_s:.1f}s ({fetched_mib / elapsed_s:.1f} MiB/s)")
    return True, version


def read_manifest(response: http.client.HTTPResponse) -> bytes:
    raw = response.read(MAX_MANIFEST_BYTES + 1)
    if len(raw) > MAX_MANIFEST_BYTES:  # (a SyncError: not retried)
        raise bad_manifest(f"larger than {MAX_MANIFEST_BYTES} bytes")
    return raw


def link_or_copy(source: str, target: str) -> None:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Sync a model from object storage to ROOT/models/NAME.")
    parser.add_argument("--cloud", required=True, choices=CLOUDS)
    parser.add_argument("--region", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--root", required=True, help="the model is synced to ROOT/models/NAME/current")
    parser.add_argument("--name", required=True)
    parser.add_argument("--revision", help="the model revision the manifest must name")
    parser.add_argument("--endpoint")
    parser.add_argument("--metadata-endpoint")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--part-size-mib", type=int, default=64)
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--backoff-s", type=float, default=1.0)
    parser.add_argument("--auth-grace-s", type=float, default=300.0)
    args = parser.parse_args(argv)
    prefix = args.prefix if args.prefix.endswith("/") or not args.prefix else args.prefix + "/"
    try:
        store = ObjectStore(args.cloud, args.region, args.bucket, args.endpoint, args.metadata_endpoint,
                            Retry(max(args.attempts, 1), args.backoff_s, args.auth_grace_s))
        dest = model_dest(args.root, args.name)
        if args.revision is not None and not REVISION.fullmatch(args.revision):
            raise SyncError(f"revision {args.revision!r:.60} must match {REVISION.pattern}", EXIT_USAGE)
    except (AccessError, SyncError, OSError) as error:
        log(f"sync FAILED: {error}")
        return EXIT_USAGE
    try:
        changed, version = sync(store, prefix, dest, max(args.workers, 1), args.part_size_mib * MIB, args.revision)
    except SyncError as error:
        log(f"sync FAILED: {error}")
        return error.exit_code
    except AccessError as error:
        log(f"sync FAILED: object storage unreachable or access denied: {error}")
        return EXIT_STORAGE
    print(f"changed={int(changed)} version={version} path={os.path.join(dest, 'current')}", flush=True)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
