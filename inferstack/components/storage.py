"""The storage components: the `ModelStore` buckets and `StaticAssets` (a private bucket behind an HTTPS CDN).

Both are public components (`inferstack.components`), and children of InferenceServer, which hands them requests it
has already checked (`BackendComponent.from_request`); `static_assets_problems` is the one check of a CDN's domain and
certificate, which both StaticAssets and InferenceServer run.

The components are also a Pulumi package for other languages (`provider/`): the schema is read from the `*Args`
TypedDicts and the output annotations as live types, so this module does not use `from __future__ import
annotations` (see inference_server.py).
"""

from collections.abc import Mapping

import pulumi
from pydantic import with_config
from typing_extensions import NotRequired, TypedDict

from inferstack.components.argument_checks import ARGS_CONFIG, domain_problem, validate_args
from inferstack.components.backend import BackendComponent, CloudBackend, backend_for
from inferstack.components.capabilities import Capability
from inferstack.components.contract import ModelStoreRequest, StaticAssetsRequest
from inferstack.components.naming import resource_tags
from inferstack.errors import InputError, Problem

#### Model store ####


@with_config(ARGS_CONFIG)
class ModelStoreArgs(TypedDict):
    cloud: str
    """Cloud to create the buckets on: aws, gcp, alibaba or huawei."""
    force_destroy: NotRequired[bool]
    """Let `pulumi destroy` delete buckets that still hold objects (default false; dev stacks only)."""
    tags: NotRequired[Mapping[str, str]]
    """Tags merged over the defaults (project, stack, managed-by)."""


