"""How a plan's servers start (workload `startup`): the image they boot, and the stopped servers an AWS fleet keeps
for scale-out, with what those cost. The cold start and the warm start these give are sizing/coldstart.py's."""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path
from typing import NamedTuple

from inferstack.clouds import CLOUD_FACTS, Cloud
from inferstack.plan import ColdStart, Fleet, Money, ServerStartup, SpotAboveFloor, WarmPool
from inferstack.runtimes import RUNTIME_FACTS
from inferstack.sizing.catalog import ExchangeRates
from inferstack.spec import Startup

STORAGE_PRICES = Path(__file__).parent / "data" / "storage_prices.csv"
"""Block storage list prices per GB-month, per cloud and region, with their sources (one row today: AWS us-east-1
gp3)."""


class StoragePrice(NamedTuple):
    per_gb_month: float
    currency: str
    source: str
    source_date: str


@cache
def storage_prices() -> dict[tuple[str, str, str], StoragePrice]:
    with STORAGE_PRICES.open(newline="") as handle:
        return {(row["cloud"], row["region"], row["disk"]): StoragePrice(float(row["price_per_gb_month"]),
                                                                        row["currency"], row["source"],
                                                                        row["source_date"])
                for row in csv.DictReader(handle)}


def server_image(startup: Startup, cloud: Cloud) -> tuple[ServerStartup, list[str]]:
    """The image the plan's servers boot on `cloud`, and a note where the workload's choice does not apply there."""
    facts = CLOUD_FACTS[cloud]
    if isinstance(startup.image, dict):
        if cloud in startup.image:
            return ServerStartup(image="brought", image_id=startup.image[cloud]), []
        return ServerStartup(), [f"startup.image brings no {facts.display_name} image: its servers boot the default "
                                 "one and install everything at boot"]
    if startup.image == "baked" and not facts.baked_image:
        return ServerStartup(), [f"startup.image baked: images are built on AWS only (EC2 Image Builder); "
                                 f"{facts.display_name}'s servers boot the default image (bring one: startup.image "
                                 f"{{{cloud}: <image id>}}, docs/cold-start.md)"]
    return ServerStartup(image=startup.image), []


def model_loading(startup: Startup, cloud: Cloud, runtime: str, device: str) -> tuple[bool, list[str]]:
    """Whether the runtime streams the weights, and a note where the workload asks and it cannot."""
    if startup.model_loading != "stream":
        return False, []
    facts = CLOUD_FACTS[cloud]
    if not facts.model_streaming:
        return False, [f"startup.model_loading stream: built for AWS S3 only; {facts.display_name}'s servers download "
                       f"the weights (docs/deploy-{cloud}.md, model-streaming)"]
    if device != "gpu" or not RUNTIME_FACTS[runtime].streams_weights:
        return False, [f"startup.model_loading stream: {RUNTIME_FACTS[runtime].display_name} on a {device.upper()} "
                       "server does not stream weights (vLLM on GPUs does); its server downloads them"]
    return True, []


