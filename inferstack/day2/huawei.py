"""Huawei Cloud: not asked yet. `status` would read the AS group and its instances and the dedicated ELB's pools;
there are no logs to read: the servers run no agent (components/huawei/observability.py). The SDKs are what is
missing (UNAVAILABLE); the cloud module's shape is aws.py's."""

from __future__ import annotations

UNAVAILABLE: str | None = (
    "no extra of inferstack installs the AS or ELB SDKs (the refresh extra's huaweicloudsdkbss reads prices only), "
    "and the servers ship no logs (they run no agent: docs/deploy-huawei.md). Meanwhile: the Auto Scaling console "
    "(the AS group and its instances) and the ELB console (each pool's backend health) (docs/day2.md)")
