"""connect(): each cloud's SDK client, built from environment credentials, aimed at the right endpoint.

These build real SDK clients; none of them sends a request.
"""

from __future__ import annotations

import pytest

from inferstack.sizing.refresh import alibaba, aws, gcp, huawei


def test_aws_uses_the_price_list_endpoint_region_whatever_region_is_priced(monkeypatch):
    pytest.importorskip("boto3")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")

    client = aws.connect("eu-west-1")

    assert (client.meta.service_model.service_name, client.meta.region_name) == ("pricing", "us-east-1")


def test_gcp_builds_a_catalog_client_with_application_default_credentials(monkeypatch):
    pytest.importorskip("google.cloud.billing_v1")
    import google.auth
    from google.auth.credentials import AnonymousCredentials

    monkeypatch.setattr(google.auth, "default", lambda: (AnonymousCredentials(), None))

    client = gcp.connect("us-central1")

    assert type(client).__name__ == "CloudCatalogClient"
    assert client.api_endpoint == "cloudbilling.googleapis.com"


@pytest.mark.parametrize(("region", "endpoint"), [
    ("ap-southeast-1", "ecs.ap-southeast-1.aliyuncs.com"), ("cn-hangzhou", "ecs-cn-hangzhou.aliyuncs.com")])
def test_alibaba_builds_a_regional_ecs_client(monkeypatch, region, endpoint):
    pytest.importorskip("alibabacloud_ecs20140526")
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", "test-key-id")
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "test-secret")

    client = alibaba.connect(region)

    assert client._endpoint == endpoint


def test_huawei_builds_a_bss_client_on_the_china_site_endpoint_with_the_project_id(monkeypatch):
    pytest.importorskip("huaweicloudsdkbss")
    environment = {"HUAWEICLOUD_SDK_AK": "test-ak", "HUAWEICLOUD_SDK_SK": "test-sk",
                   "HUAWEICLOUD_SDK_PROJECT_ID": "test-project",
                   "HUAWEICLOUD_SDK_DOMAIN_ID": "test-domain"}  # a domain ID spares the IAM lookup of build()
    for name, value in environment.items():
        monkeypatch.setenv(name, value)

    client = huawei.connect("ap-southeast-3")

    assert client.project_id == "test-project"
    assert client.client._endpoints == ["https://bss.myhuaweicloud.com"]
