"""Prices beyond the catalog regions: add on-demand rows to inferstack/sizing/data/prices.csv and write
inferstack/sizing/data/spot_prices.csv, from the upstream files named below.

    python tools/regional_prices.py --refresh-from-mirrors   # copy the upstream files out of fetched mirrors
    python tools/regional_prices.py                          # add the rows, print what was added and missing

Rows are only added: a (cloud, region, type) already in prices.csv is kept as it is (a price the catalog already
had, or one `inferstack catalog refresh` wrote, is never overwritten; to move to newer upstream files, delete
the rows of the old ones first). The spot file is rewritten whole. The run fails when the same sources do not
reproduce the packaged us-east-1 / us-central1 prices.

Every price written is a figure copied verbatim (as text) from an upstream file; the only arithmetic is
the GCP "N1 + T4" composition (VM list price + T4 list price, added with Decimal), which follows the
project's existing rule for those rows and is broken down in the row's notes. Nothing is scaled,
converted or estimated. A type/region pair the source does not list gets no row.

Inputs (all under UPSTREAM, default tools/price_sources/; the two SkyPilot excerpts are committed there, the
other files are copied out of fetched mirrors by --refresh-from-mirrors and not committed):
  tsaol_aws-gpu_77fcd9f_all_gpu_instances.js
      = `git show 77fcd9f:data/all_gpu_instances.js` of github.com/tsaol/aws-gpu
        (mirror: /work/.mirror/tsaol+aws-gpu/repo). Header: "Auto-generated from instances.vantage.sh
        data", "Last updated: 2026-01-21". AWS GPU/Inferentia on-demand $/h per region (no spot).
  skypilot_aws_vms_00148f2_excerpt.csv
      = rows of catalogs/v8/aws/vms.csv @ skypilot-org/skypilot-catalog 00148f2af3672e2229b4f7bf8157d5a3f36e3c35
        for the 14 AWS c7i/m7i/r7i catalog types in us-east-1 (check only), us-west-2, eu-west-1,
        eu-central-1, ap-northeast-1, ap-southeast-1 (all AZ rows of those regions), copied line by line
        from the stored file via the index's read_file (the repository is too large to fetch whole here).
        If you have the full file, pass --skypilot-aws PATH; the same filter is applied.
  cyclenerd_pricing_fd66b26.yml
      = `git show fd66b26:pricing.yml` of github.com/Cyclenerd/google-cloud-pricing-cost-calculator
        (mirror: /work/.mirror/Cyclenerd+google-cloud-pricing-cost-calculator/repo),
        "generated: Thu Jul 30 06:13:17 2026". compute.instance.<type>.cost.<region>.hour / hour_spot.
  skypilot_aws_vms_00148f2_gpu_excerpt.csv
      = rows of the same file for the 30 AWS GPU catalog types (g4dn, g5, g6, g6e, p4d, p4de, p5, p5e, p5en) in
        the six regions above (all AZ rows, Local Zones included and left out here), copied from the stored file
        via the index's read_file. Only its SpotPrice is written (spot_prices.csv); its Price column matches the
        on-demand figures of prices.csv for all 127 (region, type) pairs it has (the run prints any difference).
  skypilot_gcp_vms_006059e_T4_excerpt.csv
      = T4 accelerator rows (counts 1/2/4) of catalogs/v8/gcp/vms.csv @ skypilot-catalog
        006059e0f18acb1341e22a27751e9f80df6ba92f for us-central1 (check) + the 4 GCP target regions.
  alibaba_initial-on-demand-prices_5d2e077.json
      = `git show 5d2e077:pkg/providers/pricing/initial-on-demand-prices.json` of
        github.com/cloudpilot-ai/karpenter-provider-alibabacloud (commit authored 2024-12-30).
        Zero prices (all of ap-southeast-6) are dropped, not written.
  priceserver_alibabacloud_price_de6fe92.json (cross-check only, recorded in notes)
      = `git show de6fe92:pkg/client/builtin-data/alibabacloud_price.json` of github.com/cloudpilot-ai/priceserver
        (mirror /work/.mirror/cloudpilot-ai+priceserver/repo; file last changed 93dab41, 2024-10-09).
Project files read: inferstack/sizing/data/instances.csv (the types priced) and prices.csv (rows kept, and the
us-east-1 / us-central1 cross-checks).
"""
import argparse
import collections
import csv
import json
import os
import subprocess
import sys
from decimal import Decimal

import yaml

