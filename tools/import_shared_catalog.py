"""Regenerate inferstack/sizing/data/{instances,prices,gpus}.csv from the research catalog in ../shared/catalog.

Specs and prices are split: instances.csv holds what a machine *is* (with the source of its specs),
prices.csv holds what it *costs* (one row per cloud, region, type and currency, with source and date).
`inferstack catalog refresh` rewrites prices.csv rows from the clouds' own pricing APIs.

    python tools/import_shared_catalog.py [--shared ../shared/catalog]
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "inferstack" / "sizing" / "data"

INSTANCE_COLUMNS = [
    "cloud",
    "region",
    "instance_type",
    "family",
    "vcpus",
    "memory_gib",
    "gpu_model",
    "gpu_count",
    "gpu_memory_gib_each",
    "local_nvme_gb",
    "network_gbps",
    "spec_source",
    "spec_date",
    "notes",
]
PRICE_COLUMNS = ["cloud", "region", "instance_type", "currency", "price_per_hour", "source", "source_date", "notes"]

# Where each row's specs come from (shared/catalog/README.md, "Sources, versions, dates").
_AWS_GPU = ("tsaol/aws-gpu data/all_gpu_instances.js @77fcd9f (from instances.vantage.sh)", "2026-01-21")
_AWS_CPU = ("skypilot-org/skypilot-catalog catalogs/v8/aws/vms.csv @00148f2", "unknown")
_GCP = ("Cyclenerd/google-cloud-pricing-cost-calculator pricing.yml @fd66b26 (Cloud Billing Catalog API)", "2026-07-30")
_GCP_A3_ULTRA = ("skypilot-org/skypilot-catalog catalogs/v8/gcp/vms.csv @006059e", "unknown")
_ALI_CPU = ("AlibabaCloudDocs/ecs intl.en-US/Instance/Instance families.md", "2021-07-19")
_ALI_GPU = (
    "Alibaba Cloud 'GPU-accelerated compute-optimized instance families' (English copy in the public "
    "GitHub index, file id 59137736427)",
    "unknown",
)
_HW_GPU = (
    "opentelekomcloud-docs/elastic-cloud-server gpu-accelerated_ecss.rst (Huawei topic en-us_topic_0097289624)",
    "unknown",
)
_HW_CPU = ("Huawei ECS flavor naming rule <family>.<size>.<GiB per vCPU> (not verified in ap-southeast-3)", "unknown")


def spec_source(row: dict[str, str]) -> tuple[str, str]:
    cloud, gpu = row["cloud"], row["gpu_count"] not in ("", "0")
    if cloud == "aws":
        return _AWS_GPU if gpu else _AWS_CPU
    if cloud == "gcp":
        return _GCP_A3_ULTRA if row["instance_type"] == "a3-ultragpu-8g" else _GCP
    if cloud == "alibaba":
        return _ALI_GPU if gpu else _ALI_CPU
    return _HW_GPU if gpu else _HW_CPU


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "catalog")
    args = parser.parse_args()
    instances, prices = [], []
    with (args.shared / "instances.csv").open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            source, date = spec_source(row)
            instances.append(
                {
                    **{k: row[k] for k in INSTANCE_COLUMNS if k in row},
                    "spec_source": source,
                    "spec_date": date,
                    "notes": row["notes"],
                }
            )
            if row["price_usd_hour_on_demand"]:
                prices.append(
                    {
                        "cloud": row["cloud"],
                        "region": row["region"],
                        "instance_type": row["instance_type"],
                        "currency": "USD",
                        "price_per_hour": row["price_usd_hour_on_demand"],
                        "source": row["price_source"],
                        "source_date": row["price_date"],
                        "notes": "on-demand list price, Linux, shared tenancy",
                    }
                )
    with (args.shared / "prices_alibaba_huawei.csv").open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            prices.append(
                {
                    "cloud": row["cloud"],
                    "region": row["region"],
                    "instance_type": row["instance_type"],
                    "currency": row["currency"],
                    "price_per_hour": row["price_per_hour"],
                    "source": row["source"],
                    "source_date": row["source_date"],
                    "notes": f"{row['billing']}; {row['notes']}",
                }
            )
    write(DATA / "instances.csv", INSTANCE_COLUMNS, instances)
    write(DATA / "prices.csv", PRICE_COLUMNS, prices)
    (DATA / "gpus.csv").write_bytes((args.shared / "gpus.csv").read_bytes())
    print(f"{len(instances)} instances, {len(prices)} prices -> {DATA}")


def write(path: Path, columns: list[str], rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
