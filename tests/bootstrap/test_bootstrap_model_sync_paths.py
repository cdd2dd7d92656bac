"""What model_sync writes and deletes stays inside ROOT/models/NAME, and only what the manifest verifiably lists
is activated: manifest paths must be plain (rejected, never repaired), a bad manifest exits 2 with one clear line
and never a traceback (fuzzed), and no symlink leads a write or a delete out of the model directory."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import model_sync
import pytest
from bootstrap_fakes import CloudStore, cloud_store_server, metadata_server
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

BUCKET, PREFIX, FORMAT = "models-bucket", "models/m/", "inferstack-manifest/1"


@pytest.fixture(scope="module")
def metadata() -> Iterator[str]:
    with metadata_server() as url:
        yield url


@pytest.fixture(scope="module")
def store() -> Iterator[CloudStore]:
    """Google Cloud Storage's stand-in (bearer token: the cheapest signature to check, for the fuzzing)."""
    with cloud_store_server("gcp", "europe-west4") as fake:
        yield fake


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def publish(store: CloudStore, files: dict[str, bytes], manifest: object | None = None) -> bytes:
    """Put `files` and a manifest (theirs, unless one is given) under PREFIX; returns the manifest's bytes."""
    store.objects.clear()
    for path, content in files.items():
        store.objects[f"{BUCKET}/{PREFIX}{path}"] = content
    if manifest is None:
        manifest = {"format": FORMAT, "files": [{"path": p, "size": len(c), "sha256": sha256(c)}
                                                for p, c in files.items()]}
    raw = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    store.objects[f"{BUCKET}/{PREFIX}manifest.json"] = raw
    return raw


def run(store: CloudStore, metadata: str, root: Path, name: str = "tiny") -> int:
    return model_sync.main(["--cloud", "gcp", "--region", "europe-west4", "--bucket", BUCKET, "--prefix", PREFIX,
                            "--root", str(root), f"--name={name}", "--endpoint", store.url, "--metadata-endpoint",
                            metadata, "--part-size-mib", "0", "--attempts", "1", "--auth-grace-s", "0"])


#### Manifest paths ####


def entry(path: object, content: bytes = b"x", **override: object) -> dict[str, object]:
    return {"path": path, "size": len(content), "sha256": sha256(content), **override}


BAD_MANIFESTS = {
    "not JSON": b"{",
    "not UTF-8": b"\xff\xfe{}",
    "deeply nested": b"[" * 100_000 + b"]" * 100_000,
    "another format": {"format": "other/1", "files": [entry("a")]},
    "no files": {"format": FORMAT, "files": []},
    "files not a list": {"format": FORMAT, "files": {"a": 1}},
    "an entry not an object": {"format": FORMAT, "files": ["a"]},
    "a missing sha256": {"format": FORMAT, "files": [{"path": "a", "size": 1}]},
    "a path not a string": {"format": FORMAT, "files": [entry(7)]},
    "absolute": {"format": FORMAT, "files": [entry("/etc/passwd")]},
    "parent": {"format": FORMAT, "files": [entry("../etc/passwd")]},
    "parent inside": {"format": FORMAT, "files": [entry("a/../../b")]},
    "dot segment": {"format": FORMAT, "files": [entry("a/./b")]},
    "empty segment": {"format": FORMAT, "files": [entry("a//b")]},
    "trailing slash": {"format": FORMAT, "files": [entry("a/")]},
    "hidden": {"format": FORMAT, "files": [entry(".hidden")]},
    "hidden inside": {"format": FORMAT, "files": [entry("a/.git/config")]},
    "backslash": {"format": FORMAT, "files": [entry("a\\..\\b")]},
    "NUL": {"format": FORMAT, "files": [entry("a\x00b")]},
    "newline": {"format": FORMAT, "files": [entry("a\nb")]},
    "escape": {"format": FORMAT, "files": [entry("a\x1b[2Jb")]},
    "right-to-left override": {"format": FORMAT, "files": [entry("model\u202efpg.bin")]},
    "lone surrogate": {"format": FORMAT, "files": [entry("a\udc80")]},
    "component over 255 bytes": {"format": FORMAT, "files": [entry("é" * 128)]},
    "path over 1024 bytes": {"format": FORMAT, "files": [entry("/".join(["a" * 200] * 6))]},
    "negative size": {"format": FORMAT, "files": [entry("a", size=-1)]},
    "fractional size": {"format": FORMAT, "files": [entry("a", size=1.5)]},
    "boolean size": {"format": FORMAT, "files": [entry("a", size=True)]},
    "size as text": {"format": FORMAT, "files": [entry("a", size="1")]},
    "short sha256": {"format": FORMAT, "files": [entry("a", sha256="ab" * 31)]},
    "sha256 not hex": {"format": FORMAT, "files": [entry("a", sha256="z" * 64)]},
    "sha256 not text": {"format": FORMAT, "files": [entry("a", sha256=12)]},
    "listed twice": {"format": FORMAT, "files": [entry("a"), entry("a", b"y")]},
    "file and directory": {"format": FORMAT, "files": [entry("a"), entry("a/b")]},
    "directory and file": {"format": FORMAT, "files": [entry("a/b/c"), entry("a/b")]},
}