HEADER = ["cloud", "region", "instance_type", "currency", "price_per_hour", "source", "source_date", "notes"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROJECT = os.path.join(ROOT, "inferstack", "sizing", "data")
UPSTREAM = os.path.join(ROOT, "tools", "price_sources")
sys.path.insert(0, ROOT)
from inferstack.sizing.regions import region_names  # noqa: E402  (the one reader of regions.csv)

AWS_REGIONS = ["eu-west-1", "us-west-2", "eu-central-1", "ap-northeast-1", "ap-southeast-1"]
GCP_REGIONS = ["europe-west4", "europe-west1", "us-east4", "asia-southeast1"]

SRC_TSAOL = "tsaol/aws-gpu:data/all_gpu_instances.js@77fcd9f (instances.vantage.sh data)"
SRC_SKY_AWS = "skypilot-catalog:catalogs/v8/aws/vms.csv@00148f2"
SRC_CYC = "Cyclenerd/google-cloud-pricing-cost-calculator:pricing.yml@fd66b26 (Cloud Billing Catalog SKUs)"
SRC_SKY_GCP_T4 = "skypilot-catalog:catalogs/v8/gcp/vms.csv@006059e (T4 row)"
SRC_ALI = ("cloudpilot-ai/karpenter-provider-alibabacloud@5d2e077 pkg/providers/pricing/initial-on-demand-prices.json "
           "(hack/tools/price_gen output from the cloudpilot-ai/priceserver data set, which reads Alibaba's China-site "
           "public price file instancePrice.json and keeps hours[0].price of the linux entries)")

# Where `fetch` (the tool library) leaves each upstream repository, and the commit and file read from it.
MIRRORS = {
    "tsaol_aws-gpu_77fcd9f_all_gpu_instances.js":
        ("/work/.mirror/tsaol+aws-gpu/repo", "77fcd9f", "data/all_gpu_instances.js"),
    "cyclenerd_pricing_fd66b26.yml":
        ("/work/.mirror/Cyclenerd+google-cloud-pricing-cost-calculator/repo", "fd66b26", "pricing.yml"),
    "alibaba_initial-on-demand-prices_5d2e077.json":
        ("/work/.mirror/cloudpilot-ai+karpenter-provider-alibabacloud/repo", "5d2e077",
         "pkg/providers/pricing/initial-on-demand-prices.json"),
    "priceserver_alibabacloud_price_de6fe92.json":
        ("/work/.mirror/cloudpilot-ai+priceserver/repo", "de6fe92", "pkg/client/builtin-data/alibabacloud_price.json"),
}

GPU_KEYS = {"a100": "A100 40GB", "a100-80gb": "A100 80GB", "h100-80gb": "H100 80GB", "l4": "L4",
            "rtx6000": "RTX PRO 6000"}


class StrLoader(yaml.SafeLoader):
    """Keeps YAML numbers as their source text so figures are copied exactly."""


StrLoader.add_constructor("tag:yaml.org,2002:float", lambda loader, node: loader.construct_scalar(node))
StrLoader.add_constructor("tag:yaml.org,2002:int", lambda loader, node: loader.construct_scalar(node))


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def catalog_types(cloud):
    with open(os.path.join(PROJECT, "instances.csv"), newline="") as f:
        return [r["instance_type"] for r in csv.DictReader(f) if r["cloud"] == cloud]


def project_prices():
    with open(os.path.join(PROJECT, "prices.csv"), newline="") as f:
        return list(csv.DictReader(f))


def refresh(upstream):
    for name, (git_dir, commit, path) in MIRRORS.items():
        data = subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True,
                              capture_output=True).stdout
        with open(os.path.join(upstream, name), "wb") as f:
            f.write(data)
        print(f"refreshed {name} from {git_dir} {commit}:{path}")


def row(cloud, region, itype, currency, price, source, date, notes):
    return dict(zip(HEADER, [cloud, region, itype, currency, price, source, date, notes], strict=True))


