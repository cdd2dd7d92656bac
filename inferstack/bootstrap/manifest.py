"""Write the `manifest.json` the boot-time model sync verifies against: every file's path, size and sha256.

    inferstack manifest ./llama-3.1-8b-q4_k_m
    aws s3 cp --recursive ./llama-3.1-8b-q4_k_m s3://BUCKET/models/llama-3.1-8b/q4_k_m/

Upload the manifest together with (or after) the files: the server activates a model only when every file
matches it, and a changed manifest re-downloads only the files whose size or sha256 changed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from inferstack.errors import input_error

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "inferstack-manifest/1"
_BLOCK_BYTES = 8 << 20


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(_BLOCK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def build_manifest(model_dir: Path) -> dict[str, object]:
    """The manifest of every regular file under `model_dir` (hidden files and an old manifest excluded)."""
    if not model_dir.is_dir():
        raise input_error("model_dir", "is not a directory", value=str(model_dir), fix="pass the model's folder")
    paths = sorted(p for p in model_dir.rglob("*") if p.is_file() and p.name != MANIFEST_NAME
                   and not any(part.startswith(".") for part in p.relative_to(model_dir).parts))
    if not paths:
        raise input_error("model_dir", "holds no files", value=str(model_dir), fix="pass the model's folder")
    files = [{"path": p.relative_to(model_dir).as_posix(), "size": p.stat().st_size, "sha256": file_sha256(p)}
             for p in paths]
    return {"format": MANIFEST_FORMAT, "files": files}


def write_manifest(model_dir: Path) -> Path:
    """Write `model_dir/manifest.json` and return its path."""
    target = model_dir / MANIFEST_NAME
    target.write_text(json.dumps(build_manifest(model_dir), indent=1) + "\n", encoding="utf-8")
    return target