def warm_pool(startup: Startup, cloud: Cloud, region: str, fleet: Fleet | None, spot: SpotAboveFloor | None,
              disk_gib: int, rates: ExchangeRates, currency: str, *, cold: ColdStart, warm: ColdStart,
              caches: bool = False, local_storage: bool = False, nodes: int = 1) -> tuple[WarmPool | None, list[str]]:
    """The fleet's burst kept as stopped servers, where the workload asks, the cloud's group can and a stopped
    server starts faster than a new one (`cold`, `warm`: sizing/coldstart.py; `caches`: a new server's image holds
    the runtime's caches; `local_storage`: the model is kept on instance storage, empty after a stop); else why
    not."""
    if not startup.warm_pool:
        return None, []
    facts = CLOUD_FACTS[cloud]
    if fleet is None:
        return None, ["startup.warm_pool: one server on its own has no scale-out to prepare for (a fleet only)"]
    if not facts.warm_pool:
        return None, [f"startup.warm_pool: {facts.display_name}'s group keeps no prepared, stopped servers here "
                      f"(docs/deploy-{cloud}.md, warm-pool)"]
    if spot is not None:
        return None, ["startup.warm_pool: AWS refuses a warm pool on a group with a mixed instances policy or spot "
                      "servers (Amazon EC2 Auto Scaling User Guide, warm pools, Limitations): the spot capacity above "
                      "the floor is kept instead"]
    burst = (fleet.max_replicas - fleet.min_replicas) * nodes  # servers: a replica across servers stops whole
    if burst <= 0:
        return None, [f"startup.warm_pool: the fleet is fixed at {fleet.min_replicas} servers (scaling.max_replicas); "
                      "there is no burst to keep ready"]
    if warm.total_s >= cold.total_s:
        reasons = (["the baked image holds what a pool server's first boot would prepare, its runtime's caches "
                    "included"] if caches else []) + (["the model kept on instance storage is fetched again after a "
                                                       "stop"] if local_storage else [])
        why = "; ".join(reasons) or "a stopped server still boots its VM and starts its runtime"
        return None, [f"startup.warm_pool: a stopped server would start in about {warm.total_s} s, no sooner than a "
                      f"new one ({cold.total_s} s; {why}): none kept, its disks would cost for nothing"]
    price = storage_prices().get((cloud, region, facts.block_volume))
    monthly = None if price is None else rates.convert(price.per_gb_month * disk_gib * burst, price.currency, currency)
    basis = (f"{facts.block_volume} at {price.per_gb_month:g} {price.currency}/GB-month ({price.source}, "
             f"{price.source_date})" if price else
             f"no {facts.block_volume} price packaged for {region} (sizing/data/storage_prices.csv): the stopped "
             f"servers' {disk_gib * burst} GB are billed at the region's {facts.block_volume} rate")
    return WarmPool(servers=burst, disk_gib=disk_gib,
                    monthly_storage=None if monthly is None else Money(amount=monthly, currency=currency),
                    storage_price_basis=basis), []


def startup_line(startup: ServerStartup, fleet: Fleet | None, cold: ColdStart, monthly: Money | None) -> str | None:
    """The plan's sentence on its image and warm pool, and what they change."""
    parts = []
    if startup.image == "baked":
        caches = ("and the runtime's compile caches, written by starting the model once on the build instance with "
                  "the servers' own command (a new model revision or runtime argument rebuilds the image)"
                  if startup.runtime_caches else "(the runtime's compile caches are not in it: its first start "
                                                 "writes them)")
        parts.append("Servers boot an image the stack bakes (EC2 Image Builder, on the plan's instance type): driver, "
                     f"Docker with the pinned runtime image and the gateway's packages {caches}, so a new server is "
                     f"estimated healthy after {cold.total_s} s")
    elif startup.image == "brought":
        parts.append(f"Servers boot the workload's image {startup.image_id}, taken to hold what a baked image does "
                     "(driver, Docker with the runtime image, nginx; the boot installs whatever it lacks: "
                     f"docs/cold-start.md), so a new server is estimated healthy after {cold.total_s} s")
    pool = startup.warm_pool
    if pool is not None and fleet is not None and startup.warm_start is not None:
        storage = f"{pool.monthly_storage}/month of disks" if pool.monthly_storage else "disks at a price not packaged"
        total = ""
        if monthly and pool.monthly_storage and monthly.currency == pool.monthly_storage.currency:
            whole = Money(amount=monthly.amount + pool.monthly_storage.amount, currency=monthly.currency)
            total = f"; the plan's monthly cost becomes {whole} ({monthly} of servers + {pool.monthly_storage})"
        parts.append(f"Warm pool: {pool.servers} prepared, stopped servers ({pool.disk_gib} GiB each, "
                     f"{storage}: {pool.storage_price_basis}) that scale-out starts in about "
                     f"{startup.warm_start.total_s} s instead of launching new ones in {cold.total_s} s; the "
                     f"autoscaler's warm-up follows ({fleet.scale_out_cooldown_s} s){total}")
    return ". ".join(parts) + "." if parts else None
