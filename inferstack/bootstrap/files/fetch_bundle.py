#!/usr/bin/env python3
"""Fetch the boot bundle from the model bucket, check it against the sha256 in the user data, and install it.

The user data is small (cloud providers cap it at 16-32 KB): it carries the settings, cloud_access.py, this
loader and the boot unit. Everything else the server runs (boot.sh, the model sync, the secret fetch, the
runtime's and the gateway's units and configuration) is one JSON document in the model bucket, stored under
its own sha256 by `pulumi up`:

    {"format": "inferstack-bundle/1", "files": [{"path": "...", "mode": "0755", "content": "..."}, ...]}

Runs as root before boot.sh at every boot (ExecStartPre of inferstack-boot.service). When the installed bundle
already has the expected sha256 it does nothing. A bundle whose bytes differ from the sha256 is never installed;
each file goes only to the few places a bundle may write, atomically (a reader never sees half a file).

Exit status: 0 installed or unchanged, 2 bad settings or bundle, 3 checksum mismatch, 4 storage unreachable.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cloud_access import (  # type: ignore[import-not-found,unused-ignore]  # the sibling file
    AccessError,
    CredentialSource,
    ObjectStore,
    Retry,
    log,
)

SETTINGS = os.environ.get("INFERSTACK_CONFIG", "/etc/inferstack/bootstrap.env")
STATE = os.environ.get("INFERSTACK_BUNDLE_STATE", "/var/lib/inferstack/bundle.sha256")
ROOT = os.environ.get("INFERSTACK_ROOT", "/")
"""Where the file system starts (tests install into a directory)."""
BUNDLE_FORMAT = "inferstack-bundle/1"
MAX_BUNDLE_BYTES = 4 << 20
AUTH_GRACE_S = float(os.environ.get("INFERSTACK_AUTH_GRACE_S", "300"))
"""How long 401/403 are retried: a new identity's grants take minutes to reach the storage service."""
# Where a bundle may write: the programs, the settings directory and inferstack's own units. Nothing else.
ALLOWED_PATH = re.compile(r"/(usr/local/lib/inferstack/[a-z0-9_-]+\.(sh|py|lua)|etc/inferstack/[a-z0-9_-]+\.(conf|pem)"
                          r"|etc/systemd/system/inferstack-[a-z-]+(-[1-8])?\.service)")  # -N: model process N
MODES = {"0644": 0o644, "0755": 0o755}
SETTING_LINE = re.compile(r"([A-Z][A-Z0-9_]*)=([A-Za-z0-9._:/@+=,\[\]-]*)")

EXIT_OK, EXIT_BAD, EXIT_CHECKSUM, EXIT_STORAGE = 0, 2, 3, 4


class BundleError(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def read_settings(path: str) -> dict[str, str]:
    """KEY=VALUE lines, read as data (never sourced); a line of any other shape is an error."""
    settings = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            match = SETTING_LINE.fullmatch(line)
            if not match:
                raise BundleError(f"{path}:{number}: not a KEY=VALUE setting", EXIT_BAD)
            settings[match.group(1)] = match.group(2)
    return settings


def parse_bundle(raw: bytes, expected_sha256: str) -> list[tuple[str, int, str]]:
    """(path, mode, content) of each file, once the bytes match the sha256 and every path is an allowed one."""
    got = hashlib.sha256(raw).hexdigest()
    if got != expected_sha256:
        raise BundleError(f"bundle sha256 is {got}, the user data expects {expected_sha256}: not installed",
                          EXIT_CHECKSUM)
    try:
        document = json.loads(raw.decode("utf-8"))
        if document.get("format") != BUNDLE_FORMAT:
            raise ValueError(f"format {document.get('format')!r}")
        files = [(str(f["path"]), MODES[f["mode"]], str(f["content"])) for f in document["files"]]
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise BundleError(f"bundle is not an {BUNDLE_FORMAT} document: {error}", EXIT_BAD) from None
    for path, _, _ in files:
        if not ALLOWED_PATH.fullmatch(path):
            raise BundleError(f"bundle writes outside the allowed places: {path!r}", EXIT_BAD)
    return files


def install(files: list[tuple[str, int, str]], root: str) -> None:
    for path, mode, content in files:
        target = os.path.join(root, path.lstrip("/"))
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        temporary = f"{target}.inferstack-tmp"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.chmod(temporary, mode)
        os.replace(temporary, target)


def installed_sha256(state: str) -> str | None:
    try:
        with open(state) as handle:
            return handle.read().strip()
    except OSError:
        return None


def fetch(settings: dict[str, str]) -> bytes:
    store = ObjectStore(settings["INFERSTACK_CLOUD"], settings["INFERSTACK_REGION"], settings["MODEL_BUCKET"],
                        settings.get("STORAGE_ENDPOINT") or None, settings.get("METADATA_ENDPOINT") or None,
                        Retry(auth_grace_s=AUTH_GRACE_S))
    credentials = CredentialSource(store.cloud, store.metadata_endpoint, store.retry)
    raw: bytes = store.get(settings["BUNDLE_KEY"], credentials, lambda response: response.read(MAX_BUNDLE_BYTES + 1))
    if len(raw) > MAX_BUNDLE_BYTES:
        raise BundleError(f"bundle is larger than {MAX_BUNDLE_BYTES} bytes", EXIT_BAD)
    return raw


def main() -> int:
    try:
        settings = read_settings(SETTINGS)
        expected = settings["BUNDLE_SHA256"]
        if installed_sha256(STATE) == expected:
            log(f"bundle: {expected[:16]} already installed")
            return EXIT_OK
        files = parse_bundle(fetch(settings), expected)
        install(files, ROOT)
        os.makedirs(os.path.dirname(STATE), exist_ok=True)
        with open(STATE, "w") as handle:
            handle.write(expected + "\n")
    except BundleError as error:
        log(f"bundle FAILED: {error}")
        return error.exit_code
    except KeyError as error:
        log(f"bundle FAILED: {SETTINGS} lacks {error}")
        return EXIT_BAD
    except (OSError, ValueError) as error:
        log(f"bundle FAILED: {error}")
        return EXIT_BAD
    except AccessError as error:
        log(f"bundle FAILED: object storage unreachable or access denied: {error}")
        return EXIT_STORAGE
    log(f"bundle: installed {expected[:16]} ({len(files)} files)")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
