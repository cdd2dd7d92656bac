"""What a server's bootstrap needs beyond its plan: the deploy-time options (`BootstrapOptions`), checked on arrival.

Where the model and the secrets live, the cache's endpoint, the telemetry target and the server group: facts the
plan does not know. Every value is pattern-checked here, before any of it reaches a boot script; the bucket's name is
checked again against its cloud's own grammar once the cloud is known (`bucket_problem`).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from inferstack.bootstrap.files.cloud_access import ROLE_ARN_PATTERN  # the server's own check is the one source
from inferstack.bootstrap.gateway import CacheEndpoint, ServerGroup
from inferstack.bootstrap.telemetry import TelemetryTarget
from inferstack.clouds import CLOUD_FACTS, Cloud
from inferstack.errors import Problem
from inferstack.plan import MAX_NODES_PER_REPLICA
from inferstack.spec import REGION_PATTERN

InstallMode = Literal["auto", "container", "native"]

# Names as the four clouds' stores allow them (SSM parameter paths, Secret Manager ids or resource names, KMS and
# CSMS secret names), never starting with a dash (they are command-line words on the server).
SECRET_REF_PATTERN = r"^[A-Za-z0-9/_][A-Za-z0-9/_.@+=-]{0,254}$"
# HTTPS anywhere; plain HTTP only to this machine's loopback (test servers): a token is never sent in clear.
ENDPOINT_PATTERN = (r"^(https://[a-z0-9.-]+|http://(127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}|localhost|\[::1\]))"
                    r"(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?$")
# Any cloud's bucket (the cloud's own grammar is checked by `bucket_problem` once the cloud is known).
ANY_BUCKET_PATTERN = r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$"

SecretRef = Annotated[str, StringConstraints(pattern=SECRET_REF_PATTERN)]
Endpoint = Annotated[str, StringConstraints(pattern=ENDPOINT_PATTERN)]


def bucket_problem(cloud: Cloud, bucket: str, field: str) -> Problem | None:
    """A Problem when `bucket` is not a bucket name on `cloud` (the grammar the server's own code checks too)."""
    rule = CLOUD_FACTS[cloud].bucket_name_pattern
    if re.fullmatch(rule, bucket):
        return None
    return Problem(field, f"is not a bucket name that {cloud} accepts", value=bucket,
                   fix="give the bucket's name alone (3-63 lowercase letters, digits and hyphens; no scheme, "
                       "host, path or credentials)")


# A private IPv4 address as the clouds give their servers (dotted decimal, no leading zeros): a word in unit files.
IPV4_PATTERN = r"^(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3}$"
IPv4 = Annotated[str, StringConstraints(pattern=IPV4_PATTERN)]


class ReplicaMembers(BaseModel):
    """The private addresses of one replica's servers, for a plan whose replica spans servers (`bootstrap/replica.py`):
    the components give each member a fixed address, so that each server knows its head and its peers at boot."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    head: IPv4 = Field(description="The head's address: the Ray head, vLLM and the gateway run there.")
    workers: list[IPv4] = Field(min_length=1, max_length=MAX_NODES_PER_REPLICA - 1,
                                description="The workers' addresses: a Ray worker each.")


class BootstrapOptions(BaseModel):
    """Deploy-time facts the plan does not know: where the model and the secrets live."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_bucket: str = Field(pattern=ANY_BUCKET_PATTERN,
                              description="Bucket that holds the model files under plan.model.bucket_prefix.")
    region: str = Field(pattern=REGION_PATTERN, description="Cloud region of the bucket and the secret store.")
    api_key_secret: SecretRef | None = Field(
        default=None,
        description="Reference to the endpoint API key in the cloud's secret store (SSM parameter name, GCP secret id, "
                    "Alibaba KMS secret name, Huawei CSMS secret name); None serves without an API key.",
    )
    hub_token_secret: SecretRef | None = Field(
        default=None,
        description="Reference to a Hugging Face Hub token in the same store, fetched with the API key at each "
                    "service start and given to the runtime as HF_TOKEN (vLLM and llama.cpp use it for files they "
                    "download from the hub; Triton ignores it). None: no token.",
    )
    install_mode: InstallMode = Field(
        default="auto",
        description="container (Docker + NVIDIA Container Toolkit), native (distro packages / venv), or auto (per "
                    "runtime).",
    )
    storage_endpoint: Endpoint | None = Field(
        default=None,
        description="Object-storage endpoint override (private endpoints; the loopback server in tests).",
    )
    secret_endpoint: Endpoint | None = Field(
        default=None,
        description="Secret-store endpoint override (VPC endpoints; the loopback server in tests).",
    )
    metadata_endpoint: Endpoint | None = Field(
        default=None,
        description="Instance-metadata endpoint override (tests); None uses the cloud's link-local metadata "
                    "server.",
    )
    cache: CacheEndpoint | None = Field(
        default=None,
        description="The deployment's managed Redis, for a plan with a cache: the gateway keeps deterministic answers "
                    "there (TLS, AUTH token fetched from the secret store at each start). None: no cache.",
    )
    telemetry: TelemetryTarget | None = Field(
        default=None,
        description="Where the cloud's monitoring agent sends the server's metrics and logs "
                    "(`bootstrap.telemetry`). None: no agent is installed.",
    )
    model_reader_role: str | None = Field(
        default=None, pattern=ROLE_ARN_PATTERN,
        description="AWS, a plan whose runtime streams the weights (`plan.startup.model_loading: stream`): the ARN of "
                    "the role that may only read the model's prefix, which the server assumes at each start of the "
                    "runtime to hand the runtime credentials of its own (never the instance's). None otherwise.",
    )
    replica: ReplicaMembers | None = Field(
        default=None,
        description="A plan whose replica spans servers (`plan.replica_nodes`): the addresses of its servers, head "
                    "first. None otherwise.")
    group: ServerGroup = Field(
        default="main",
        description="The server group this bootstrap is for: `main`, or `canary` for the canary's group beside it. "
                    "The cache keys each group's answers apart: a canary's answer is never served by the main group.",
    )
