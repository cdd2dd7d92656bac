"""The boot-time model sync against a real S3-compatible server on loopback: parallel ranged downloads,
checksums, atomic activation, incremental re-sync, retries and clear failures; the manifest's paths kept plain
and the model directory kept inside ROOT/models."""

from __future__ import annotations

import json
import os
from pathlib import Path

import model_sync
import pytest
from bootstrap_fakes import free_port, make_model, s3_client, upload_model

from inferstack.bootstrap.manifest import build_manifest

KIB = 1024
SIZES = {"config.json": 300, "model-00001-of-00002.safetensors": 700 * KIB, "tokenizer/vocab.bin": 90 * KIB,
         "model-00002-of-00002.safetensors": 500 * KIB}


def run_sync(endpoint: str, metadata_url: str, bucket: str, prefix: str, dest: Path, *extra: str) -> int:
    """model_sync into `dest` = ROOT/models/NAME."""
    assert dest.parent.name == "models"
    return model_sync.main(["--cloud", "aws", "--region", "us-east-1", "--bucket", bucket, "--prefix", prefix,
                            "--root", str(dest.parent.parent), "--name", dest.name, "--endpoint", endpoint,
                            "--metadata-endpoint", metadata_url, "--workers", "8", "--part-size-mib", "0", *extra])


def tree(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file() and not p.name.startswith(".") and p.name != "manifest.json"}