# ---------------------------------------------------------------- AWS
def aws_gpu(upstream, types, regions, checks):
    text = read_text(os.path.join(upstream, "tsaol_aws-gpu_77fcd9f_all_gpu_instances.js"))
    assert "Last updated: 2026-01-21" in text
    data = json.loads(text[text.index("["):text.rindex("]") + 1], parse_float=str, parse_int=str)
    by = {x.get("apiName", x.get("name")): x for x in data}
    out, missing, known = [], [], set()
    for t in types:
        x = by.get(t)
        if x is None:
            continue  # CPU types are not in this file
        known.add(t)
        us = x["pricing"].get("us-east-1", {}).get("onDemand")
        checks.append(("aws", "us-east-1", t, us))
        for r in regions:
            p = x["pricing"].get(r, {}).get("onDemand")
            if p is None:
                missing.append((r, t))
                continue
            out.append(row("aws", r, t, "USD", p, SRC_TSAOL, "2026-01-21",
                           "on-demand list price, Linux, shared tenancy"))
    return out, missing, known


def skypilot_aws(path, types, regions):
    """On-demand Price per (region, type) and the per-AZ SpotPrices of a SkyPilot AWS vms.csv (or an excerpt of it),
    for `types` in `regions` and us-east-1; Local Zones (e.g. use1-atl2-az1) and empty figures are left out."""
    want = set(types)
    od = {}
    spot = collections.defaultdict(list)
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            t, reg = r["InstanceType"], r["Region"]
            if t not in want or (reg not in regions and reg != "us-east-1"):
                continue
            if r["Price"]:
                prev = od.setdefault((reg, t), r["Price"])
                assert prev == r["Price"], (reg, t, prev, r["Price"])
            az = r["AvailabilityZone"]
            if r["SpotPrice"] and "-az" in az and az.count("-") == 1:
                spot[(reg, t)].append((Decimal(r["SpotPrice"]), r["SpotPrice"], az))
    return od, spot


def spot_row(reg, t, azs):
    """The region's highest per-AZ spot price (a fleet spans zones, and capacity-optimized allocation does not pick
    the cheapest zone), with every AZ's figure in the notes."""
    azs = sorted(azs, key=lambda z: z[2])
    high = max(azs)
    detail = "; ".join(f"{z[2]} {z[1]}" for z in azs)
    return row("aws", reg, t, "USD", high[1], SRC_SKY_AWS, "unknown",
               f"spot; Linux; highest per-AZ SpotPrice in the region ({high[2]}): a fleet spans zones and "
               f"capacity-optimized allocation does not pick the cheapest; all AZs: {detail}; "
               "EC2 spot price captured when SkyPilot built the catalog (capture time not recorded); "
               "spot prices move continuously")


def aws_cpu(path, types, regions, checks):
    od, spot = skypilot_aws(path, types, regions)
    out, sp, missing = [], [], []
    for t in types:
        checks.append(("aws", "us-east-1", t, od.get(("us-east-1", t))))
        for reg in ["us-east-1", *regions]:
            if spot[(reg, t)]:
                sp.append(spot_row(reg, t, spot[(reg, t)]))
            if reg == "us-east-1":
                continue  # the packaged row (checked above)
            p = od.get((reg, t))
            if p is None:
                missing.append((reg, t))
                continue
            out.append(row("aws", reg, t, "USD", p, SRC_SKY_AWS, "unknown",
                           "on-demand list price, Linux, shared tenancy"))
    return out, sp, missing


def aws_gpu_spot(path, types, regions, on_demand):
    """Spot rows of the GPU types from the SkyPilot GPU excerpt (on-demand prices of these types come from the
    tsaol file). Its Price column is compared with those on-demand prices, region by region: a check of the
    excerpt's transcription and of the two sources against each other. Returns the rows and the differences."""
    od, spot = skypilot_aws(path, types, regions)
    rows = [spot_row(reg, t, spot[(reg, t)]) for t in types for reg in ["us-east-1", *regions] if spot[(reg, t)]]
    differ = [(reg, t, p, on_demand[(reg, t)]) for (reg, t), p in sorted(od.items())
              if (reg, t) in on_demand and Decimal(p) != Decimal(on_demand[(reg, t)])]
    return rows, differ


