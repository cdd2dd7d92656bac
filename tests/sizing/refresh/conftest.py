"""Fixtures for the price-refresh tests: a small catalog on disk and, per cloud, a client that replays
the responses under recorded/ (values there are test data, not prices) and remembers each request.

Each stub returns the SDK's own response objects, built from the recorded JSON by the SDK's own
deserializer (botocore Stubber for AWS, proto-plus from_json for GCP, Tea from_map for Alibaba, the
Huawei SDK's model deserializer), so a field misnamed in a recording breaks the test.
"""

from __future__ import annotations

import csv
import decimal
import json
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from inferstack.sizing.refresh import RefreshResult, refresh_prices

RECORDED = Path(__file__).parent / "recorded"

INSTANCE_COLUMNS = ["cloud", "region", "instance_type", "family", "vcpus", "memory_gib", "gpu_model", "gpu_count",
                    "gpu_memory_gib_each", "local_nvme_gb", "network_gbps", "spec_source", "spec_date", "notes"]
TEST_INSTANCES = [
    # cloud, region, type, family, vcpus, memory_gib, gpu_model, gpu_count, gpu GiB each, local nvme
    ("aws", "us-east-1", "c7i.large", "c7i", "2", "4", "", "0", "", "0"),
    ("aws", "us-east-1", "g5.xlarge", "g5", "4", "16.0", "A10G", "1", "24.0", "250"),
    ("aws", "us-east-1", "m7i.large", "m7i", "2", "8", "", "0", "", "0"),
    ("aws", "us-east-1", "p5e.48xlarge", "p5e", "192", "2048.0", "H200", "8", "141.0", "30720"),
    ("aws", "us-east-1", "r7i.2xlarge", "r7i", "8", "60", "", "0", "", "0"),  # API says 64 GiB: a mismatch
    ("gcp", "us-central1", "n2-standard-2", "n2-standard", "2", "8", "", "0", "", "0"),
    ("gcp", "us-central1", "g2-standard-4", "g2-standard", "4", "16", "L4", "1", "24", ""),
    ("gcp", "us-central1", "a2-ultragpu-1g", "a2-ultragpu", "12", "170", "A100", "1", "80", "375"),
    ("gcp", "us-central1", "a3-ultragpu-8g", "a3-ultragpu", "224", "2952", "H200", "8", "141", ""),
    ("gcp", "us-central1", "c3-standard-4", "c3-standard", "4", "16", "", "0", "", "0"),
    ("alibaba", "ap-southeast-1", "ecs.g7.large", "g7", "2", "8", "", "0", "", "0"),
    ("alibaba", "ap-southeast-1", "ecs.gn7i-c8g1.2xlarge", "gn7i", "8", "30", "A10", "1", "24", "0"),  # API: 2 GPUs
    ("alibaba", "ap-southeast-1", "ecs.gn8v.4xlarge", "gn8v", "16", "96", "unnamed-96GB-HBM3", "1", "96", "0"),
    ("huawei", "ap-southeast-3", "c7.large.2", "c7", "2", "4", "", "0", "", "0"),
    ("huawei", "ap-southeast-3", "pi2.2xlarge.4", "pi2", "8", "32", "T4", "1", "16", "0"),
    ("huawei", "ap-southeast-3", "p3.2xlarge.8", "p3", "8", "64", "A100", "1", "80", ""),
]
PRICE_COLUMNS = ["cloud", "region", "instance_type", "currency", "price_per_hour", "source", "source_date", "notes"]
TEST_PRICES = [
    ("aws", "us-east-1", "c7i.large", "USD", "0.08925", "earlier-source", "2025-01-01", "earlier row"),
    ("aws", "us-east-1", "p5e.48xlarge", "USD", "99", "earlier-source", "2025-01-01", "priced before, not now"),
    ("aws", "us-west-2", "c7i.large", "USD", "0.09", "earlier-source", "2025-01-01", "another region"),
    ("gcp", "us-central1", "n2-standard-2", "USD", "0.09", "earlier-source", "2025-01-01", "earlier row"),
    ("gcp", "us-central1", "c3-standard-4", "USD", "0.2", "earlier-source", "2025-01-01", "priced before, not now"),
    ("alibaba", "ap-southeast-1", "ecs.g7.large", "CNY", "0.5", "earlier-source", "2024-12-30", "China-site list"),
    ("alibaba", "cn-hangzhou", "ecs.g7.large", "CNY", "0.4", "earlier-source", "2024-12-30", "another region"),
    ("alibaba", "cn-hangzhou", "ecs.r7.8xlarge", "CNY", "8", "earlier-source", "2024-12-30", "not in instances.csv"),
    ("huawei", "cn-north-4", "c7.large.2", "CNY", "0.3", "earlier-source", "2025-01-01", "another region"),
]


@dataclass
class Catalog:
    instances: Path
    prices: Path

    def price_rows(self) -> list[dict[str, str]]:
        with self.prices.open(newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))

    def rows_of(self, cloud: str) -> list[dict[str, str]]:
        return [row for row in self.price_rows() if row["cloud"] == cloud]

    def lines_not_of(self, cloud: str) -> list[str]:
        """The file's lines for every other cloud, exactly as written."""
        return [line for line in self.prices.read_text(encoding="utf-8").splitlines()[1:]
                if not line.startswith(f"{cloud},")]


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    instances, prices = tmp_path / "instances.csv", tmp_path / "prices.csv"
    _write(instances, INSTANCE_COLUMNS, [(*row, "", "test", "unknown", "test row") for row in TEST_INSTANCES])
    _write(prices, PRICE_COLUMNS, TEST_PRICES)
    return Catalog(instances, prices)


