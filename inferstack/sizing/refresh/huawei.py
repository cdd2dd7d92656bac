"""Huawei Cloud: pay-per-use prices from BSS ListOnDemandResourceRatings (huaweicloudsdkbss, v2).

One inquiry per flavor: cloud_service_type hws.service.type.ec2, resource_type hws.resource.type.vm,
resource_spec "<flavor>.linux", usage_factor Duration, usage_measure_id 4 (hour), usage_value 1. One per
flavor because the API rejects a whole inquiry when any product in it is unknown. The recorded price is
official_website_amount (the list price); amount (after this account's discounts) goes to the notes. The
currency is the response's `currency`; the API documents an empty one as CNY.

BSS is a global service on the China site's endpoint (region cn-north-1, bss.myhuaweicloud.com); an
International-site account is served by the separate huaweicloudsdkbssintl package, which this module does
not use. No specs come back, so nothing is checked against instances.csv.
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
)

SDK = Sdk(module="huaweicloudsdkbss.v2", pip_package="huaweicloudsdkbss")
CREDENTIALS = ("HUAWEICLOUD_SDK_AK and HUAWEICLOUD_SDK_SK (the access key), and HUAWEICLOUD_SDK_PROJECT_ID "
               "(the project ID of the region being priced); optionally HUAWEICLOUD_SDK_DOMAIN_ID (the account "
               "ID, saves an IAM lookup); the IAM user needs BSS read access")
ALL_TYPES_UNSUPPORTED: str | None = (
    "ListOnDemandResourceRatings prices named flavors only, and listing flavors needs the ECS API, which "
    "this refresh does not call; add rows to instances.csv to price more flavors"
)

BSS_REGION = "cn-north-1"  # the only region huaweicloudsdkbss knows (BssRegion): bss.myhuaweicloud.com
USAGE_MEASURE_HOUR = 4
_AUTH_STATUS = {401, 403}


def connect(region: str) -> Any:
    """A BSS client with the access key from the environment; the project ID travels with the client."""
    bss = import_sdk("huawei", SDK)
    auth = import_sdk("huawei", Sdk("huaweicloudsdkcore.auth.credentials", SDK.pip_package))
    bss_region = import_sdk("huawei", Sdk("huaweicloudsdkbss.v2.region.bss_region", SDK.pip_package))
    ak, sk = os.environ.get("HUAWEICLOUD_SDK_AK"), os.environ.get("HUAWEICLOUD_SDK_SK")
    project_id = os.environ.get("HUAWEICLOUD_SDK_PROJECT_ID")
    if not ak or not sk or not project_id:
        raise missing_credentials("Huawei Cloud", CREDENTIALS)
    # Without HUAWEICLOUD_SDK_DOMAIN_ID, build() asks IAM for the account's domain ID: a network call.
    credentials = auth.GlobalCredentials(ak, sk, os.environ.get("HUAWEICLOUD_SDK_DOMAIN_ID") or None)
    try:
        client = (bss.BssClient.new_builder().with_credentials(credentials)
                  .with_region(bss_region.BssRegion.value_of(BSS_REGION)).build())
    except Exception as error:
        raise RefreshError(f"Huawei Cloud BSS client setup failed: {_refusal(error)}") from None
    return ProjectBssClient(client, project_id)


class ProjectBssClient:
    """A BSS client and the project ID that every inquiry names."""

    def __init__(self, client: Any, project_id: str):
        self.client = client
        self.project_id = project_id


def fetch_prices(client: ProjectBssClient, region: str, instances: Sequence[InstanceSpec] | None) -> CloudPrices:
    """One ListOnDemandResourceRatings inquiry per flavor."""
    if instances is None:
        raise ValueError(f"Huawei Cloud cannot refresh all types: {ALL_TYPES_UNSUPPORTED}")
    result = CloudPrices()
    for instance in instances:
        quote_or_reason = _price(client, region, instance.instance_type)
        if isinstance(quote_or_reason, str):
            result.unpriced.append(Unpriced(instance.instance_type, quote_or_reason))
        else:
            result.quotes.append(quote_or_reason)
    return result


def rating_request(project_id: str, region: str, flavor: str) -> Any:
    bss = import_sdk("huawei", SDK)
    product = bss.DemandProductInfo(
        id="1", cloud_service_type="hws.service.type.ec2", resource_type="hws.resource.type.vm",
        resource_spec=f"{flavor}.linux", region=region, usage_factor="Duration", usage_value=1,
        usage_measure_id=USAGE_MEASURE_HOUR, subscription_num=1)
    return bss.ListOnDemandResourceRatingsRequest(body=bss.RateOnDemandReq(project_id=project_id,
                                                                           product_infos=[product]))


def _price(client: ProjectBssClient, region: str, flavor: str) -> PriceQuote | str:
    try:
        response = client.client.list_on_demand_resource_ratings(rating_request(client.project_id, region, flavor))
    except Exception as error:
        return _refusal(error)
    results = response.product_rating_results or []
    if len(results) != 1 or not results[0].official_website_amount:
        return f"ListOnDemandResourceRatings returned {len(results)} rating(s) without an official_website_amount"
    rating = results[0]
    currency = response.currency or "CNY"  # the API documents an empty currency as CNY
    notes = ("pay-per-use list price (official_website_amount), Linux; amount for the querying account: "
             f"{Decimal(str(rating.amount or 0)):f}")
    if not response.currency:
        notes += "; currency came back empty, which the API documents as CNY"
    return PriceQuote(flavor, currency, Decimal(str(rating.official_website_amount)),
                      f"Huawei Cloud BSS ListOnDemandResourceRatings hws.resource.type.vm {region}", notes)


def _refusal(error: Exception) -> str:
    """Credentials refused or the service failing stop the refresh (raise); any other client error (an
    unknown flavor, say) refuses this one flavor (returned)."""
    exceptions = import_sdk("huawei", Sdk("huaweicloudsdkcore.exceptions.exceptions", SDK.pip_package))
    if isinstance(error, exceptions.ClientRequestException):
        if error.status_code in _AUTH_STATUS:
            raise missing_credentials("Huawei Cloud", CREDENTIALS, f"BSS answered {error.error_code}") from None
        return f"ListOnDemandResourceRatings answered {error.error_code}: {error.error_msg}"
    if isinstance(error, exceptions.SdkException):
        raise RefreshError(f"Huawei Cloud BSS ListOnDemandResourceRatings failed: {error}") from None
    raise error
