"""What a cloud can do, stated as data with reasons, and the forms of the values a user names in it.

Each backend states every `Capability` with a `Support`: how the cloud does it, or why it cannot (the components
check them before anything is created, and the guides list them). `ValueRule`, `CertificateRule` and `BroughtIds`
are the forms of what a user names in the cloud (a certificate, a brought network, subnet, firewall or identity),
checked so that a malformed or hostile value never reaches a resource.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from inferstack.clouds import CLOUD_FACTS, Cloud
from inferstack.errors import Problem


class Capability(str, Enum):
    """Security and operations features whose availability differs between clouds."""

    METADATA_HARDENING = "metadata-hardening"
    """The instance metadata service demands session tokens, so an SSRF cannot read the server's credentials."""
    BUCKET_PUBLIC_ACCESS_BLOCK = "bucket-public-access-block"
    """A bucket setting that rejects public ACLs and policies, whatever is written later; with it no ACL can open a
    bucket (ACLs are off, or public ones are ignored)."""
    TLS_ONLY_STORAGE = "tls-only-storage"
    """Each bucket refuses requests made over plain HTTP, by a setting or policy of its own."""
    PRIVATE_CDN_ORIGIN = "private-cdn-origin"
    """The CDN reads a private bucket with its own identity; the bucket never becomes public."""
    CDN_DEFAULT_HOSTNAME = "cdn-default-hostname"
    """The CDN serves HTTPS on a hostname of its own, so static assets need no domain (`assets_domain`)."""
    PREFIX_SCOPED_GRANTS = "prefix-scoped-grants"
    """The server's identity can be limited to one prefix of one bucket."""
    MANAGED_SHELL = "managed-shell"
    """Operators get a shell through the cloud's API, so no SSH port is opened."""
    SECRET_STORE = "secret-store"
    """Secrets live in a managed store and are read by the server at boot, never placed in user data."""
    SECRET_SCOPED_GRANTS = "secret-scoped-grants"
    """The server's identity can be limited to reading its own secrets, each named in the grant."""
    TERMINATION_PROTECTION = "termination-protection"
    """Protected servers (production, by default) carry a cloud flag that refuses their deletion by any API call
    until it is lifted; every cloud's protected servers also carry Pulumi's `protect` (`server_options`)."""
    DRIVER_READY_IMAGE = "driver-ready-image"
    """A GPU image with the NVIDIA driver preinstalled, looked up at deploy time."""
    LOCAL_NVME_CACHE = "local-nvme-cache"
    """Instance-local NVMe is used as the model cache where the machine type has it."""
    SPOT_CAPACITY = "spot-capacity"
    """Servers can run on spot/preemptible capacity when the plan allows it."""
    SPOT_ABOVE_FLOOR = "spot-above-floor"
    """A production fleet keeps its SLO floor on on-demand servers and adds spot ones above it, falling back to
    equivalent instance types where one type's capacity is short (`DeploymentPlan.spot_above_floor`)."""
    MANAGED_FLEET = "managed-fleet"
    """A plan with a fleet runs as the cloud's managed group, built from a template, spread over the plan's zones and
    replaced when its health check fails after the plan's grace period; its servers have no public address."""
    LOAD_BALANCER_TLS = "load-balancer-tls"
    """One HTTPS endpoint (TLS 1.2 or newer) on the cloud's load balancer in front of the fleet, for the API domain;
    plain HTTP only redirects; health checks on the serving health path; timeouts that fit streamed answers."""
    REQUEST_AUTOSCALING = "request-autoscaling"
    """The fleet scales on requests per server, on the cloud's native metric, holding the plan's target, with a
    scale-out warm-up of the plan's cold start and a slow scale-in."""
    MANAGED_CACHE = "managed-cache"
    """A workload's `cache:` gets the cloud's managed Redis in the deployment's network: TLS in transit, an AUTH token
    kept in the secret store, reachable from the servers only, never from a public address."""
    BAKED_IMAGE = "baked-image"
    """`startup.image: baked` builds the servers' image in the stack: driver, container runtime, the pinned runtime
    image and the gateway's packages installed by the boot's own phases, so a new server starts at its model sync.
    Where missing, only a brought image (`startup.image: {cloud: id}`) skips those installs."""
    MODEL_STREAMING = "model-streaming"
    """`startup.model_loading: stream`: vLLM streams the weights from the bucket into GPU memory with credentials of
    its own, limited to reading the model, while the server's sync verifies them beside it."""
    WARM_POOL = "warm-pool"
    """`startup.warm_pool: true`: the fleet's burst kept as prepared, stopped servers that scale-out starts instead of
    launching new ones, and scale-in returns to (`DeploymentPlan.startup.warm_pool`)."""
    MULTI_NODE_REPLICAS = "multi-node-replicas"
    """A replica across servers (`DeploymentPlan.replica_nodes`): its servers placed close, one Ray head and its
    workers, the load balancer on heads only, replaced as one; firewall rules for Ray and NCCL among its own servers."""
    ROLLING_UPDATE = "rolling-update"
    """A new template (model revision, plan or bootstrap) replaces the fleet's running servers by the plan's rollout:
    `surge` new servers at a time above the group's size, an old one removed only once a new one passes the load
    balancer's health check, never fewer serving than the plan needs (`DeploymentPlan.rolling_update`)."""