# ---------------------------------------------------------------- GCP
def gcp(upstream, types, regions, checks):
    y = yaml.load(read_text(os.path.join(upstream, "cyclenerd_pricing_fd66b26.yml")), Loader=StrLoader)
    assert "Jul 30" in y["about"]["generated"] and "2026" in y["about"]["generated"]
    inst = y["compute"]["instance"]
    t4 = {}
    with open(os.path.join(upstream, "skypilot_gcp_vms_006059e_T4_excerpt.csv"), newline="") as f:
        for r in csv.DictReader(f):
            k = (r["Region"], int(r["AcceleratorCount"]))
            assert t4.setdefault(k, r["Price"]) == r["Price"]
    out, sp, missing = [], [], []
    for t in types:
        base, _, acc = t.partition("+")
        x = inst.get(base)
        if x is None:
            missing.append(("*", t))
            continue
        cost = x["cost"]
        if acc:  # "n1-standard-4+1x nvidia-tesla-t4": VM + N x T4 (project rule)
            n = int(acc.split("x")[0])
            uc = Decimal(cost["us-central1"]["hour"]) + Decimal(t4[("us-central1", n)])
            checks.append(("gcp", "us-central1", t, str(uc)))
            for reg in regions:
                if reg not in cost or (reg, n) not in t4:
                    missing.append((reg, t))
                    continue
                vm, g = cost[reg]["hour"], t4[(reg, n)]
                total = str(Decimal(vm) + Decimal(g))
                out.append(row("gcp", reg, t, "USD", total, f"{SRC_CYC} + {SRC_SKY_GCP_T4}",
                               "2026-07-30 (VM); T4 row undated",
                               f"on-demand list price, Linux, shared tenancy; VM + {n}x T4 = {vm} ({base}, "
                               f"pricing.yml) + {g} ({n}x T4, SkyPilot GCP catalog)"))
            continue
        checks.append(("gcp", "us-central1", t, cost.get("us-central1", {}).get("hour")))
        gpus = [f"{x[k]}x {GPU_KEYS.get(k, k)}" for k in x if k not in ("cost", "cpu", "ram", "local-ssd")]
        incl = "machine price (vCPU + RAM)"
        if gpus:
            incl = "full machine price incl. bundled GPUs (" + ", ".join(gpus) + ")"
        if "local-ssd" in x:
            incl += f" and bundled Local SSD ({x['local-ssd']} GB)"
        elif gpus:
            incl += "; no bundled Local SSD"
        if base in ("a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g"):
            incl += "; normally obtainable only as Spot / DWS flex-start / reservations (see catalog README caveat 3)"
        for reg in ["us-central1", *regions]:
            c = cost.get(reg)
            if c is None or "hour" not in c:
                missing.append((reg, t))
                continue
            if reg != "us-central1":  # the packaged on-demand row (checked above); its spot price is added
                out.append(row("gcp", reg, t, "USD", c["hour"], SRC_CYC, "2026-07-30",
                               f"on-demand list price, Linux, shared tenancy; {incl}"))
            if c.get("hour_spot") is not None:
                sp.append(row("gcp", reg, t, "USD", c["hour_spot"], SRC_CYC, "2026-07-30",
                              f"spot; {incl}; Spot VM list price from the Cloud Billing Catalog SKUs "
                              "(Google may change Spot prices up to once a month)"))
    return out, sp, missing


# ---------------------------------------------------------------- Alibaba
def alibaba(upstream, types, skipped):
    d = json.loads(read_text(os.path.join(upstream, "alibaba_initial-on-demand-prices_5d2e077.json")),
                   parse_float=str, parse_int=str)
    # cross-check only (never a price source here): cloudpilot-ai/priceserver builtin data, file last changed 2024-10-09
    ps = json.loads(read_text(os.path.join(upstream, "priceserver_alibabacloud_price_de6fe92.json")))
    rows = []
    known = region_names("alibaba")
    for reg in sorted(d):
        if reg not in known:  # closed, or a local region regions.csv leaves out (tools/refresh_regions.py)
            skipped.append((reg, "*", "region not in regions.csv"))
            continue
        for t in types:
            p = d[reg].get(t)
            if p is None:
                continue
            if Decimal(p) <= 0:
                skipped.append((reg, t, p))
                continue
            x = ps.get(reg, {}).get("instanceTypePrices", {}).get(t)
            if x is None:
                xc = "not in cloudpilot-ai/priceserver builtin data of 2024-10-09 (no cross-check)"
            elif abs(Decimal(str(x["onDemandPricePerHour"])) - Decimal(p)) <= Decimal("0.000001"):
                xc = "same value (to 1e-6) in cloudpilot-ai/priceserver builtin data of 2024-10-09"
            else:
                xc = (f"CHECK: cloudpilot-ai/priceserver builtin data of 2024-10-09 gives {x['onDemandPricePerHour']} "
                      "(price changed between the snapshots, or a data error); verify with DescribePrice before use")
            notes = ("pay-as-you-go (按量付费) hourly list price; Linux; China-site (aliyun.com) price list; "
                     "in instances.csv (catalog region ap-southeast-1); compute only: excludes system/data disks, "
                     "EIP/bandwidth, paid images; CNY, not converted to USD; the source lists a type only where "
                     "DescribeAvailableResource(PostPaid) showed it in the region's first zone at capture; " + xc)
            rows.append(row("alibaba", reg, t, "CNY", p, SRC_ALI, "2024-12-30", notes))
    return rows


