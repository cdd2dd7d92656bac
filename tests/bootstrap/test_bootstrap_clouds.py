"""The boot programs against each cloud's object storage and secret store, end to end: loopback stand-ins that
check every signature with the cloud's own SDK (bootstrap_fakes.cloud_store_server) serve a model and a secret;
model_sync and fetch_secret must fetch both through `--endpoint` / `--metadata-endpoint`. Names that would end up
in a host name (bucket, region) are checked against each cloud's rules before any request."""

from __future__ import annotations

import argparse
import re
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import cloud_access
import fetch_secret
import model_sync
import pytest
from bootstrap_fakes import (
    ACCESS_KEY,
    GCP_PROJECT,
    SESSION_TOKEN,
    CloudStore,
    cloud_store_server,
    make_model,
    metadata_server,
)
from cloud_access import AccessError, Credentials, ObjectStore, Retry
from hypothesis import given
from hypothesis import strategies as st

from inferstack.clouds import CLOUD_FACTS

REGIONS = {"aws": "eu-west-1", "gcp": "europe-west4", "alibaba": "cn-hangzhou", "huawei": "ap-southeast-3"}
BUCKET = "models-bucket"
PREFIX = "models/tiny llama/q8+0/"
KIB = 1024
# Keys with the characters that broke signatures once: space, '+', '=', '%', non-ASCII.
SIZES = {"config.json": 300, "weights a+b=c%.bin": 200 * KIB + 1, "tokenizer/ünï.bin": 20 * KIB}


@pytest.fixture(scope="module")
def metadata() -> Iterator[str]:
    with metadata_server() as url:
        yield url


