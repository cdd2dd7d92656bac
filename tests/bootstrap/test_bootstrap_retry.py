"""One retry loop (cloud_access.send) for metadata, object and secret requests: transient failures are retried
a bounded number of times, a response cut short is fetched again, and refusals (401/403, and the metadata
server's 404 before the role is attached) are retried only for a grace period, because a role created with the
server takes a minute or two to become usable. Backoffs and grace periods here are tiny: no test sleeps long."""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Iterator
from pathlib import Path

import cloud_access
import fetch_secret
import model_sync
import pytest
from bootstrap_fakes import ACCESS_KEY, SECRET_KEY, SESSION_TOKEN, CloudStore, cloud_store_server, make_model
from bootstrap_fakes import metadata_server as metadata_server_with
from cloud_access import AccessError, Credentials, ObjectStore, Retry

FAST = Retry(attempts=3, backoff_s=0.01)
BUCKET, PREFIX = "models-bucket", "models/m/"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CloudStore]:
    with cloud_store_server("aws", "us-east-1") as fake:
        fake.put_model(BUCKET, PREFIX, make_model(tmp_path / "model", {"weights.bin": 100_000}))
        fake.secrets["api-key"] = "sk-test"
        yield fake


@pytest.fixture
def metadata() -> Iterator[str]:
    with metadata_server_with() as url:
        yield url


def get_manifest(store: CloudStore, metadata: str, retry: Retry) -> bytes:
    object_store = ObjectStore("aws", "us-east-1", BUCKET, store.url, metadata, retry)
    credentials = cloud_access.CredentialSource("aws", metadata, retry)
    data: bytes = object_store.get(PREFIX + "manifest.json", credentials, lambda response: response.read())
    return data


def test_a_refused_request_is_retried_while_the_grace_period_lasts(
        store: CloudStore, metadata: str, capsys: pytest.CaptureFixture[str]) -> None:
    store.refuse_next = 3
    assert get_manifest(store, metadata, Retry(attempts=1, backoff_s=0.01, auth_grace_s=5)).startswith(b"{")
    assert [status for _, _, status in store.requests] == [403, 403, 403, 200]
    assert capsys.readouterr().err.count("HTTP 403 from 127.0.0.1") == 3


def test_without_a_grace_period_a_refusal_fails_at_once(store: CloudStore, metadata: str) -> None:
    store.refuse_next = 1
    with pytest.raises(AccessError, match=r"GET models-bucket/models/m/manifest.json failed: HTTP 403 .*AccessDenied"):
        get_manifest(store, metadata, FAST)
    assert len(store.requests) == 1


def test_refusals_that_outlast_the_grace_period_fail_soon_after_it(store: CloudStore, metadata: str) -> None:
    store.refuse_next = 10_000
    started = time.monotonic()
    with pytest.raises(AccessError, match="HTTP 403"):
        get_manifest(store, metadata, Retry(attempts=3, backoff_s=0.05, auth_grace_s=0.3))
    assert 0.3 <= time.monotonic() - started < 1.0
    assert 3 <= len(store.requests) <= 6  # backoff grows: 0.05, 0.1, 0.2 … capped at the period's end


def test_the_metadata_servers_404_before_the_role_is_attached_is_waited_out() -> None:
    with metadata_server_with(role_missing_for=2) as url:
        credentials = cloud_access.instance_credentials("aws", url, Retry(backoff_s=0.01, auth_grace_s=5))
    assert credentials == Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN)


def test_without_a_grace_period_the_missing_role_fails_naming_the_metadata_path() -> None:
    path = "/latest/meta-data/iam/security-credentials/"
    with metadata_server_with(role_missing_for=1) as url, \
            pytest.raises(AccessError, match=f"metadata GET {path} failed: HTTP 404"):
        cloud_access.instance_credentials("aws", url, FAST)


