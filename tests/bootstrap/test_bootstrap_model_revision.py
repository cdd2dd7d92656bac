"""A model revision on the server: the boot script passes the plan's revision to the model sync, which serves the
files under the revision's own prefix only when their manifest names that revision (against a real S3-compatible
server on loopback, as test_bootstrap_model_sync.py)."""

from __future__ import annotations

import json
from pathlib import Path

import model_sync
import pytest
from bootstrap_fakes import make_model, upload_model

from inferstack import bootstrap
from inferstack.bootstrap.manifest import build_manifest, write_manifest
from inferstack.errors import InputError
from tests.sample_plans import sample_plan

KIB = 1024


def run_sync(endpoint: str, metadata_url: str, prefix: str, dest: Path, *extra: str) -> int:
    return model_sync.main(["--cloud", "aws", "--region", "us-east-1", "--bucket", "models", "--prefix", prefix,
                            "--root", str(dest.parent.parent), "--name", dest.name, "--endpoint", endpoint,
                            "--metadata-endpoint", metadata_url, "--workers", "4", "--part-size-mib", "0", *extra])


def uploaded(endpoint: str, tmp_path: Path, prefix: str, revision: str | None) -> Path:
    model = make_model(tmp_path / prefix.strip("/").replace("/", "-"), {"weights.bin": 64 * KIB, "config.json": 200})
    write_manifest(model, revision)
    upload_model(endpoint, "models", prefix, model)
    return model


def test_the_files_of_the_plans_revision_are_served(s3_endpoint: str, metadata_url: str, tmp_path: Path) -> None:
    prefix = "models/chat/bf16/r2/"
    model = uploaded(s3_endpoint, tmp_path, prefix, "r2")
    dest = tmp_path / "root" / "models" / "chat"
    assert run_sync(s3_endpoint, metadata_url, prefix, dest, "--revision", "r2") == 0
    assert (dest / "current" / "weights.bin").read_bytes() == (model / "weights.bin").read_bytes()


@pytest.mark.parametrize("manifest_revision", ["r1", None], ids=["another-revision", "no-revision"])
def test_files_of_another_revision_are_refused_and_never_activated(
        s3_endpoint: str, metadata_url: str, tmp_path: Path, manifest_revision: str | None,
        capsys: pytest.CaptureFixture[str]) -> None:
    prefix = f"models/chat/bf16/mixed-{manifest_revision}/"
    uploaded(s3_endpoint, tmp_path, prefix, manifest_revision)
    dest = tmp_path / "root" / "models" / "chat"
    assert run_sync(s3_endpoint, metadata_url, prefix, dest, "--revision", "r2") == model_sync.EXIT_USAGE
    assert not (dest / "current").exists()
    error = capsys.readouterr().err
    assert f"manifest.json is of revision {manifest_revision!r}, the plan serves revision 'r2'" in error
    assert "inferstack manifest DIR --revision r2" in error


def test_without_a_revision_any_manifest_is_served(s3_endpoint: str, metadata_url: str, tmp_path: Path) -> None:
    prefix = "models/chat/bf16/"
    uploaded(s3_endpoint, tmp_path, prefix, "r1")
    assert run_sync(s3_endpoint, metadata_url, prefix, tmp_path / "root" / "models" / "chat") == 0


@pytest.mark.parametrize("revision", ["R2", "../r2", "r2;reboot", "a" * 41])
def test_a_malformed_revision_is_a_usage_error(s3_endpoint: str, metadata_url: str, tmp_path: Path,
                                                revision: str) -> None:
    dest = tmp_path / "root" / "models" / "chat"
    assert run_sync(s3_endpoint, metadata_url, "models/x/", dest, "--revision", revision) == model_sync.EXIT_USAGE


def test_the_manifest_helper_names_the_revision_and_refuses_a_malformed_one(tmp_path: Path) -> None:
    model = make_model(tmp_path / "m", {"weights.bin": 10})
    assert build_manifest(model, "r2")["revision"] == "r2"
    assert "revision" not in build_manifest(model)
    assert json.loads(write_manifest(model, "0" * 40).read_text())["revision"] == "0" * 40
    with pytest.raises(InputError, match="is not a model revision"):
        build_manifest(model, "../r2")


def test_the_boot_settings_carry_the_plans_revision_and_boot_sh_passes_it_on() -> None:
    plan = sample_plan("aws", "cpu-llm", "production")
    model = plan.model.model_copy(update={"revision": "r2", "bucket_prefix": plan.model.bucket_prefix + "r2/"})
    rendered = bootstrap.render_bootstrap(plan.model_copy(update={"model": model}), "aws", bootstrap.BootstrapOptions(
        model_bucket="chat-models", region="us-east-1"))
    settings = [line.strip() for line in rendered.user_data.splitlines() if line.strip().startswith("MODEL_")]
    assert "MODEL_PREFIX=models/llama-3.1-8b/q4_k_m/r2/" in settings and "MODEL_REVISION=r2" in settings
    boot = json.loads(rendered.bundle)["files"]
    (script,) = [f["content"] for f in boot if f["path"].endswith("/boot.sh")]
    assert '${MODEL_REVISION:+--revision "$MODEL_REVISION"}' in script