@pytest.mark.parametrize("manifest", BAD_MANIFESTS.values(), ids=BAD_MANIFESTS.keys())
def test_a_manifest_that_is_not_plain_is_rejected_with_exit_2(manifest: object) -> None:
    raw = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    with pytest.raises(model_sync.SyncError, match=r"manifest\.json is not a valid inferstack manifest") as error:
        model_sync.parse_manifest(raw)
    assert error.value.exit_code == 2


@pytest.mark.parametrize("path", ["model.gguf", "tokenizer/vocab.json", "a b/c+d=e%f.bin", "ünï/模型.bin",
                                  "a" * 255, "/".join(["a" * 200] * 5)])
def test_plain_relative_paths_are_accepted(path: str) -> None:
    assert [f.path for f in model_sync.parse_manifest(json.dumps({"format": FORMAT, "files": [entry(path)]})
                                                      .encode())] == [path]


def test_a_manifest_larger_than_the_cap_is_refused_without_retrying(
        store: CloudStore, metadata: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(model_sync, "MAX_MANIFEST_BYTES", 100)
    publish(store, {"w.bin": b"weights"}, {"format": FORMAT, "files": [entry("w.bin", b"weights")], "x": "y" * 100})
    store.requests.clear()
    assert run(store, metadata, tmp_path) == 2
    assert "manifest.json is not a valid inferstack manifest: larger than 100 bytes" in capsys.readouterr().err
    assert len(store.requests) == 1


def test_a_dot_segment_cannot_list_one_file_twice_with_two_checksums(
        store: CloudStore, metadata: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`a/b` and `a/./b` are one file on disk: a manifest listing both would let the second, unverified content
    stand in for the first. Rejected before anything is downloaded."""
    good, evil = b"the listed weights", b"other weights"
    publish(store, {"a/b": good, "a/./b": evil})
    store.requests.clear()
    assert run(store, metadata, tmp_path) == 2
    assert "sync FAILED: manifest.json is not a valid inferstack manifest" in capsys.readouterr().err
    assert [path for _, path, _ in store.requests] == [f"/{BUCKET}/{PREFIX}manifest.json"]
    assert not (tmp_path / "models" / "tiny" / "current").exists()


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children,
                                                                                         max_size=3), max_leaves=8)
_PLAIN_PATHS = st.sampled_from(["a", "a/b", "b", "ü ñ/x+y=z%.bin", "x" * 255])  # few: they collide
_HOSTILE_PATHS = st.one_of(
    st.text(alphabet="ab/.\\\x00\n é\u202e%+", max_size=10),
    st.sampled_from(["a/./b", "..", "a/../b", "/abs", ".x", "a//b", "é" * 128, "\udc80"]), _JSON)


def _usually(right: st.SearchStrategy[object], wrong: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """`right` seven times in eight: enough valid manifests get through to exercise the sync itself."""
    return st.integers(0, 7).flatmap(lambda n: right if n else wrong)


@st.composite
def _entries(draw: st.DrawFn) -> tuple[dict[str, object], object, bytes]:
    """A manifest entry that is right or wrong in any field, with the object it describes."""
    path, content = draw(_usually(_PLAIN_PATHS, _HOSTILE_PATHS)), draw(st.sampled_from([b"", b"x", b"weights"]))
    size = draw(_usually(st.just(len(content)), st.sampled_from([-1, 1.5, True, "1", None, []])))
    digest = draw(_usually(st.just(sha256(content)), st.one_of(st.just(sha256(content).upper()), st.text(max_size=64))))
    fields = {"path": path, "size": size, "sha256": digest}
    dropped = draw(_usually(st.none(), st.sampled_from(["path", "size", "sha256"])))
    return {k: v for k, v in fields.items() if k != dropped}, path, content


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(entries=[(entry("a"), "a", b"x"), (entry("a/b", b""), "a/b", b"")], document=None, format_=FORMAT)
@given(entries=st.lists(_entries(), min_size=1, max_size=4), document=_usually(st.none(), _JSON),
       format_=_usually(st.just(FORMAT), st.sampled_from(["inferstack-manifest/2", None, 1])))
def test_any_manifest_either_syncs_verified_files_or_exits_2_without_a_traceback(
        store: CloudStore, metadata: str, entries: list[tuple[dict[str, object], object, bytes]],
        document: object, format_: object) -> None:
    files = {path: content for _, path, content in entries if isinstance(path, str)}
    manifest = document if document is not None else {"format": format_, "files": [e for e, _, _ in entries]}
    publish(store, files, manifest)
    with tempfile.TemporaryDirectory() as root:
        code = run(store, metadata, Path(root))
        event(f"exit {code}")
        assert code in (0, 2)
        if code == 0:  # only files whose bytes are the listed sha256 are ever activated
            for listed in manifest["files"]:  # type: ignore[index]
                assert sha256((Path(root) / "models/tiny/current" / listed["path"]).read_bytes()) == listed["sha256"]


#### The model directory ####


@pytest.mark.parametrize("name", ["", ".", "..", "...", "a/b", "../x", "A", "-a", ".a", "a" * 65, "a\n", "a b",
                                  "ü"])
def test_a_model_name_that_is_not_a_plain_name_is_refused_before_anything_is_created(
        store: CloudStore, metadata: str, tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(store, metadata, tmp_path / "root", name) == 2
    assert f"model name {name!r} must match" in capsys.readouterr().err
    assert not (tmp_path / "root").exists()


@pytest.mark.parametrize("name", ["llama-3.1-8b_q4", "a" * 64, "0", "a..b"])
def test_plain_model_names_sync_to_root_models_name(store: CloudStore, metadata: str, tmp_path: Path,
                                                    name: str) -> None:
    publish(store, {"w.bin": b"weights"})
    assert run(store, metadata, tmp_path, name) == 0
    assert (tmp_path / "models" / name / "current" / "w.bin").read_bytes() == b"weights"


@pytest.mark.parametrize("link", ["models", "models/tiny"])
def test_a_symlink_leading_the_model_directory_elsewhere_is_refused(
        store: CloudStore, metadata: str, tmp_path: Path, link: str, capsys: pytest.CaptureFixture[str]) -> None:
    publish(store, {"w.bin": b"weights"})
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "root" / link).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "root" / link).symlink_to(outside)
    assert run(store, metadata, tmp_path / "root") == 2
    assert "not a directory of its own" in capsys.readouterr().err
    assert list(outside.iterdir()) == []


def test_a_root_that_is_itself_a_symlink_is_followed(store: CloudStore, metadata: str, tmp_path: Path) -> None:
    publish(store, {"w.bin": b"weights"})
    (tmp_path / "disk").mkdir()
    (tmp_path / "root").symlink_to(tmp_path / "disk")
    assert run(store, metadata, tmp_path / "root") == 0
    assert (tmp_path / "disk" / "models" / "tiny" / "current" / "w.bin").exists()


def test_links_planted_in_the_model_directory_are_removed_never_followed(
        store: CloudStore, metadata: str, tmp_path: Path) -> None:
    raw = publish(store, {"w.bin": b"weights"})
    version = model_sync.version_of(raw)
    dest = tmp_path / "models" / "tiny"
    dest.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "w.bin").write_bytes(b"weights")  # even the right content: it is not ours
    for name in ("v-0123456789abcdef", f".staging-{version}", version):
        (dest / name).symlink_to(outside)
    (dest / "current").symlink_to(outside)
    assert run(store, metadata, tmp_path) == 0
    assert os.readlink(dest / "current") == version and not (dest / version).is_symlink()
    assert sorted(p.name for p in dest.iterdir()) == [".verified.json", "current", version]
    assert [p.name for p in outside.iterdir()] == ["w.bin"]
    assert (dest / "current" / "w.bin").stat().st_ino != (outside / "w.bin").stat().st_ino  # downloaded, not linked


def test_the_old_dest_option_is_gone(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        model_sync.main(["--cloud", "aws", "--region", "us-east-1", "--bucket", "models", "--prefix", "m/",
                         "--dest", "/tmp/x"])
    assert exit_info.value.code == 2
    assert "--root" in capsys.readouterr().err