def test_transient_failures_are_retried_a_bounded_number_of_times(capsys: pytest.CaptureFixture[str]) -> None:
    url = "http://127.0.0.1:9/unreachable"  # the discard port: nothing listens
    with pytest.raises(AccessError, match="GET x failed after 3 attempts"):
        cloud_access.send(lambda: cloud_access.Request("GET", url, {}), cloud_access.read_text,
                          retry=Retry(attempts=3, backoff_s=0.01, auth_grace_s=60), what="GET x")
    assert capsys.readouterr().err.count("retry GET x: attempt") == 2


def test_a_stream_cut_short_is_fetched_again_by_the_same_retry_loop(
        store: CloudStore, metadata: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store.cut_next = 1
    args = ["--cloud", "aws", "--region", "us-east-1", "--bucket", BUCKET, "--prefix", PREFIX, "--root",
            str(tmp_path / "root"), "--name", "m", "--endpoint", store.url, "--metadata-endpoint", metadata,
            "--part-size-mib", "0", "--attempts", "3", "--backoff-s", "0.01"]
    assert model_sync.main(args) == 0
    err = capsys.readouterr().err
    assert "retry GET models-bucket/models/m/manifest.json: attempt 1 failed (IncompleteRead" in err
    assert [path for _, path, _ in store.requests].count(f"/{BUCKET}/{PREFIX}manifest.json") == 2
    store.cut_next = 3
    assert model_sync.main(args) == model_sync.EXIT_STORAGE


def test_a_server_that_ignores_the_range_cannot_write_past_the_part(
        store: CloudStore, metadata: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store.ignore_ranges = True
    monkeypatch.setattr(model_sync, "MIB", 16 * 1024)  # --part-size-mib 1 then means 16 KiB ranges
    args = ["--cloud", "aws", "--region", "us-east-1", "--bucket", BUCKET, "--prefix", PREFIX, "--root",
            str(tmp_path), "--name", "m", "--endpoint", store.url, "--metadata-endpoint", metadata,
            "--part-size-mib", "1", "--attempts", "2", "--backoff-s", "0.01"]
    assert model_sync.main(args) == model_sync.EXIT_STORAGE
    assert not (tmp_path / "models" / "m" / "current").exists()


def test_model_sync_waits_for_a_new_role_by_default(store: CloudStore, metadata: str, tmp_path: Path) -> None:
    store.refuse_next = 2
    args = ["--cloud", "aws", "--region", "us-east-1", "--bucket", BUCKET, "--prefix", PREFIX, "--root",
            str(tmp_path), "--name", "m", "--endpoint", store.url, "--metadata-endpoint", metadata,
            "--backoff-s", "0.01"]
    assert model_sync.main(args) == 0


def test_fetch_secret_waits_for_a_new_role_within_its_grace_period(
        store: CloudStore, metadata: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetch_secret, "Retry", functools.partial(Retry, backoff_s=0.01))  # not a second's wait
    out = tmp_path / "s.env"
    args = ["--cloud", "aws", "--region", "us-east-1", "--secret", "KEY=api-key", "--out", str(out),
            "--endpoint", store.url, "--metadata-endpoint", metadata]
    store.refuse_next = 1
    assert fetch_secret.main([*args, "--auth-grace-s", "0"]) == 4
    store.refuse_next = 1
    assert fetch_secret.main([*args, "--auth-grace-s", "5"]) == 0
    assert out.read_text() == "KEY=sk-test\n"


@pytest.mark.parametrize("program", [model_sync, fetch_secret], ids=["model_sync", "fetch_secret"])
def test_the_boot_programs_retry_refusals_for_a_few_minutes_by_default(program: object,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    parsers: list[argparse.ArgumentParser] = []

    def capture(self: argparse.ArgumentParser, *_: object) -> None:
        parsers.append(self)
        raise SystemExit(0)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    with pytest.raises(SystemExit):
        program.main([])  # type: ignore[attr-defined]
    (grace_s,) = [action.default for action in parsers[0]._actions if action.dest == "auth_grace_s"]
    assert 120 <= grace_s <= 600
