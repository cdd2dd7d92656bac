"""Alibaba Cloud: pay-as-you-go prices from ECS DescribePrice, specs from ECS DescribeInstanceTypes
(alibabacloud_ecs20140526).

DescribePrice(ResourceType=instance, InstanceType, PriceUnit=Hour, Period=1) prices a whole instance
with its default system disk; the instance's own part is PriceInfo.Price.DetailInfos.DetailInfo with
Resource "instanceType". Its OriginalPrice (the list price) is recorded; its TradePrice (after this
account's discounts) goes to the notes. The currency is what the API returns: CNY for a China-site
(aliyun.com) account, USD for an International-site (alibabacloud.com) account.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from decimal import Decimal
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

SDK = Sdk(module="alibabacloud_ecs20140526.client", pip_package="alibabacloud-ecs20140526")
CREDENTIALS = ("ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET (and ALIBABA_CLOUD_SECURITY_TOKEN "
               "for STS tokens); the RAM identity needs ecs:DescribePrice and ecs:DescribeInstanceTypes")
ALL_TYPES_UNSUPPORTED: str | None = (
    "DescribePrice prices one named type per call, and listing what a region sells needs "
    "DescribeAvailableResource per zone, which this refresh does not call; add rows to instances.csv to "
    "price more types"
)

SPEC_BATCH = 10  # DescribeInstanceTypes takes 1 to 10 InstanceTypes per call (SDK request docs)
_AUTH_STATUS = {401, 403}
_AUTH_CODE_PREFIXES = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden", "NoPermission",
                       "InvalidSecurityToken")


def connect(region: str) -> Any:
    """An ECS client for the region, with the access key from the environment."""
    ecs = import_sdk("alibaba", SDK)
    openapi = import_sdk("alibaba", Sdk("alibabacloud_tea_openapi.utils_models", "alibabacloud-ecs20140526"))
    key_id, secret = os.environ.get("ALIBABA_CLOUD_ACCESS_KEY_ID"), os.environ.get("ALIBABA_CLOUD_ACCESS_KEY_SECRET")
    if not key_id or not secret:
        raise missing_credentials("Alibaba Cloud", CREDENTIALS)
    config = openapi.Config(access_key_id=key_id, access_key_secret=secret,
                            security_token=os.environ.get("ALIBABA_CLOUD_SECURITY_TOKEN"), region_id=region)
    return ecs.Client(config)


def fetch_prices(client: Any, region: str, instances: Sequence[InstanceSpec] | None) -> CloudPrices:
    """One DescribePrice per type; DescribeInstanceTypes in batches of ten for the spec check."""
    if instances is None:
        raise ValueError(f"Alibaba Cloud cannot refresh all types: {ALL_TYPES_UNSUPPORTED}")
    models = import_sdk("alibaba", Sdk("alibabacloud_ecs20140526.models", SDK.pip_package))
    result = CloudPrices()
    for instance in instances:
        quote_or_reason = _price(client, models, region, instance.instance_type)
        if isinstance(quote_or_reason, str):
            result.unpriced.append(Unpriced(instance.instance_type, quote_or_reason))
        else:
            result.quotes.append(quote_or_reason)
    api_specs = _instance_type_specs(client, models, [i.instance_type for i in instances])
    for instance in instances:
        if instance.instance_type in api_specs:
            result.mismatches.extend(spec_mismatches(instance, api_specs[instance.instance_type]))
    return result


def price_request(models: Any, region: str, instance_type: str) -> Any:
    return models.DescribePriceRequest(region_id=region, resource_type="instance", instance_type=instance_type,
                                       price_unit="Hour", period=1)


def _price(client: Any, models: Any, region: str, instance_type: str) -> PriceQuote | str:
    try:
        response = client.describe_price(price_request(models, region, instance_type))
    except Exception as error:
        return _refusal(error, "DescribePrice")
    price = response.body.price_info.price
    details = price.detail_infos.detail_info if price.detail_infos else []
    instance_part = next((d for d in details if d.resource == "instanceType"), None)
    if instance_part is None or not instance_part.original_price:
        return "DescribePrice returned no instanceType part with a price (DetailInfos)"
    original, trade = Decimal(str(instance_part.original_price)), Decimal(str(instance_part.trade_price or 0))
    notes = ("pay-as-you-go list price (OriginalPrice of the instanceType part), Linux; excludes system disk, "
             f"bandwidth and images; TradePrice for the querying account: {trade:f}")
    return PriceQuote(instance_type, price.currency, original,
                      f"Alibaba Cloud ECS DescribePrice ResourceType=instance PriceUnit=Hour {region}", notes)


def _instance_type_specs(client: Any, models: Any, instance_types: list[str]) -> dict[str, dict[str, Decimal | None]]:
    specs: dict[str, dict[str, Decimal | None]] = {}
    for start in range(0, len(instance_types), SPEC_BATCH):
        batch = instance_types[start:start + SPEC_BATCH]
        next_token = None
        while True:
            request = models.DescribeInstanceTypesRequest(instance_types=batch, next_token=next_token)
            try:
                response = client.describe_instance_types(request)
            except Exception as error:
                raise RefreshError(f"Alibaba Cloud ECS {_refusal(error, 'DescribeInstanceTypes')}") from None
            for item in response.body.instance_types.instance_type if response.body.instance_types else []:
                specs[item.instance_type_id] = {
                    "vcpus": _decimal(item.cpu_core_count), "memory_gib": _decimal(item.memory_size),
                    "gpu_count": _decimal(item.gpuamount)}
            next_token = response.body.next_token
            if not next_token:
                break
    return specs


def _decimal(value: float | int | None) -> Decimal | None:
    return None if value is None else Decimal(str(value))


def _refusal(error: Exception, operation: str) -> str:
    """What a failed call means. Credentials refused or the service failing stop the refresh (raise);
    any other client error (say, a type not sold in the region) refuses this one call (returned)."""
    exceptions = import_sdk("alibaba", Sdk("alibabacloud_tea_openapi.exceptions", SDK.pip_package))
    tea = import_sdk("alibaba", Sdk("Tea.exceptions", SDK.pip_package))
    if not isinstance(error, exceptions.AlibabaCloudException):
        if isinstance(error, tea.TeaException):  # transport failures (UnretryableException) included
            raise RefreshError(f"Alibaba Cloud ECS {operation} failed: {error}") from None
        raise error
    if error.status_code in _AUTH_STATUS or str(error.code).startswith(_AUTH_CODE_PREFIXES):
        raise missing_credentials("Alibaba Cloud", CREDENTIALS, f"{operation} answered {error.code}") from None
    if not isinstance(error, exceptions.ClientException):
        raise RefreshError(f"Alibaba Cloud ECS {operation} failed: {error.code}: {error.message}") from None
    return f"{operation} answered {error.code}: {error.message}"