class ModelStore(BackendComponent[ModelStoreRequest]):
    """Private, encrypted, versioned buckets: models, user data (uploads/ and results/), and access logs.

    Versioning lets you roll a model back to a previous version; noncurrent versions expire after a while.
    The three buckets are separate so that each has its own policy and lifecycle.
    """

    model_bucket_name: pulumi.Output[str]
    """Bucket for the model files, which the server reads under the plan's prefix."""
    data_bucket_name: pulumi.Output[str]
    """Bucket for user uploads (uploads/) and results (results/); the server gets no access to it by default."""
    logs_bucket_name: pulumi.Output[str]
    """Bucket that receives the other buckets' access logs."""

    def __init__(self, name: str, args: ModelStoreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        checked = validate_args(ModelStoreArgs, args, name)
        backend = backend_for(checked["cloud"], field=f"{name}.cloud")
        self._create(name, backend, ModelStoreRequest(
            force_destroy=checked.get("force_destroy", False), tags=resource_tags(checked.get("tags", {}))), opts)

    def _create(self, name: str, backend: CloudBackend, request: ModelStoreRequest,
                opts: pulumi.ResourceOptions | None) -> None:
        super().__init__("inferstack:index:ModelStore", name, None, opts)
        result = backend.create_model_store(self, name, request)
        self.model_bucket_name = result.model_bucket
        self.data_bucket_name = result.data_bucket
        self.logs_bucket_name = result.logs_bucket
        self.register_outputs({"model_bucket_name": self.model_bucket_name, "data_bucket_name": self.data_bucket_name,
                               "logs_bucket_name": self.logs_bucket_name})


#### Static assets ####


@with_config(ARGS_CONFIG)
class StaticAssetsArgs(TypedDict):
    cloud: str
    """Cloud to create the bucket and CDN on: aws, gcp, alibaba or huawei."""
    bucket: NotRequired[pulumi.Input[str]]
    """Existing bucket to serve instead of creating one; nothing is created or changed on it."""
    access_logs_bucket: NotRequired[pulumi.Input[str]]
    """Bucket that receives the asset bucket's access logs (a created bucket only)."""
    domain: NotRequired[str]
    """Domain the CDN serves, e.g. assets.example.com (you point its DNS at the CDN). Required where the CDN has no
    hostname of its own (Capability.CDN_DEFAULT_HOSTNAME: every cloud but AWS)."""
    certificate: NotRequired[str]
    """The domain's certificate in the cloud's certificate service, where the cloud needs one with a domain
    (`CloudBackend.assets_certificate`: an ACM ARN on AWS, an SCM id on Huawei Cloud)."""
    force_destroy: NotRequired[bool]
    """Let `pulumi destroy` delete a created bucket that still holds objects (default false; dev stacks only)."""
    tags: NotRequired[Mapping[str, str]]
    """Tags merged over the defaults (project, stack, managed-by)."""


class StaticAssets(BackendComponent[StaticAssetsRequest]):
    """A private bucket behind an HTTPS-only CDN that alone can read it, on the CDN's hostname or your domain."""

    bucket_name: pulumi.Output[str]
    """The bucket the CDN serves (created, or the one brought)."""
    url: pulumi.Output[str]
    """HTTPS URL of the CDN."""
    required_bucket_policy: pulumi.Output[str | None]
    """For a brought bucket: the policy statement its owner must add so that the CDN can read it."""

    def __init__(self, name: str, args: StaticAssetsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        checked = validate_args(StaticAssetsArgs, args, name)
        backend = backend_for(checked["cloud"], field=f"{name}.cloud")
        problem = backend.require(Capability.PRIVATE_CDN_ORIGIN, field=f"{name}.cloud",
                                  fix="serve static files from elsewhere")
        problems = [problem] if problem else []
        problems += static_assets_problems(backend, checked.get("domain"), checked.get("certificate"),
                                           domain_field=f"{name}.domain", certificate_field=f"{name}.certificate")
        if problems:
            raise InputError(problems)
        self._create(name, backend, StaticAssetsRequest(
            existing_bucket=checked.get("bucket"), logs_bucket=checked.get("access_logs_bucket"),
            domain=checked.get("domain"), certificate=checked.get("certificate"),
            force_destroy=checked.get("force_destroy", False), tags=resource_tags(checked.get("tags", {}))), opts)

    def _create(self, name: str, backend: CloudBackend, request: StaticAssetsRequest,
                opts: pulumi.ResourceOptions | None) -> None:
        super().__init__("inferstack:index:StaticAssets", name, None, opts)
        result = backend.create_static_assets(self, name, request)
        self.bucket_name = result.bucket
        self.url = result.url
        self.required_bucket_policy = pulumi.Output.from_input(result.required_bucket_policy)
        self.register_outputs({"bucket_name": self.bucket_name, "url": self.url,
                               "required_bucket_policy": self.required_bucket_policy})


def static_assets_problems(backend: CloudBackend, domain: str | None, certificate: str | None, *,
                           domain_field: str, certificate_field: str) -> list[Problem]:
    """What would keep the CDN from serving: a domain that is malformed, or missing where the CDN has no hostname
    of its own; a certificate that is malformed, missing where the cloud needs one, or given where it does not."""
    rule, cloud = backend.assets_certificate, backend.display_name
    certificate_arg = certificate_field.rsplit(".", 1)[-1]
    problems: list[Problem | None] = []
    hostname = backend.support(Capability.CDN_DEFAULT_HOSTNAME)
    if domain is not None:
        problems.append(domain_problem(domain_field, domain))
    elif not hostname.available:
        with_certificate = f", with {certificate_arg} ({rule.kind})" if rule else ""
        problems.append(Problem(domain_field, f"is required on {cloud}: {hostname.note}",
                                fix=f"give a domain whose DNS you control{with_certificate}, e.g. assets.example.com "
                                "(stack config inferstack:assetsDomain), or leave static assets out (static_assets "
                                "false)"))
    if certificate is None:
        if domain is not None and rule is not None:
            problems.append(Problem(certificate_field, f"is required with a domain on {cloud}: {rule.kind}",
                                    fix=f"give one such as {rule.example} (stack config inferstack:assetsCertificate)"))
    elif domain is None:
        problems.append(Problem(certificate_field, "is given without a domain", value=certificate,
                                fix="give the domain it covers too, or leave the certificate out"))
    elif rule is None:
        problems.append(Problem(certificate_field, f"is not used on {cloud}: the cloud issues the domain's "
                                "certificate itself", value=certificate, fix="leave the certificate out"))
    else:
        problems.append(rule.problem(certificate_field, certificate))
    return [problem for problem in problems if problem]
