"""Write the `manifest.json` the boot-time model sync verifies against: every file's path, size and sha256.

    inferstack manifest ./llama-3.1-8b-q4_k_m
    aws s3 cp --recursive ./llama-3.1-8b-q4_k_m s3://BUCKET/models/llama-3.1-8b/q4_k_m/

A workload that names a model revision (model.revision) serves the files under that revision's own folder, and the
server refuses a manifest that names another revision:

    hf download meta-llama/Llama-3.1-8B-Instruct --revision 0e9e39f2... --local-dir ./r   # a hub commit
    inferstack manifest ./r --revision 0e9e39f2...
    aws s3 cp --recursive ./r s3://BUCKET/models/llama-3.1-8b/bf16/0e9e39f2.../

For a hub commit, the revision pins the files to that commit; for files of your own, it is a label you choose (r2).

Upload the manifest together with (or after) the files: the server activates a model only when every file
matches it, and a changed manifest re-downloads only the files whose size or sha256 changed.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from inferstack.errors import input_error
from inferstack.spec import MODEL_REVISION_PATTERN

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "inferstack-manifest/1"
_BLOCK_BYTES = 8 << 20


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(_BLOCK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def build_manifest(model_dir: Path, revision: str | None = None) -> dict[str, object]:
    """The manifest of every regular file under `model_dir` (hidden files and an old manifest excluded), naming
    `revision` when given (the workload's model.revision, which the server then checks)."""
    if revision is not None and not re.fullmatch(MODEL_REVISION_PATTERN, revision):
        raise input_error("--revision", "is not a model revision", value=revision,
                          fix="give the workload's model.revision: a Hugging Face commit (40 lowercase hex "
                              "characters) or a label of lowercase letters, digits, '.', '_' and '-'")
    if not model_dir.is_dir():
        raise input_error("model_dir", "is not a directory", value=str(model_dir), fix="pass the model's folder")
    paths = sorted(p for p in model_dir.rglob("*") if p.is_file() and p.name != MANIFEST_NAME
                   and not any(part.startswith(".") for part in p.relative_to(model_dir).parts))
    if not paths:
        raise input_error("model_dir", "holds no files", value=str(model_dir), fix="pass the model's folder")
    files = [{"path": p.relative_to(model_dir).as_posix(), "size": p.stat().st_size, "sha256": file_sha256(p)}
             for p in paths]
    return {"format": MANIFEST_FORMAT, "files": files, **({"revision": revision} if revision else {})}


def write_manifest(model_dir: Path, revision: str | None = None) -> Path:
    """Write `model_dir/manifest.json` (naming `revision`, when given) and return its path."""
    target = model_dir / MANIFEST_NAME
    target.write_text(json.dumps(build_manifest(model_dir, revision), indent=1) + "\n", encoding="utf-8")
    return target
