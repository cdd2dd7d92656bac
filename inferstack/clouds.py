"""The clouds inferstack deploys to: each cloud's identity and facts, in one place.

    from inferstack.clouds import CLOUD_FACTS
    CLOUD_FACTS["alibaba"].region_config_key  # "alicloud:region"

One frozen `CloudFacts` entry per cloud, keyed by its id in `CLOUD_FACTS` (in the order the CLI lists clouds). The
spec (`CLOUDS`, `PROVIDER_REGION_KEYS`), sizing (catalog region, region names, cold start), `inferstack diff`, the
bootstrap renderer, the components' backends, the extras' messages and the plot read their per-cloud facts from
here; a new literal dict keyed by cloud ids elsewhere fails `tests/test_clouds.py`. Pure Python: no Pulumi, no
pydantic.

What stays outside, and why:

- the programs that run on the server (`bootstrap/files/cloud_access.py`, `fetch_secret.py`, `model_sync.py`)
  cannot import inferstack: their metadata endpoints, bucket-name grammar and signing hosts stay in them. The
  bucket grammar is read from there (`CloudFacts.bucket_name_pattern`), never copied;
- how a cloud provisions (capability table with reasons, brought-id forms, resources) is its backend module,
  `inferstack.components.<id>` (`CloudFacts.backend_module`);
- what its prices API answers is `inferstack.sizing.refresh.<id>` (`CloudFacts.pricing_module`);
- the policy pack (`policy/`) ships alone and imports only the standard library: its provider-package map is
  checked against this registry by `tests/policy/test_pack_agrees_with_components.py`.

Adding a fifth cloud:

1. its id in the `Cloud` Literal and one `CloudFacts` entry below;
2. one backend package, `inferstack/components/<id>/` (in its `__init__.py` a `@register_backend` `CloudBackend`
   with its capability table, one module per concern beside it), its extra named after it in pyproject.toml
   (Pulumi and `pip_package`) and its guide `docs/deploy-<id>.md`;
3. its data: its regions (`sizing/data/regions.csv`, each row with its source), instance and price rows
   (`sizing/data/instances.csv`, `prices.csv`), and a price refresh module `inferstack/sizing/refresh/<id>.py`;
4. its server-side facts in `bootstrap/files` (metadata endpoint, bucket grammar, request signing, secret store)
   and its boot disk's throughput formula (`sizing/coldstart.py` `block_volume_bytes_per_s`):
   `tests/test_clouds.py` and `tests/bootstrap/test_bootstrap_clouds.py` say which are missing;
5. the policy pack's rules for its resource types (`policy/guardrails/resource_types.py`, from `PROVIDER_PACKAGES` on;
   the pack cannot import this module);
6. its tests: `tests/components/test_<id>.py` and its rows in the parametrized matrices.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal, NamedTuple

Cloud = Literal["aws", "gcp", "alibaba", "huawei"]
"""The clouds inferstack knows; each one's facts are its entry in CLOUD_FACTS."""