@pytest.fixture(params=sorted(REGIONS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CloudStore]:
    """The cloud's store holding a three-file model under PREFIX and the secret `api-key`."""
    with cloud_store_server(request.param, REGIONS[request.param]) as fake:
        fake.put_model(BUCKET, PREFIX, make_model(tmp_path / "model", SIZES))
        fake.secrets["api-key"] = "sk-test-0123456789"
        yield fake


def sync_args(store: CloudStore, metadata: str, root: Path, *extra: str) -> list[str]:
    return ["--cloud", store.cloud, "--region", store.region, "--bucket", BUCKET, "--prefix", PREFIX,
            "--root", str(root), "--name", "tiny-llama", "--endpoint", store.url, "--metadata-endpoint", metadata,
            "--attempts", "2", "--backoff-s", "0.01", "--auth-grace-s", "0", *extra]


def secret_args(store: CloudStore, metadata: str, out: Path, *secrets: str) -> list[str]:
    return ["--cloud", store.cloud, "--region", store.region, *[a for s in secrets for a in ("--secret", s)],
            "--out", str(out), "--endpoint", store.url, "--metadata-endpoint", metadata, "--auth-grace-s", "0"]


def test_the_server_programs_know_every_cloud_of_the_registry() -> None:
    """They cannot import inferstack.clouds: a cloud added there needs its metadata server, bucket grammar and
    secret store here too, and the registry reads its bucket grammar from here."""
    assert cloud_access.CLOUDS == tuple(CLOUD_FACTS) == tuple(REGIONS)
    assert set(cloud_access.METADATA_ENDPOINTS) == set(fetch_secret.READERS) == set(CLOUD_FACTS)
    assert {c: f.bucket_name_pattern for c, f in CLOUD_FACTS.items()} == cloud_access.BUCKET_NAME_PATTERNS
    assert all(fetch_secret.default_endpoint(cloud, REGIONS[cloud]).startswith("https://") for cloud in CLOUD_FACTS)


#### Every cloud, end to end ####


def test_model_sync_fetches_and_activates_the_model_from_each_clouds_store(
        store: CloudStore, metadata: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_sync, "MIB", 64 * KIB)  # --part-size-mib 1 then means 64 KiB ranges
    assert model_sync.main(sync_args(store, metadata, tmp_path / "root", "--part-size-mib", "1")) == 0
    current = tmp_path / "root" / "models" / "tiny-llama" / "current"
    for name in SIZES:
        assert (current / name).read_bytes() == store.objects[f"{BUCKET}/{PREFIX}{name}"]
    assert {status for _, _, status in store.requests} == {200, 206}  # every signature accepted, ranges used


def test_sync_runs_against_each_clouds_store_through_the_python_api(
        store: CloudStore, metadata: str, tmp_path: Path) -> None:
    object_store = ObjectStore(store.cloud, store.region, BUCKET, store.url, metadata, Retry(attempts=1))
    changed, version = model_sync.sync(object_store, PREFIX, str(tmp_path), workers=4, part_size=0)
    assert changed and (tmp_path / version / "config.json").exists()
    assert model_sync.sync(object_store, PREFIX, str(tmp_path), workers=4, part_size=0) == (False, version)


def test_fetch_secret_reads_each_clouds_secret_store(store: CloudStore, metadata: str, tmp_path: Path) -> None:
    out = tmp_path / "secrets.env"
    assert fetch_secret.main(secret_args(store, metadata, out, "API_KEY=api-key")) == 0
    assert out.read_text() == "API_KEY=sk-test-0123456789\n"
    assert [status for _, _, status in store.requests] == [200]


def test_the_stores_refuse_a_request_signed_with_another_key(store: CloudStore, metadata: str) -> None:
    """The stand-ins really check signatures: the end-to-end tests above prove the signers right."""
    wrong = Credentials(ACCESS_KEY, "not-the-secret-key", SESSION_TOKEN, bearer_token="not-the-token")
    object_store = ObjectStore(store.cloud, store.region, BUCKET, store.url, metadata, Retry(attempts=1))
    with pytest.raises(AccessError, match=r"HTTP 403 .*SignatureDoesNotMatch"):
        cloud_access.send(lambda: object_store.signed_get(PREFIX + "config.json", wrong), cloud_access.read_text)
    secrets = argparse.Namespace(endpoint=store.url, region=store.region, credentials=wrong,
                                 metadata_endpoint=metadata, retry=Retry(attempts=1))
    with pytest.raises(AccessError, match=r"HTTP 403 .*SignatureDoesNotMatch"):
        fetch_secret.READERS[store.cloud]("api-key", secrets)


@pytest.mark.parametrize("cloud", ["aws", "alibaba"])
def test_a_signature_scoped_to_another_region_is_refused(cloud: str, metadata: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    with cloud_store_server(cloud, "ap-northeast-1") as store:
        store.objects[f"{BUCKET}/{PREFIX}manifest.json"] = b"{}"
        args = sync_args(store, metadata, tmp_path)
        args[args.index("--region") + 1] = "eu-west-1"
        assert model_sync.main(args) == model_sync.EXIT_STORAGE
    assert "HTTP 403" in capsys.readouterr().err


#### Malformed answers ####


MALFORMED_REPLIES = [b"not json", b"\xff\xfe", b"[]", b"null", b'{"unexpected": {}}', b"[" * 100_000,
                     b'{"Parameter": [], "payload": 1, "SecretData": 2, "version": null}',
                     b'{"Parameter": {"Value": 1}, "payload": {"data": "!!not-base64"}, "SecretData": null, '
                     b'"version": {"secret_string": []}}',
                     b'{"payload": {"data": "c2stdGVzdA==!!"}}']  # base64 of "sk-test", then garbage


@pytest.mark.parametrize("reply", MALFORMED_REPLIES, ids=lambda r: repr(r[:20]))
def test_a_malformed_secret_store_answer_exits_4_with_a_message(
        store: CloudStore, metadata: str, tmp_path: Path, reply: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    store.secret_reply = reply
    out = tmp_path / "secrets.env"
    assert fetch_secret.main(secret_args(store, metadata, out, "API_KEY=api-key")) == 4
    assert f"secret: cannot read 'api-key' from the {store.cloud} secret store" in capsys.readouterr().err
    assert not out.exists()


#### Request shapes: Google Cloud Storage XML API, Secret Manager ####


def test_gcs_objects_are_read_from_the_xml_api_with_the_bearer_token() -> None:
    request = ObjectStore("gcp", "europe-west4", "models.example-bucket").signed_get(
        "m/a b/ü.bin", Credentials(bearer_token="ya29.token"), (0, 9))
    assert request.url == "https://storage.googleapis.com/models.example-bucket/m/a%20b/%C3%BC.bin"
    assert request.headers == {"Authorization": "Bearer ya29.token", "Range": "bytes=0-9"}


@pytest.mark.parametrize(("secret", "path"), [
    ("api-key", f"/v1/projects/{GCP_PROJECT}/secrets/api-key/versions/latest:access"),
    (f"projects/{GCP_PROJECT}/secrets/api-key", f"/v1/projects/{GCP_PROJECT}/secrets/api-key/versions/latest:access"),
    (f"projects/{GCP_PROJECT}/secrets/api-key/versions/latest",
     f"/v1/projects/{GCP_PROJECT}/secrets/api-key/versions/latest:access"),
])
def test_secret_manager_is_read_with_access_on_the_latest_version(metadata: str, tmp_path: Path, secret: str,
                                                                  path: str) -> None:
    with cloud_store_server("gcp", "europe-west4") as store:
        store.secrets["api-key"] = "v"
        assert fetch_secret.main(secret_args(store, metadata, tmp_path / "s.env", f"KEY={secret}")) == 0
    assert store.requests == [("GET", path, 200)]


#### Names that end up in a host name ####


VALID_BUCKETS = {
    "aws": ["abc", "my.models-1", "a" * 63],
    "gcp": ["abc", "my_models-1", "a" * 63, "models.example.com", ".".join(["a" * 50] * 4)],
    "alibaba": ["abc", "my-models-1", "a" * 63],
    "huawei": ["abc", "my.models-1", "a" * 63],
}
INVALID_BUCKETS = {
    "aws": ["ab", "a" * 64, "My-Models", "my_models", "-models", "models-", "my..models", "192.168.1.1",
            "u@attacker.example/x", "models\n"],
    "gcp": ["ab", "a" * 64, "My-Models", "_models", "models.", "10.0.0.1", "a" * 223 + ".b", "u@attacker.example/x"],
    "alibaba": ["ab", "a" * 64, "my.models", "my_models", "-models", "Models", "u@attacker.example/x"],
    "huawei": ["ab", "a" * 64, "my..models", "my.-models", "my-.models", "192.168.1.1", "Models",
               "u@attacker.example/x"],
}


@pytest.mark.parametrize(("cloud", "bucket"), [(c, b) for c, names in VALID_BUCKETS.items() for b in names])
def test_bucket_names_the_cloud_allows_are_accepted(cloud: str, bucket: str) -> None:
    assert ObjectStore(cloud, REGIONS[cloud], bucket).bucket == bucket


@pytest.mark.parametrize(("cloud", "bucket"), [(c, b) for c, names in INVALID_BUCKETS.items() for b in names])
def test_bucket_names_the_cloud_forbids_are_refused_naming_them(cloud: str, bucket: str) -> None:
    with pytest.raises(AccessError, match=re.escape(f"invalid bucket name {bucket!r}")):
        ObjectStore(cloud, REGIONS[cloud], bucket)


@pytest.mark.parametrize("region", ["us-east-1", "us-gov-west-1", "europe-west4", "cn-hangzhou", "ap-southeast-3",
                                    "northamerica-northeast1"])
def test_region_ids_of_all_four_clouds_are_accepted(region: str) -> None:
    assert ObjectStore("aws", region, "models").region == region


@pytest.mark.parametrize("region", ["us-east-1.attacker.example", "us-east-1/x", "US-EAST-1", "east", "a-b c",
                                    "us-east-1#"])
def test_a_region_that_is_not_a_region_id_is_refused(region: str) -> None:
    with pytest.raises(AccessError, match="invalid region name"):
        ObjectStore("alibaba", region, "models")


@given(bucket=st.text(alphabet=st.characters(codec="utf-8"), max_size=80),
       cloud=st.sampled_from(sorted(REGIONS)))
def test_any_accepted_bucket_yields_a_url_on_the_clouds_own_host(bucket: str, cloud: str) -> None:
    try:
        url = ObjectStore(cloud, REGIONS[cloud], bucket).url("models/x")
    except AccessError:
        return
    parts = urllib.parse.urlsplit(url)
    hosts = {"aws": f"{bucket}.s3.eu-west-1.amazonaws.com", "gcp": "storage.googleapis.com",
             "alibaba": f"{bucket}.oss-cn-hangzhou-internal.aliyuncs.com",
             "huawei": f"{bucket}.obs.ap-southeast-3.myhuaweicloud.com"}
    assert (parts.scheme, parts.netloc, parts.username, parts.port) == ("https", hosts[cloud], None, None)
    assert parts.path.endswith("/models/x") and not parts.query and not parts.fragment


@pytest.mark.parametrize("cloud", sorted(REGIONS))
@pytest.mark.parametrize("endpoint", [None, "http://127.0.0.1:9"])
def test_a_bucket_like_u_at_attacker_example_never_produces_a_request(
        cloud: str, endpoint: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    requests: list[str] = []
    monkeypatch.setattr(urllib.request, "urlopen", lambda request, **_: requests.append(request.full_url))
    args = ["--cloud", cloud, "--region", REGIONS[cloud], "--bucket", "u@attacker.example/x", "--prefix", "m/",
            "--root", str(tmp_path), "--name", "m", *(["--endpoint", endpoint] if endpoint else [])]
    assert model_sync.main(args) == 2
    assert requests == []
    assert "invalid bucket name 'u@attacker.example/x'" in capsys.readouterr().err


@pytest.mark.parametrize("cloud", sorted(REGIONS))
def test_fetch_secret_refuses_a_region_that_would_change_the_host(
        cloud: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    requests: list[str] = []
    monkeypatch.setattr(urllib.request, "urlopen", lambda request, **_: requests.append(request.full_url))
    args = ["--cloud", cloud, "--region", "attacker.example/x", "--secret", "KEY=api-key", "--out",
            str(tmp_path / "s.env")]
    assert fetch_secret.main(args) == 2
    assert requests == []
    assert "invalid region name 'attacker.example/x'" in capsys.readouterr().err
