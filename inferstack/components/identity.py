"""The server's access: `ServerSecrets` in the cloud's secret store, and the `ServerIdentity` that reads them and the
model.

Both are public components (`inferstack.components`), and children of InferenceServer, which hands them requests it
has already checked (`BackendComponent.from_request`).

The components are also a Pulumi package for other languages (`provider/`): the schema is read from the `*Args`
TypedDicts and the output annotations as live types, so this module does not use `from __future__ import
annotations` (see inference_server.py).
"""

import re
from collections.abc import Mapping, Sequence

import pulumi
from pydantic import with_config
from typing_extensions import NotRequired, TypedDict

from inferstack.bootstrap.render import BUNDLE_PREFIX
from inferstack.components.argument_checks import ARGS_CONFIG, validate_args
from inferstack.components.backend import BackendComponent, CloudBackend, backend_for
from inferstack.components.capabilities import Capability
from inferstack.components.contract import IdentityRequest, SecretsRequest
from inferstack.components.naming import resource_tags
from inferstack.errors import InputError, input_error
from inferstack.plan import BUCKET_PREFIX_PATTERN

#### Secrets ####


@with_config(ARGS_CONFIG)
class ServerSecretsArgs(TypedDict):
    cloud: str
    """Cloud whose secret store keeps the secrets: aws, gcp, alibaba or huawei."""
    api_key: NotRequired[pulumi.Input[str]]
    """Endpoint API key; stored encrypted, read by the server at boot."""
    hub_token: NotRequired[pulumi.Input[str]]
    """Model-hub token; stored encrypted, read by the server at boot."""
    cache_auth: NotRequired[pulumi.Input[str]]
    """The inference cache's Redis AUTH token; stored encrypted, read by the gateway at each start."""
    tags: NotRequired[Mapping[str, str]]
    """Tags merged over the defaults (project, stack, managed-by)."""