@dataclass(frozen=True)
class Support:
    """Whether a cloud has a capability, and a sentence saying how it is done or why it is missing."""

    available: bool
    note: str


def supported(how: str) -> Support:
    return Support(True, how)


def unsupported(why: str) -> Support:
    return Support(False, why)


def driver_ready_image(cloud: Cloud, note: str) -> Support:
    """Whether the cloud's GPU servers boot with the NVIDIA driver is one fact, kept in the cloud's registry entry,
    which the cold-start estimate reads too (`CloudFacts.driver_ready_image`); the cloud's note says how, or why
    not."""
    return Support(CLOUD_FACTS[cloud].driver_ready_image, note)


def rolling_update(cloud: Cloud, note: str) -> Support:
    """Whether the cloud's group rolls its servers over to a new template is one fact, kept in the cloud's registry
    entry, which the plan and `inferstack diff` read too (`CloudFacts.rolling_update`); the note says how, or why
    not."""
    return Support(CLOUD_FACTS[cloud].rolling_update, note)


def spot_above_floor(cloud: Cloud, note: str) -> Support:
    """Whether the cloud's group keeps an on-demand floor under spot servers is one fact, kept in the cloud's registry
    entry, which the planner reads too (`CloudFacts.on_demand_floor`); the note says how, or why not."""
    return Support(CLOUD_FACTS[cloud].on_demand_floor, note)


def baked_image(cloud: Cloud, note: str) -> Support:
    """Whether the components build the cloud's server image is one fact (`CloudFacts.baked_image`), which the
    planner reads too; the note says how, or why not."""
    return Support(CLOUD_FACTS[cloud].baked_image, note)


def model_streaming(cloud: Cloud, note: str) -> Support:
    """Whether the runtime may stream the weights from the cloud's bucket is one fact (`CloudFacts.model_streaming`),
    which the planner reads too; the note says how, or why not."""
    return Support(CLOUD_FACTS[cloud].model_streaming, note)


def warm_pool(cloud: Cloud, note: str) -> Support:
    """Whether the cloud's group keeps prepared, stopped servers is one fact (`CloudFacts.warm_pool`), which the
    planner reads too; the note says how, or why not."""
    return Support(CLOUD_FACTS[cloud].warm_pool, note)


@dataclass(frozen=True)
class ValueRule:
    """The form of a value the user names in the cloud (a certificate, a brought network or identity): checked before
    anything is created, so that a malformed or hostile value never reaches a resource."""

    kind: str
    """What the value is, e.g. "the ARN of an ACM certificate in us-east-1 that covers the domain"."""
    pattern: str
    """A regular expression the whole value matches."""
    example: str

    def problem(self, field: str, value: str) -> Problem | None:
        if re.fullmatch(self.pattern, value):
            return None
        return Problem(field, f"is not {self.kind}", value=value, fix=f"give one such as {self.example}")


@dataclass(frozen=True)
class CertificateRule(ValueRule):
    """What `assets_certificate` names on a cloud whose CDN serves your domain with a certificate you hold."""

    issued_without: bool = False
    """The cloud issues a certificate for the domain when none is given (so this one is optional)."""


@dataclass(frozen=True)
class BroughtIds:
    """What each id brought instead of a created resource names on a cloud (component argument in brackets)."""

    network: ValueRule
    """The network (network_id)."""
    subnet: ValueRule
    """A subnet (subnet_ids, load_balancer_subnet_ids)."""
    firewall: ValueRule
    """What a server attaches instead of the created Firewall (security_group_ids)."""
    identity: ValueRule
    """What a server attaches instead of the created identity (instance_identity)."""

    def problems(self, checked: Mapping[str, Any], prefix: str) -> list[Problem]:
        """Each brought id given as text that is not of its cloud's form (Outputs of the user's own resources are the
        cloud's ids already)."""
        rules = {"network_id": self.network, "subnet_ids": self.subnet, "load_balancer_subnet_ids": self.subnet,
                 "security_group_ids": self.firewall, "instance_identity": self.identity}
        problems: list[Problem | None] = []
        for key, rule in rules.items():
            value = checked.get(key)
            values = value if isinstance(value, (list, tuple)) else [value]
            problems += [rule.problem(f"{prefix}.{key}", item) for item in values if isinstance(item, str)]
        return [problem for problem in problems if problem]
