"""Google Cloud: not asked yet. `status` would read the regional managed instance groups and their autoscalers, the
backend services' health (backendServices.getHealth) and the URL map's canary weights; `logs`, the stack's Cloud
Logging bucket. Their client libraries are what is missing (UNAVAILABLE); the cloud module's shape is aws.py's."""

from __future__ import annotations

UNAVAILABLE: str | None = (
    "the Compute Engine and Cloud Logging client libraries (google-cloud-compute, google-cloud-logging) are in no "
    "extra of inferstack yet; the refresh extra's google-cloud-billing reads prices only. Meanwhile: the Cloud "
    "console's Instance groups page (the group, its autoscaler and its versions), the load balancer's backend health, "
    "and Logs Explorer on the stack's log bucket (docs/day2.md)")
