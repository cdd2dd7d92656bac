"""The regions each cloud has: data/regions.csv, one row per region with its source and the date it was read.

    from inferstack.sizing.regions import clouds_with_region, unknown_region
    clouds_with_region("us-east-9", ["aws"])  # [] : no such AWS region

The planner (`placement.regions`, `--region`) and a stack's provider region (`spec.for_stack`: `aws:region`, ...)
refuse a name that no allowed cloud has, with the closest names: a typo or a region that does not exist would
otherwise be planned in full, priced with a price borrowed from another region, and fail only at `pulumi up`. A
region that is here but has no price row keeps the borrowed price (explain.py `borrowed`).

Rows come from what an installed SDK ships where one does (AWS: botocore), else from the vendor's documentation
(each row names its page or file); `tools/refresh_regions.py` rewrites the SDK-derived rows and says how to refresh
the others. Zones are left empty: no source read here lists every region's zones.
"""

from __future__ import annotations

import csv
import difflib
from collections.abc import Sequence
from functools import cache
from typing import NamedTuple

from inferstack.clouds import CLOUD_FACTS, Cloud
from inferstack.errors import InputError, input_error
from inferstack.sizing.hardware import DATA_DIR

REGIONS_FILE = DATA_DIR / "regions.csv"
COLUMNS = ("cloud", "region", "zones", "source", "source_date")


class KnownRegion(NamedTuple):
    """One region of one cloud, as regions.csv describes it."""

    cloud: str  # a CLOUD_FACTS id (tests/sizing/test_regions.py checks every row)
    region: str
    zones: tuple[str, ...]  # space-separated in the file; empty: not sourced
    source: str
    source_date: str


def _row(fields: dict[str, str]) -> KnownRegion:
    return KnownRegion(fields["cloud"], fields["region"], tuple(fields["zones"].split()), fields["source"],
                       fields["source_date"])


@cache
def known_regions() -> dict[str, tuple[KnownRegion, ...]]:
    """Every row of regions.csv, by cloud id (read once)."""
    with REGIONS_FILE.open(newline="", encoding="utf-8") as f:
        rows = [_row(fields) for fields in csv.DictReader(f)]
    return {cloud: tuple(row for row in rows if row.cloud == cloud) for cloud in CLOUD_FACTS}


@cache
def region_names(cloud: Cloud) -> frozenset[str]:
    """The names of the regions `cloud` has."""
    return frozenset(row.region for row in known_regions()[cloud])


def clouds_with_region(region: str, clouds: Sequence[Cloud]) -> list[Cloud]:
    """Those of `clouds` that have a region named `region` (several clouds use us-east-1)."""
    return [cloud for cloud in clouds if region in region_names(cloud)]


def unknown_region(region: str, clouds: Sequence[Cloud], *, field: str, message: str) -> InputError:
    """The error for a region none of `clouds` has: `field`, `message`, the value, the closest names and the fix."""
    named: dict[str, Cloud] = {}
    for cloud in clouds:  # a name several clouds share is shown once, under the first; with one cloud, unsaid
        for name in region_names(cloud):
            named.setdefault(name, cloud)
    close = difflib.get_close_matches(region, sorted(named), n=3, cutoff=0.6)
    shown = [name if len(clouds) == 1 else f"{name} ({named[name]})" for name in close]
    hint = f"did you mean {', '.join(shown)}? " if shown else ""
    return input_error(
        field, message, value=region,
        fix=f"{hint}use a region listed for {', '.join(clouds)} in inferstack/sizing/data/regions.csv; a region the "
        "cloud opened since is added by `python tools/refresh_regions.py` (AWS) or by a row with its source",
    )