class CloudFacts(NamedTuple):
    """One cloud's identity and the facts about it that more than one layer reads."""

    id: Cloud
    """What the spec, plans, catalogs and `--cloud` call it."""
    display_name: str
    """Its name in messages ("Google Cloud")."""
    pulumi_package: str
    """The Pulumi package of its provider: resource and lookup tokens start with it (`alicloud:ecs/instance:...`)
    and its stack config keys live under it."""
    pip_package: str
    """The distribution that installs the provider's Python SDK (in the cloud's extra, `inferstack[<id>]`)."""
    region_pattern: re.Pattern[str]
    """The shape of its region names (`re.fullmatch` it: `$` alone admits a final newline): a stack's provider region
    is checked against it first, and every row of `sizing/data/regions.csv`, the regions it has, fits it
    (tests/sizing/test_regions.py)."""
    catalog_region: str
    """The region its instance specs were catalogued for (shared/catalog/README.md): the default region to plan in."""
    driver_ready_image: bool
    """Whether its GPU servers boot an image with the NVIDIA driver preinstalled. The cold-start estimate reads it,
    and so do the capability tables (`Capability.DRIVER_READY_IMAGE`), which give the reasons."""
    block_volume: str
    """The boot disk its servers get; the model lives there when the server has no local NVMe."""
    load_balancer_timeout_s: int
    """The longest one request may take behind its fleet's load balancer: the smallest of the maxima of every timeout
    its listener applies (idle, request, response). A non-streamed answer sends nothing until it is whole, so each must
    cover a whole answer; the planner caps an answer's length to fit (`plan.answer_token_cap`)."""
    metadata_addresses: tuple[str, ...]
    """Its instance metadata server's addresses, which the runtime may never reach, whatever the cloud's session
    tokens (they stop an SSRF, not code running on the server): boot.sh lets only root open their HTTP port, and no
    container at all (boot phase metadata_firewall), and a natively installed runtime's unit is denied them outright
    (`IPAddressDeny=`). The server programs' metadata endpoints (`bootstrap/files/cloud_access.py`) are on them."""
    rolling_update: bool
    """Whether its managed group replaces running servers by itself when their template changes (surge, health-gated).
    The plan's rollout line and `inferstack diff` read it, and so do the capability tables
    (`Capability.ROLLING_UPDATE`), which give the reasons."""
    rollout_command: bool
    """Whether `inferstack rollout STACK` replaces its group's running servers in batches after `pulumi up` (a group
    that does not do it itself: `rolling_update` False); otherwise they are replaced by hand (the capability tables
    say how)."""
    on_demand_floor: bool
    """Whether its managed group can keep a base of on-demand servers and add spot ones above it, with several
    instance types to fall back on: the planner writes `plan.spot_above_floor` only where it can, and the capability
    tables (`Capability.SPOT_ABOVE_FLOOR`) give the reasons."""
    image_id_pattern: re.Pattern[str]
    """The shape of its image ids, as a workload brings one (`startup.image`; `re.fullmatch` it)."""
    baked_image: bool
    """Whether the components build its server image themselves (workload `startup.image: baked`); elsewhere a workload
    brings its own, and the capability tables (`Capability.BAKED_IMAGE`) give the reasons."""
    model_streaming: bool
    """Whether its servers' runtime may stream the weights from its bucket (workload `startup.model_loading: stream`):
    the components give the runtime credentials of its own, limited to reading the model; the capability tables
    (`Capability.MODEL_STREAMING`) give the reasons where not."""
    warm_pool: bool
    """Whether its managed group can keep servers prepared and stopped for scale-out (AWS Auto Scaling warm pools):
    the planner writes `plan.startup.warm_pool` only where it can, and the capability tables
    (`Capability.WARM_POOL`) give the reasons."""
    plot_colour: str
    """Its colour in `inferstack plan --plot`."""

    @property
    def region_config_key(self) -> str:
        """The stack config key its Pulumi provider reads its region from (`aws:region`)."""
        return f"{self.pulumi_package}:region"

    @property
    def provider_module(self) -> str:
        """The provider SDK's Python module (`pulumi_alicloud`)."""
        return self.pip_package.replace("-", "_")

    @property
    def backend_module(self) -> str:
        """The module of its Pulumi backend (imported only when a plan deploys there: provider SDKs are slow)."""
        return f"inferstack.components.{self.id}"

    @property
    def pricing_module(self) -> str:
        """The module that refreshes its prices from its own pricing API."""
        return f"inferstack.sizing.refresh.{self.id}"

    @property
    def bucket_name_pattern(self) -> str:
        """Its bucket-name grammar, as the server's own code checks it (`re.fullmatch` it)."""
        # The server-side file is the one source. Imported here, on use: the bootstrap package imports the spec,
        # which imports this module.
        from inferstack.bootstrap.files.cloud_access import BUCKET_NAME_PATTERNS

        return BUCKET_NAME_PATTERNS[self.id]