def write(path, rows):
    for r in rows:
        assert Decimal(r["price_per_hour"]) > 0, r
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=HEADER, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", default=UPSTREAM)
    ap.add_argument("--skypilot-aws", default=None, help="full or excerpted skypilot catalogs/v8/aws/vms.csv @00148f2")
    ap.add_argument("--refresh-from-mirrors", action="store_true")
    a = ap.parse_args()
    if a.refresh_from_mirrors:
        refresh(a.upstream)
    sky_aws = a.skypilot_aws or os.path.join(a.upstream, "skypilot_aws_vms_00148f2_excerpt.csv")

    proj = project_prices()
    proj_price = {(r["cloud"], r["region"], r["instance_type"]): r["price_per_hour"] for r in proj}

    checks = []
    aws_types = catalog_types("aws")
    aws_regions = AWS_REGIONS
    g_rows, g_missing, gpu_known = aws_gpu(a.upstream, aws_types, aws_regions, checks)
    gpu_on_demand = {(r["region"], r["instance_type"]): r["price_per_hour"] for r in g_rows}
    gpu_on_demand |= {("us-east-1", t): proj_price[("aws", "us-east-1", t)] for t in gpu_known
                      if ("aws", "us-east-1", t) in proj_price}
    g_spot, g_differ = aws_gpu_spot(os.path.join(a.upstream, "skypilot_aws_vms_00148f2_gpu_excerpt.csv"),
                                    sorted(gpu_known, key=aws_types.index), aws_regions, gpu_on_demand)
    cpu_types = [t for t in aws_types if t not in gpu_known]  # c7i/m7i/r7i: SkyPilot AWS catalog
    c_rows, c_spot, c_missing = aws_cpu(sky_aws, cpu_types, aws_regions, checks)
    gcp_regions = GCP_REGIONS
    gc_rows, gc_spot, gc_missing = gcp(a.upstream, catalog_types("gcp"), gcp_regions, checks)
    skipped = []
    al_rows = alibaba(a.upstream, catalog_types("alibaba"), skipped)

    # cross-check: the same sources must reproduce the project's us-east-1 / us-central1 figures
    bad = []
    for cloud, reg, t, val in checks:
        pv = proj_price.get((cloud, reg, t))
        if pv is None and val is None:
            continue
        if pv is None or val is None or Decimal(pv) != Decimal(val).quantize(Decimal(pv)):
            bad.append((cloud, reg, t, pv, val))
    print(f"cross-checks vs project prices.csv: {len(checks) - len(bad)} ok, {len(bad)} differ")
    for b in bad:
        print("  DIFF", b)

    def aws_order(r):
        return (["us-east-1", *aws_regions].index(r["region"]), aws_types.index(r["instance_type"]))

    main_rows = sorted(c_rows + g_rows, key=aws_order) + gc_rows + al_rows
    spot_rows = sorted(c_spot + g_spot, key=aws_order) + sorted(gc_spot, key=lambda r: r["region"] != "us-central1")
    print(f"AWS GPU on-demand: SkyPilot's Price differs from the tsaol figure in {len(g_differ)} (region, type):")
    for d in g_differ:
        print("  ", d)
    if bad:
        return 1
    added = [r for r in main_rows if (r["cloud"], r["region"], r["instance_type"]) not in proj_price]
    write(os.path.join(PROJECT, "prices.csv"), proj + added)
    write(os.path.join(PROJECT, "spot_prices.csv"), spot_rows)

    for name, rows in (("prices.csv (added)", added), ("spot_prices.csv", spot_rows)):
        cnt = collections.Counter((r["cloud"], r["region"]) for r in rows)
        print(f"{name}: {len(rows)} rows")
        for k in sorted(cnt):
            print(f"  {k[0]:8s} {k[1]:16s} {cnt[k]}")
    print("source figure is 0 or negative, or its region is not a known one (no row written):")
    for reg, t, p in skipped:
        print(f"  alibaba {reg} {t} {p}")
    print("no source figure (no row written):")
    for reg, t in g_missing + c_missing + gc_missing:
        print(f"  {reg} {t}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