@pytest.fixture
def refresh(catalog: Catalog) -> Any:
    """refresh_prices on the test catalog, as of 2026-11-30, with a stub client."""

    def run(cloud: str, client: Any, **options: Any) -> RefreshResult:
        return refresh_prices(cloud, output=catalog.prices, instances_csv=catalog.instances, client=client,
                              today=date(2026, 11, 30), **options)

    return run


def _write(path: Path, header: list[str], rows: list[tuple[str, ...]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def recorded(name: str) -> Any:
    return json.loads((RECORDED / name).read_text(encoding="utf-8"))


@pytest.fixture(name="recorded")
def recorded_fixture() -> Any:
    """Load a recorded response by its path under recorded/."""
    return recorded


# --------------------------------------------------------------------------------------------- AWS
@pytest.fixture
def aws_pricing() -> Any:
    """A real boto3 `pricing` client behind botocore's Stubber: queue responses, then assert all were used."""
    boto3 = pytest.importorskip("boto3")
    from botocore.stub import Stubber

    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


# --------------------------------------------------------------------------------------------- GCP
class RecordedCatalogClient:
    """Stands in for CloudCatalogClient: list_skus returns the SDK's real pager over recorded pages."""

    def __init__(self, pages: list[str]):
        billing = pytest.importorskip("google.cloud.billing_v1")
        self._billing = billing
        self._pages = [billing.ListSkusResponse.from_json((RECORDED / p).read_text(), ignore_unknown_fields=False)
                       for p in pages]
        self.requests: list[Any] = []

    def list_skus(self, request: Any) -> Any:
        from google.cloud.billing_v1.services.cloud_catalog import pagers

        return pagers.ListSkusPager(method=self._next_page, request=request, response=self._next_page(request))

    def _next_page(self, request: Any, **_options: Any) -> Any:
        self.requests.append({"parent": request.parent, "page_token": request.page_token})
        return self._pages[len(self.requests) - 1]


@pytest.fixture
def gcp_catalog_client() -> RecordedCatalogClient:
    return RecordedCatalogClient(["gcp/list_skus_page_1.json", "gcp/list_skus_page_2.json"])


# ----------------------------------------------------------------------------------------- Alibaba
@dataclass
class RecordedEcsClient:
    """Stands in for alibabacloud_ecs20140526.client.Client; errors are raised as the SDK raises them."""

    price_files: dict[str, str]
    types_file: str = "alibaba/describe_instance_types.json"
    requests: list[dict[str, Any]] = field(default_factory=list)

    def describe_price(self, request: Any) -> Any:
        from alibabacloud_ecs20140526 import models
        from alibabacloud_tea_openapi import exceptions

        self.requests.append({"operation": "DescribePrice", **request.to_map()})
        body = recorded(self.price_files[request.instance_type])
        if "Code" in body:
            raise exceptions.ClientException(status_code=404, code=body["Code"], message=body["Message"],
                                             request_id=body["RequestId"], data=body)
        return models.DescribePriceResponse().from_map({"headers": {}, "statusCode": 200, "body": body})

    def describe_instance_types(self, request: Any) -> Any:
        from alibabacloud_ecs20140526 import models

        self.requests.append({"operation": "DescribeInstanceTypes", **request.to_map()})
        body = recorded(self.types_file)
        wanted = set(request.instance_types)
        body["InstanceTypes"]["InstanceType"] = [t for t in body["InstanceTypes"]["InstanceType"]
                                                 if t["InstanceTypeId"] in wanted]
        return models.DescribeInstanceTypesResponse().from_map({"headers": {}, "statusCode": 200, "body": body})


@pytest.fixture
def ecs_client() -> RecordedEcsClient:
    pytest.importorskip("alibabacloud_ecs20140526")
    return RecordedEcsClient({
        "ecs.g7.large": "alibaba/describe_price_ecs.g7.large.json",
        "ecs.gn7i-c8g1.2xlarge": "alibaba/describe_price_ecs.gn7i-c8g1.2xlarge.json",
        "ecs.gn8v.4xlarge": "alibaba/describe_price_error_ecs.gn8v.4xlarge.json",
    })


# ------------------------------------------------------------------------------------------ Huawei
@dataclass
class RecordedBssClient:
    """Stands in for huaweicloudsdkbss.v2.BssClient; responses go through the SDK's model deserializer."""

    files: dict[str, str]
    requests: list[dict[str, Any]] = field(default_factory=list)

    def list_on_demand_resource_ratings(self, request: Any) -> Any:
        from huaweicloudsdkbss.v2 import BssClient
        from huaweicloudsdkcore.exceptions.exceptions import ClientRequestException, SdkError

        body = request.body.to_dict()
        self.requests.append(body)
        flavor = body["product_infos"][0]["resource_spec"].removesuffix(".linux")
        data = json.loads((RECORDED / self.files[flavor]).read_text(), parse_float=decimal.Decimal)
        if "error_code" in data:
            raise ClientRequestException(400, SdkError("test-request-id", data["error_code"], data["error_msg"]))
        return BssClient()._deserialize(data, "ListOnDemandResourceRatingsResponse")


@pytest.fixture
def bss_client() -> Any:
    pytest.importorskip("huaweicloudsdkbss")
    from inferstack.sizing.refresh.huawei import ProjectBssClient

    stub = RecordedBssClient({
        "c7.large.2": "huawei/list_on_demand_resource_ratings_c7.large.2.json",
        "pi2.2xlarge.4": "huawei/list_on_demand_resource_ratings_pi2.2xlarge.4.json",
        "p3.2xlarge.8": "huawei/list_on_demand_resource_ratings_error_p3.2xlarge.8.json",
    })
    return ProjectBssClient(stub, "test-project-id")