AWS = CloudFacts(
    id="aws",
    display_name="AWS",
    pulumi_package="aws",
    pip_package="pulumi-aws",
    region_pattern=re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$"),  # us-east-1, us-gov-west-1
    catalog_region="us-east-1",
    driver_ready_image=True,  # Deep Learning Base OSS Nvidia Driver GPU AMI
    block_volume="gp3",
    # ALB idle_timeout: 1-4000 s, the time a connection may carry no byte (ELB User Guide, "Connection idle timeout",
    # read 2026-12-07); the ALB has no whole-request timeout.
    load_balancer_timeout_s=4000,
    # EC2 User Guide, "Instance identity documents" (read 2026-12-07): IMDS at 169.254.169.254 and, on Nitro instances
    # in an IPv6 subnet whose metadata options enable it, [fd00:ec2::254]. The components leave http_protocol_ipv6
    # unset (pulumi_aws: "Defaults to `disabled`"); it is denied all the same, should it be enabled by hand.
    metadata_addresses=("169.254.169.254", "fd00:ec2::254"),
    rolling_update=True,  # ASG instance refresh
    rollout_command=False,  # the group rolls itself
    on_demand_floor=True,  # ASG mixed instances policy
    image_id_pattern=re.compile(r"^ami-[0-9a-f]{8}([0-9a-f]{9})?$"),  # ami- and 8 or 17 hex digits (EC2 API)
    baked_image=True,  # EC2 Image Builder
    model_streaming=True,  # S3, credentials from a role of its own (STS AssumeRole)
    warm_pool=True,  # Auto Scaling warm pools
    plot_colour="#ff9900",
)
GCP = CloudFacts(
    id="gcp",
    display_name="Google Cloud",
    pulumi_package="gcp",
    pip_package="pulumi-gcp",
    region_pattern=re.compile(r"^[a-z]+-[a-z]+\d+$"),  # us-central1, europe-west4
    catalog_region="us-central1",
    driver_ready_image=True,  # Canonical's Ubuntu accelerator image
    block_volume="pd-balanced",  # hyperdisk-balanced on the machine families that take only Hyperdisk
    # Backend service timeout_sec, a whole response's for an external Application Load Balancer: "1 through
    # 2,147,483,647 seconds" (pulumi_gcp 10.2.0 compute/backend_service.py, read 2026-12-07).
    load_balancer_timeout_s=2_147_483_647,
    # Also named metadata.google.internal (Google's gcp-metadata client: HOST_ADDRESS, SECONDARY_HOST_ADDRESS). It is
    # the VM's DNS resolver too (Compute Engine "Internal DNS"), so the host rule leaves port 53 open. Dual-stack VMs
    # reach it over IPv4 only (Compute Engine "Configure IPv6"); the components create IPv4-only interfaces. Read
    # 2026-12-07.
    metadata_addresses=("169.254.169.254",),
    rolling_update=True,  # MIG update policy
    rollout_command=False,  # the group rolls itself
    on_demand_floor=False,  # a MIG's template has one provisioning model
    # An image's self link within its project, or its family (the newest image in it): compute.Image names.
    image_id_pattern=re.compile(r"^projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/global/images/(family/)?"
                                r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"),
    baked_image=False,  # brought images only: see Capability.BAKED_IMAGE
    model_streaming=False,  # not built: see Capability.MODEL_STREAMING
    warm_pool=False,  # not built: see Capability.WARM_POOL
    plot_colour="#4285f4",
)
ALIBABA = CloudFacts(
    id="alibaba",
    display_name="Alibaba Cloud",
    pulumi_package="alicloud",
    pip_package="pulumi-alicloud",
    region_pattern=re.compile(r"^[a-z]{2}-[a-z]+(-\d+)?$"),  # ap-southeast-1, cn-hangzhou
    catalog_region="ap-southeast-1",
    driver_ready_image=False,  # the bootstrap installs the driver
    block_volume="ESSD PL1",  # cloud_essd at its default performance level
    # ALB listener idle_timeout and request_timeout: "0~600 Seconds"; past request_timeout without the backend's answer,
    # ALB "Will Give up Waiting" and returns HTTP 504 (pulumi_alicloud 4.0.0 alb/listener.py, read 2026-12-07).
    load_balancer_timeout_s=600,
    metadata_addresses=("100.100.100.200",),  # ECS "Instance metadata" (hardened mode and normal), read 2026-12-07
    rolling_update=False,  # ESS instance refresh needs the Priority policy
    rollout_command=False,  # not built yet
    on_demand_floor=True,  # ESS on-demand base capacity, several instance types
    image_id_pattern=re.compile(r"^m-[0-9a-z]{10,30}$"),  # custom image ids: m- and letters or digits
    baked_image=False,  # brought images only: see Capability.BAKED_IMAGE
    model_streaming=False,  # not built: see Capability.MODEL_STREAMING
    warm_pool=False,  # not built: see Capability.WARM_POOL
    plot_colour="#e4393c",
)
HUAWEI = CloudFacts(
    id="huawei",
    display_name="Huawei Cloud",
    pulumi_package="huaweicloud",
    pip_package="pulumi-huaweicloud",
    region_pattern=re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$"),  # ap-southeast-3, cn-north-4
    catalog_region="ap-southeast-3",
    # Offered per region and flavor; where it is missing the bootstrap installs the driver and the cold-start
    # estimate is short by the driver phase (assumption: the region offers it).
    driver_ready_image=True,
    block_volume="GPSSD",
    # Dedicated ELB listener request_timeout and response_timeout: "Value range: 1 to 300" (pulumi_huaweicloud 0.0.12
    # dedicatedelb/listener.py, read 2026-12-07); idle_timeout takes 0-4000.
    load_balancer_timeout_s=300,
    # ECS "Obtaining ECS Details Using Metadata" (2025-08-12, read 2026-12-07), which also suggests the root-only rule.
    metadata_addresses=("169.254.169.254",),
    rolling_update=False,  # AS has no instance refresh
    rollout_command=True,  # day2/huawei.py drives AS
    on_demand_floor=False,  # an AS configuration is all spot or none
    image_id_pattern=re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"),  # IMS image ids
    baked_image=False,  # brought images only: see Capability.BAKED_IMAGE
    model_streaming=False,  # not built: see Capability.MODEL_STREAMING
    warm_pool=False,  # not built: see Capability.WARM_POOL
    plot_colour="#7b3fb0",
)

CLOUD_FACTS: Mapping[str, CloudFacts] = {facts.id: facts for facts in (AWS, GCP, ALIBABA, HUAWEI)}
"""Every cloud inferstack knows, by id, in the order the CLI lists them. Keyed by `str`, so that a name not yet
checked (a stack's config, `--cloud`) can be looked up."""