@pytest.fixture
def uploaded(s3_endpoint: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[str, str, Path]:
    """A four-file model (with manifest) uploaded under a prefix unique to the test."""
    prefix = f"models/{request.node.name}/"
    model = make_model(tmp_path / "model", SIZES)
    upload_model(s3_endpoint, "models", prefix, model)
    return "models", prefix, model


def test_sync_downloads_every_file_and_activates_the_verified_version(
        s3_endpoint: str, metadata_url: str, uploaded: tuple[str, str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    bucket, prefix, model = uploaded
    dest = tmp_path / "models" / "dest"
    assert run_sync(s3_endpoint, metadata_url, bucket, prefix, dest) == 0
    assert tree(dest / "current") == tree(model)
    assert os.readlink(dest / "current").startswith("v-")
    assert not list(dest.glob(".staging-*"))
    assert capsys.readouterr().out.startswith("changed=1 version=v-")


def test_large_files_are_fetched_as_parallel_byte_ranges(
        s3_endpoint: str, metadata_url: str, s3_model_for_ranges: tuple[str, str, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    bucket, prefix, model = s3_model_for_ranges
    ranges: list[tuple[int, int] | None] = []
    original_get = model_sync.ObjectStore.get

    def recording_get(self, key, credentials, read, byte_range=None):  # type: ignore[no-untyped-def]
        ranges.append(byte_range)
        return original_get(self, key, credentials, read, byte_range)

    monkeypatch.setattr(model_sync.ObjectStore, "get", recording_get)
    monkeypatch.setattr(model_sync, "MIB", 64 * KIB)  # --part-size-mib 1 then means 64 KiB parts
    dest = tmp_path / "models" / "dest"
    assert run_sync(s3_endpoint, metadata_url, bucket, prefix, dest, "--part-size-mib", "1") == 0
    assert tree(dest / "current") == tree(model)
    assert (0, 64 * KIB - 1) in ranges and len([r for r in ranges if r]) == 4 + 1  # 256 KiB + 1 byte → 5 parts


@pytest.fixture
def s3_model_for_ranges(s3_endpoint: str, tmp_path: Path) -> tuple[str, str, Path]:
    model = make_model(tmp_path / "ranged", {"weights.bin": 256 * KIB + 1})
    upload_model(s3_endpoint, "models", "models/ranged/", model)
    return "models", "models/ranged/", model


def test_a_second_sync_changes_nothing(s3_endpoint: str, metadata_url: str, uploaded: tuple[str, str, Path],
                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bucket, prefix, _ = uploaded
    dest = tmp_path / "models" / "dest"
    run_sync(s3_endpoint, metadata_url, bucket, prefix, dest)
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in dest.rglob("*")}
    capsys.readouterr()
    assert run_sync(s3_endpoint, metadata_url, bucket, prefix, dest) == 0
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in dest.rglob("*")} == before
    captured = capsys.readouterr()
    assert captured.out.startswith("changed=0")
    assert "model unchanged" in captured.err


def test_a_changed_model_downloads_only_the_changed_file(
        s3_endpoint: str, metadata_url: str, uploaded: tuple[str, str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    bucket, prefix, model = uploaded
    dest = tmp_path / "models" / "dest"
    run_sync(s3_endpoint, metadata_url, bucket, prefix, dest)
    old_version = os.readlink(dest / "current")
    unchanged_inode = (dest / "current" / "model-00001-of-00002.safetensors").stat().st_ino
    (model / "config.json").write_text('{"changed": true}')
    (model / "manifest.json").write_text(json.dumps(build_manifest(model)))
    upload_model(s3_endpoint, bucket, prefix, model)
    capsys.readouterr()
    assert run_sync(s3_endpoint, metadata_url, bucket, prefix, dest) == 0
    assert "1 file(s) to download" in capsys.readouterr().err
    assert os.readlink(dest / "current") != old_version
    assert not (dest / old_version).exists()
    assert (dest / "current" / "config.json").read_text() == '{"changed": true}'
    assert (dest / "current" / "model-00001-of-00002.safetensors").stat().st_ino == unchanged_inode


def test_a_corrupted_object_is_detected_and_never_activated(
        s3_endpoint: str, metadata_url: str, uploaded: tuple[str, str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    bucket, prefix, _ = uploaded
    dest = tmp_path / "models" / "dest"
    s3_client(s3_endpoint).put_object(Bucket=bucket, Key=prefix + "tokenizer/vocab.bin", Body=b"corrupted")
    assert run_sync(s3_endpoint, metadata_url, bucket, prefix, dest) == model_sync.EXIT_CHECKSUM
    err = capsys.readouterr().err
    assert "checksum mismatch (round 2/2): tokenizer/vocab.bin: manifest sha256" in err
    assert "sync FAILED: checksum mismatch for tokenizer/vocab.bin" in err and "NOT activated" in err
    assert not (dest / "current").exists()
    assert not list(dest.glob(".staging-*")) and not list(dest.glob("v-*"))


def test_an_unreachable_storage_endpoint_is_retried_then_fails_clearly(
        metadata_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    code = run_sync(endpoint, metadata_url, "models", "models/x/", tmp_path / "models" / "dest", "--attempts", "3",
                    "--backoff-s", "0.01")
    assert code == model_sync.EXIT_STORAGE
    err = capsys.readouterr().err
    assert err.count("retry GET models/models/x/manifest.json: attempt") == 2
    assert "sync FAILED: object storage unreachable or access denied: GET models/models/x/manifest.json failed " \
           "after 3 attempts" in err


def test_a_missing_manifest_fails_at_once_with_the_servers_answer(
        s3_endpoint: str, metadata_url: str, uploaded: tuple[str, str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    bucket, _, _ = uploaded
    assert run_sync(s3_endpoint, metadata_url, bucket, "models/absent/", tmp_path / "models" / "d") == \
        model_sync.EXIT_STORAGE
    assert "HTTP 404" in capsys.readouterr().err


def test_the_manifest_helper_lists_every_file_with_size_and_sha256(tmp_path: Path) -> None:
    model = make_model(tmp_path / "m", {"a.bin": 10, "sub/b.bin": 20})
    manifest = json.loads((model / "manifest.json").read_text())
    assert manifest["format"] == "inferstack-manifest/1"
    assert [(f["path"], f["size"]) for f in manifest["files"]] == [("a.bin", 10), ("sub/b.bin", 20)]
    assert manifest["files"][0]["sha256"] == model_sync.file_sha256(str(model / "a.bin"))
