"""Errors before any price is asked for: unknown cloud, missing SDK, missing credentials, bad files."""

from __future__ import annotations

import sys

import pytest

from inferstack.errors import InputError
from inferstack.sizing.refresh import refresh_prices

SDK_MODULES = [
    ("aws", "boto3", "boto3"),
    ("gcp", "google.cloud.billing_v1", "google-cloud-billing"),
    ("alibaba", "alibabacloud_ecs20140526.client", "alibabacloud-ecs20140526"),
    ("huawei", "huaweicloudsdkbss.v2", "huaweicloudsdkbss"),
]


class NeverCalled:
    def __getattr__(self, name):
        raise AssertionError(f"the API was called ({name}) although the refresh should have stopped first")


def test_an_unknown_cloud_names_the_known_ones(catalog):
    with pytest.raises(InputError, match=r"--cloud: is not a cloud this refresh knows \(got 'azure'\)\. "
                                         r"Fix: use one of: aws, gcp, alibaba, huawei"):
        refresh_prices("azure", output=catalog.prices, instances_csv=catalog.instances)


@pytest.mark.parametrize(("cloud", "module", "package"), SDK_MODULES)
def test_a_missing_sdk_names_the_pip_package(catalog, monkeypatch, cloud, module, package):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    before = catalog.prices.read_bytes()

    with pytest.raises(InputError) as raised:
        refresh_prices(cloud, output=catalog.prices, instances_csv=catalog.instances)

    assert f"needs the Python package '{package}'" in str(raised.value)
    assert f"pip install {package}" in str(raised.value)
    assert catalog.prices.read_bytes() == before


@pytest.fixture
def no_cloud_credentials(monkeypatch, tmp_path):
    """An environment where no SDK can find credentials, and none tries the network to look."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "GOOGLE_APPLICATION_CREDENTIALS", "ALIBABA_CLOUD_ACCESS_KEY_ID",
                 "ALIBABA_CLOUD_ACCESS_KEY_SECRET", "HUAWEICLOUD_SDK_AK", "HUAWEICLOUD_SDK_SK",
                 "HUAWEICLOUD_SDK_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "absent-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "absent-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "absent-gcloud"))
    try:
        from google.auth.compute_engine import _metadata
    except ImportError:
        return
    monkeypatch.setattr(_metadata, "_NO_GCE_CHECK", True)  # NO_GCE_CHECK is read once, at import


@pytest.mark.parametrize(("cloud", "variable"), [
    ("aws", "AWS_ACCESS_KEY_ID"), ("gcp", "GOOGLE_APPLICATION_CREDENTIALS"),
    ("alibaba", "ALIBABA_CLOUD_ACCESS_KEY_ID"), ("huawei", "HUAWEICLOUD_SDK_AK")])
def test_missing_credentials_name_the_environment_variables(catalog, no_cloud_credentials, cloud, variable):
    pytest.importorskip(dict((c, m) for c, m, _ in SDK_MODULES)[cloud])
    before = catalog.prices.read_bytes()

    with pytest.raises(InputError, match=r"credentials: no usable .* credentials") as raised:
        refresh_prices(cloud, output=catalog.prices, instances_csv=catalog.instances)

    assert variable in str(raised.value)
    assert catalog.prices.read_bytes() == before


def test_huawei_also_needs_the_project_id(catalog, no_cloud_credentials, monkeypatch):
    pytest.importorskip("huaweicloudsdkbss.v2")
    monkeypatch.setenv("HUAWEICLOUD_SDK_AK", "test-ak")
    monkeypatch.setenv("HUAWEICLOUD_SDK_SK", "test-sk")

    with pytest.raises(InputError, match="HUAWEICLOUD_SDK_PROJECT_ID"):
        refresh_prices("huawei", output=catalog.prices, instances_csv=catalog.instances)


@pytest.mark.parametrize("cloud", ["alibaba", "huawei"])
def test_all_types_is_refused_where_the_api_cannot_list_types(catalog, cloud):
    with pytest.raises(InputError, match=f"--all-types: is not available for {cloud}"):
        refresh_prices(cloud, output=catalog.prices, instances_csv=catalog.instances, all_types=True,
                       client=NeverCalled())


def test_an_output_that_is_not_a_prices_csv_fails_before_any_api_call(catalog, tmp_path):
    wrong = tmp_path / "not-prices.csv"
    wrong.write_text("name,value\nx,1\n", encoding="utf-8")

    with pytest.raises(InputError, match="is not a prices CSV"):
        refresh_prices("aws", output=wrong, instances_csv=catalog.instances, client=NeverCalled())


def test_a_missing_instances_csv_is_named(catalog, tmp_path):
    with pytest.raises(InputError, match=r"absent\.csv: does not exist"):
        refresh_prices("aws", output=catalog.prices, instances_csv=tmp_path / "absent.csv", client=NeverCalled())
