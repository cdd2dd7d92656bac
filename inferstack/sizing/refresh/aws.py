"""AWS: on-demand Linux prices (and vCPU/memory/GPU specs) from the AWS Price List Query API, boto3's
`pricing` client, operation get_products on service AmazonEC2.

The API is served from us-east-1 and ap-south-1 only (boto3 pricing docs, "Service Endpoint"); the region
being priced is a filter (regionCode), not the endpoint. Each product in `PriceList` is a JSON string:
product.attributes (instanceType, vcpu, memory, gpu, ...) and terms.OnDemand.*.priceDimensions.*
(unit "Hrs", pricePerUnit.USD).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal, InvalidOperation
from typing import Any

from inferstack.sizing.refresh.common import (
    CloudPrices,
    InstanceSpec,
    PriceQuote,
    RefreshError,
    Sdk,
    Unpriced,
    import_sdk,
    missing_credentials,
    spec_mismatches,
)

SDK = Sdk(module="boto3", pip_package="boto3")
CREDENTIALS = ("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary keys), "
               "or AWS_PROFILE naming a profile in ~/.aws; the identity needs pricing:GetProducts")
ALL_TYPES_UNSUPPORTED: str | None = None

PRICING_ENDPOINT_REGION = "us-east-1"
SERVICE_CODE = "AmazonEC2"
# Linux, shared tenancy, no pre-installed software (SQL etc.), capacity in use (not reservation lines).
FIXED_FILTERS = {"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}
PAGE_SIZE = 100  # the largest MaxResults the service model allows (GetProductsMaxResults)
NOTES = "on-demand list price, Linux, shared tenancy"
_AUTH_ERROR_CODES = {"AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException",
                     "ExpiredTokenException", "InvalidClientTokenId"}


def connect(region: str) -> Any:
    """A `pricing` client on the Price List endpoint, with the credentials boto3 finds."""
    boto3 = import_sdk("aws", SDK)
    session = boto3.session.Session()
    if session.get_credentials() is None:
        raise missing_credentials("AWS", CREDENTIALS)
    return session.client("pricing", region_name=PRICING_ENDPOINT_REGION)


def fetch_prices(client: Any, region: str, instances: Sequence[InstanceSpec] | None) -> CloudPrices:
    """Prices for the given instance types (one filtered query each), or for every type sold in the region."""
    result = CloudPrices()
    if instances is None:
        by_type: dict[str, list[dict[str, Any]]] = {}
        for product in _products(client, region, instance_type=None):
            by_type.setdefault(product["product"]["attributes"].get("instanceType", ""), []).append(product)
        for instance_type in sorted(t for t in by_type if t):
            _price_one(result, region, instance_type, by_type[instance_type], catalog=None)
        return result
    for instance in instances:
        products = list(_products(client, region, instance.instance_type))
        _price_one(result, region, instance.instance_type, products, catalog=instance)
    return result


def filters(region: str, instance_type: str | None) -> list[dict[str, str]]:
    """The get_products filters for one region (and one type, unless every type is wanted)."""
    fields = {"regionCode": region, **FIXED_FILTERS}
    if instance_type is not None:
        fields["instanceType"] = instance_type
    return [{"Type": "TERM_MATCH", "Field": name, "Value": value} for name, value in fields.items()]


def _products(client: Any, region: str, instance_type: str | None) -> Iterator[dict[str, Any]]:
    paginator = client.get_paginator("get_products")
    pages = paginator.paginate(ServiceCode=SERVICE_CODE, Filters=filters(region, instance_type),
                               FormatVersion="aws_v1", PaginationConfig={"PageSize": PAGE_SIZE})
    with _api_errors():
        for page in pages:
            for item in page.get("PriceList", []):
                yield json.loads(item) if isinstance(item, str) else item


def _price_one(result: CloudPrices, region: str, instance_type: str, products: list[dict[str, Any]],
               catalog: InstanceSpec | None) -> None:
    prices = {price for product in products for price in _hourly_usd_prices(product)}
    if len(prices) == 1 and next(iter(prices)) > 0:
        result.quotes.append(PriceQuote(instance_type, "USD", prices.pop(),
                                        f"AWS Price List API get_products {SERVICE_CODE} {region}", NOTES))
    elif not prices or prices == {Decimal(0)}:
        result.unpriced.append(Unpriced(instance_type, f"no on-demand hourly USD price for Linux, shared tenancy "
                                                       f"in {region} ({len(products)} product(s) matched)"))
    else:
        listed = ", ".join(str(p) for p in sorted(prices))
        result.unpriced.append(Unpriced(instance_type, f"ambiguous: {len(prices)} different hourly prices ({listed}) "
                                                       "match the filters; none was chosen"))
    if catalog is not None and products:
        result.mismatches.extend(spec_mismatches(catalog, _api_specs(products[0]["product"]["attributes"])))


def _hourly_usd_prices(product: dict[str, Any]) -> list[Decimal]:
    return [Decimal(dimension["pricePerUnit"]["USD"])
            for term in product.get("terms", {}).get("OnDemand", {}).values()
            for dimension in term.get("priceDimensions", {}).values()
            if dimension.get("unit") == "Hrs" and "USD" in dimension.get("pricePerUnit", {})]


def _api_specs(attributes: dict[str, str]) -> dict[str, Decimal | None]:
    return {"vcpus": _number(attributes.get("vcpu", "")),
            "memory_gib": _number(re.sub(r"\s*GiB$", "", attributes.get("memory", ""))),
            "gpu_count": _number(attributes.get("gpu", ""))}


def _number(text: str) -> Decimal | None:
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None  # "NA" or absent: the API does not state it


@contextmanager
def _api_errors() -> Iterator[None]:
    """Turn botocore's errors into ones that say what to do."""
    botocore_exceptions = import_sdk("aws", Sdk("botocore.exceptions", "boto3"))
    try:
        yield
    except botocore_exceptions.NoCredentialsError:
        raise missing_credentials("AWS", CREDENTIALS) from None
    except botocore_exceptions.ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        if code in _AUTH_ERROR_CODES:
            raise missing_credentials("AWS", CREDENTIALS, f"the Price List API answered {code}") from None
        raise RefreshError(f"AWS Price List API get_products failed: {error}") from None
    except botocore_exceptions.BotoCoreError as error:
        raise RefreshError(f"AWS Price List API get_products failed: {error}") from None