class ServerSecrets(BackendComponent[SecretsRequest]):
    """Puts the server's secrets in the cloud's secret store; outputs only references, never values."""

    api_key_ref: pulumi.Output[str | None]
    """Where the API key is stored (AWS SSM parameter name), never the key; None without an API key."""
    hub_token_ref: pulumi.Output[str | None]
    """Where the model-hub token is stored, never the token; None without a token."""
    cache_auth_ref: pulumi.Output[str | None]
    """Where the inference cache's AUTH token is stored, never the token; None without a cache."""
    secret_ids: pulumi.Output[list[str]]
    """The stored secrets' ids, for ServerIdentity.secret_ids."""

    def __init__(self, name: str, args: ServerSecretsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        checked = validate_args(ServerSecretsArgs, args, name)
        backend = backend_for(checked["cloud"], field=f"{name}.cloud")
        problem = backend.require(Capability.SECRET_STORE, field=f"{name}.cloud", fix="keep the secrets elsewhere")
        if problem:
            raise InputError([problem])
        self._create(name, backend, SecretsRequest(values=secret_values(checked),
                                                   tags=resource_tags(checked.get("tags", {}))), opts)

    def _create(self, name: str, backend: CloudBackend, request: SecretsRequest,
                opts: pulumi.ResourceOptions | None) -> None:
        super().__init__("inferstack:index:ServerSecrets", name, None, opts)
        result = backend.create_secrets(self, name, request)
        self.grant_ids = result.grant_ids
        self.api_key_ref = pulumi.Output.from_input(result.refs.get("api-key"))
        self.hub_token_ref = pulumi.Output.from_input(result.refs.get("hub-token"))
        self.cache_auth_ref = pulumi.Output.from_input(result.refs.get("cache-auth"))
        self.secret_ids = pulumi.Output.all(*result.grant_ids)
        self.register_outputs({"api_key_ref": self.api_key_ref, "hub_token_ref": self.hub_token_ref,
                               "cache_auth_ref": self.cache_auth_ref, "secret_ids": self.secret_ids})


# Each secret's name in the store, by its argument, in the order the backend stores them.
_SECRET_NAMES = {"api_key": "api-key", "hub_token": "hub-token", "cache_auth": "cache-auth"}


def secret_values(given: Mapping[str, pulumi.Input[str]]) -> dict[str, pulumi.Output[str]]:
    """The secrets `given` by argument name (api_key, hub_token, cache_auth), as Pulumi secrets by their name in the
    store."""
    return {ref: pulumi.Output.secret(given[key]) for key, ref in _SECRET_NAMES.items() if key in given}


#### Identity ####


@with_config(ARGS_CONFIG)
class ServerIdentityArgs(TypedDict):
    cloud: str
    """Cloud to create the identity on: aws, gcp, alibaba or huawei."""
    model_bucket: pulumi.Input[str]
    """Bucket holding the model files."""
    model_prefix: str
    """The only prefix the server may read (ends in '/')."""
    secret_ids: NotRequired[Sequence[pulumi.Input[str]]]
    """Secrets the server may read (from ServerSecrets.secret_ids)."""
    telemetry_grants: NotRequired[Sequence[pulumi.Input[str]]]
    """Where the server's monitoring agent may write its metrics and logs, in the cloud's terms (AWS: the CloudWatch
    Logs group ARN and the metric namespace); empty: nowhere."""
    tags: NotRequired[Mapping[str, str]]
    """Tags merged over the defaults (project, stack, managed-by)."""


class ServerIdentity(BackendComponent[IdentityRequest]):
    """The server's cloud identity: read the model prefix of one bucket, read its own secrets, managed shell."""

    identity_id: pulumi.Output[str]
    """The identity's cloud id (AWS role ARN)."""
    attachment: pulumi.Output[str]
    """What a server attaches to take this identity (AWS instance profile name)."""

    def __init__(self, name: str, args: ServerIdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        checked = validate_args(ServerIdentityArgs, args, name)
        backend = backend_for(checked["cloud"], field=f"{name}.cloud")
        prefix = checked["model_prefix"]
        if not re.fullmatch(BUCKET_PREFIX_PATTERN, prefix):  # written into policies and IAM conditions
            raise input_error(f"{name}.model_prefix", "must be a relative folder ending in '/': lower-case letters, "
                              "digits, '.', '_' and '-' in each of up to 8 parts", value=prefix,
                              fix="use the plan's model.bucket_prefix, e.g. models/llama-3.1-8b/bf16/")
        self._create(name, backend, identity_request(
            model_bucket=checked["model_bucket"], model_prefix=prefix, secret_ids=checked.get("secret_ids", ()),
            telemetry_grants=checked.get("telemetry_grants", ()), tags=resource_tags(checked.get("tags", {}))), opts)

    def _create(self, name: str, backend: CloudBackend, request: IdentityRequest,
                opts: pulumi.ResourceOptions | None) -> None:
        super().__init__("inferstack:index:ServerIdentity", name, None, opts)
        result = backend.create_identity(self, name, request)
        self.identity_id = result.identity_id
        self.attachment = result.attachment
        # The streaming runtime's own role (InferenceServer's bootstrap names it); not an output of the component.
        self.model_reader_id = result.model_reader_id
        self.register_outputs({"identity_id": self.identity_id, "attachment": self.attachment})


def identity_request(*, model_bucket: pulumi.Input[str], model_prefix: str, secret_ids: Sequence[pulumi.Input[str]],
                     telemetry_grants: Sequence[pulumi.Input[str]], tags: Mapping[str, str],
                     model_reader: bool = False) -> IdentityRequest:
    """The request for an identity with a checked `model_prefix`: it may also get its boot bundles, and, for a
    runtime that streams the weights (`model_reader`), a reader role of the prefix for the runtime alone."""
    return IdentityRequest(
        model_bucket=model_bucket, model_prefix=model_prefix, bundle_prefix=BUNDLE_PREFIX,
        secret_ids=[pulumi.Output.from_input(s) for s in secret_ids], tags=tags,
        telemetry_grants=[pulumi.Output.from_input(g) for g in telemetry_grants], model_reader=model_reader)
