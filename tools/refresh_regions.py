"""Rewrite the SDK-derived rows of inferstack/sizing/data/regions.csv; keep the documented rows as they are.

    .venv/bin/python tools/refresh_regions.py     # then `git diff inferstack/sizing/data/regions.csv`

SDK-derived rows (rewritten from the installed SDK; tests/sizing/test_regions.py fails when they differ from it):

- aws: botocore's `data/endpoints.json` (`botocore.loaders`, installed with the refresh and dev extras), the
  regions of partitions aws, aws-cn (China, its own accounts) and aws-us-gov (GovCloud), which the components
  handle (`aws.get_partition`, the arn:aws(-cn|-us-gov) patterns) and `CloudFacts.region_pattern` admits. Left
  out: the isolated partitions (aws-iso, -iso-b, -iso-e, -iso-f: air-gapped, reachable only from their own
  networks, with no public instance catalog or price list) and aws-eusc (the European Sovereign Cloud: its own
  `arn:aws-eusc` partition, which the components' ARN patterns do not take yet).

Documented rows (kept; each names the page or file it came from and the date it was read). To refresh one, read
its source again, edit the rows by hand with the new date, and never add a region no source names:

- gcp: GoogleCloudPlatform/gcping `tools/terraform/regions.json` (one latency probe per Google Cloud region). The
  table at https://cloud.google.com/compute/docs/regions-zones, the better source, could not be read whole here:
  read it on the next refresh.
- alibaba: the ECS API endpoint page, the "Common region ID reference" ECS table and the pages each row names. Left
  out: regions marked Closed or Decommissioned (ap-southeast-2, ap-south-1, cn-nanjing and cn-fuzhou), industry
  clouds (finance, gov), local regions and the China Unicom joint venture (cn-wuhan-lr, cn-zhengzhou-jva: not
  verified to offer every service the components create), names only an SDK endpoint map carries (na-south-1),
  and the internal names in those maps (alibabacloud_ecs20140526's and alibabacloud_ess20220222's
  `_endpoint_map`: `cn-hangzhou-internal-test-1`, `cn-shanghai-et15-b01`, ...).
- huawei: `EcsRegion.static_fields` of huaweicloudsdkecs (not a dependency: `pip download --no-deps
  huaweicloudsdkecs==VERSION`, read `huaweicloudsdkecs/v2/region/ecs_region.py` in the wheel).
"""

from __future__ import annotations

import csv
import datetime
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inferstack.clouds import CLOUD_FACTS  # noqa: E402
from inferstack.sizing.regions import COLUMNS, REGIONS_FILE  # noqa: E402

AWS_PARTITIONS = ("aws", "aws-cn", "aws-us-gov")


def aws_regions() -> dict[str, str]:
    """Each region of AWS_PARTITIONS in the installed botocore, with the source its row states."""
    import botocore
    from botocore.loaders import create_loader

    endpoints = create_loader().load_data("endpoints")
    return {
        region: f"botocore {botocore.__version__} botocore/data/endpoints.json: partition {partition['partition']}"
        for partition in endpoints["partitions"] if partition["partition"] in AWS_PARTITIONS
        for region in partition["regions"]
    }


SDK_SOURCES = {"aws": aws_regions}
"""The clouds whose rows this script writes, each with the function that reads them from its SDK."""


def refreshed_rows(current: list[dict[str, str]], today: str) -> list[dict[str, str]]:
    """`current` with the SDK-derived clouds' rows rewritten: a row whose region and source did not change keeps its
    date, so that a run without an SDK upgrade changes nothing."""
    dated = {(row["cloud"], row["region"], row["source"]): row["source_date"] for row in current}
    rows = [row for row in current if row["cloud"] not in SDK_SOURCES]
    for cloud, read in SDK_SOURCES.items():
        rows += [{"cloud": cloud, "region": region, "zones": "", "source": source,
                  "source_date": dated.get((cloud, region, source), today)}
                 for region, source in sorted(read().items())]
    order = list(CLOUD_FACTS)
    return sorted(rows, key=lambda row: order.index(row["cloud"]))  # stable: each cloud's rows keep their order


def regions_csv(rows: list[dict[str, str]]) -> str:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return text.getvalue()


def main() -> None:
    with REGIONS_FILE.open(newline="", encoding="utf-8") as f:
        current = list(csv.DictReader(f))
    rows = refreshed_rows(current, datetime.date.today().isoformat())
    before = {(row["cloud"], row["region"]) for row in current}
    after = {(row["cloud"], row["region"]) for row in rows}
    REGIONS_FILE.write_text(regions_csv(rows), encoding="utf-8")
    print(f"wrote {REGIONS_FILE}: {len(rows)} regions; added {sorted(after - before) or 'none'}, "
          f"removed {sorted(before - after) or 'none'}")


if __name__ == "__main__":
    main()
