"""The Pulumi program behind `pulumi up`: stack config → workload → plan → InferenceServer → stack outputs.

`__main__.py` (repo root) runs it for real; `inferstack.preview` runs it under mocks. Everything in the stack
config is checked here, and a mistake raises an InputError naming the config key before any resource exists.

Config keys (namespace `inferstack:`; region from the provider's own key, e.g. `aws:region`):

    cloud               aws | gcp | alibaba | huawei (required)
    workload            the workload spec, inline (structured config)      ┐
    workloadFile        path to a workload YAML/JSON, relative to the project ├ exactly one
    plan / planFile     a plan from `inferstack plan --json`, inline or file ┘
    stage               validation | internal | production: overrides the workload's stage
    allowedCidrs        networks that may call the API (default: the server's own network only)
    apiKey, hubToken    secrets (`pulumi config set --secret`)
    cacheAuthToken      secret: the inference cache's Redis AUTH token, for a workload with `cache:` (not on gcp)
    staticAssets        create the CDN + assets bucket (default true)
    assetsDomain        the domain the CDN serves (required on gcp, alibaba, huawei; optional on aws)
    assetsCertificate   that domain's certificate where the cloud needs one (aws: ACM ARN in us-east-1;
                        huawei: SCM certificate id)
    apiDomain           the domain of a fleet's HTTPS endpoint (required when the plan is a fleet: production)
    apiCertificate      that domain's certificate where the cloud needs one (docs/deploy-<cloud>.md)
    pricesFile          price overrides used when sizing the workload (docs/pricing.md)
    alarmNotification   where a fleet's alarms notify (SNS topic ARN, notification channel, CMS contact group, SMN
                        topic URN; docs/deploy-<cloud>.md); without it alarms show in the console only
    calibrationFile     measured speeds used when sizing the workload: calibrations/<name>.json in the project,
                        written by `inferstack calibrate`; a pin records its sha256 (README, the load-test loop)
    protectServers      protect the servers from deletion and replacement (default: true in production);
                        false lifts the protection in place for a rollout (docs/deploy-<cloud>.md)
    networkId, subnetIds, securityGroupIds, instanceIdentity, modelBucket, assetsBucket, loadBalancerSubnetIds
                        bring your own (then nothing is created for them)
    tags                extra tags on every resource
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pulumi
import yaml
from pulumi.runtime import config as pulumi_config
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inferstack.clouds import Cloud
from inferstack.components.argument_checks import parse_cidrs
from inferstack.components.backend import backend_for
from inferstack.components.inference_server import InferenceServer
from inferstack.components.plan_source import size_workload
from inferstack.components.server_settings import InferenceServerArgs
from inferstack.errors import InputError, Problem, input_error
from inferstack.pin import pinned_path, read_pinned
from inferstack.plan import DeploymentPlan
from inferstack.plan_file import load_plan, read_plan
from inferstack.spec import (
    CalibrationFile,
    Stage,
    WorkloadSpec,
    for_stack,
    load_workload,
    parse_workload,
    problems_from_validation,
)
from inferstack.stack_file import confine_model_configs, project_file

if TYPE_CHECKING:
    from inferstack.sizing.calibration import Calibration, StackCalibration

NAMESPACE = "inferstack"
SERVER_NAME = "server"
_SECRET_KEYS = {"apiKey": "api_key", "hubToken": "hub_token", "cacheAuthToken": "cache_auth_token"}


class StackConfig(BaseModel):
    """The `inferstack:` keys of a stack, as plain values (secrets are read separately)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, use_attribute_docstrings=True)

    cloud: str
    """The cloud to deploy on: aws, gcp, alibaba or huawei."""
    workload: dict[str, Any] | None = None
    """The workload spec, inline."""
    workload_file: str | None = Field(default=None, alias="workloadFile")
    """Path to a workload file, relative to the project directory."""
    plan: dict[str, Any] | None = None
    """A plan from `inferstack plan --json`, inline."""
    plan_file: str | None = Field(default=None, alias="planFile")
    """Path to a plan JSON file from `inferstack plan --json`."""
    stage: Stage | None = None
    """validation, internal or production; overrides the workload's stage."""
    allowed_cidrs: list[str] = Field(default_factory=list, alias="allowedCidrs")
    """Networks that may call the inference API, as CIDR blocks."""
    static_assets: bool = Field(default=True, alias="staticAssets")
    """Create the static-assets bucket and its CDN."""
    assets_domain: str | None = Field(default=None, alias="assetsDomain")
    """The domain the static-assets CDN serves."""
    assets_certificate: str | None = Field(default=None, alias="assetsCertificate")
    """The certificate of assetsDomain in the cloud's certificate service (AWS ACM, Huawei SCM)."""
    api_domain: str | None = Field(default=None, alias="apiDomain")
    """The domain of a fleet's HTTPS endpoint, e.g. api.example.com (point its DNS at loadBalancerAddress)."""
    api_certificate: str | None = Field(default=None, alias="apiCertificate")
    """The certificate of apiDomain in the cloud's certificate service, where the cloud needs one."""
    load_balancer_subnet_ids: list[str] | None = Field(default=None, alias="loadBalancerSubnetIds")
    """With a brought network and a public fleet: public subnets for the load balancer."""
    network_id: str | None = Field(default=None, alias="networkId")
    """Existing network (AWS VPC id)."""
    subnet_ids: list[str] | None = Field(default=None, alias="subnetIds")
    """Existing subnets for the servers."""
    security_group_ids: list[str] | None = Field(default=None, alias="securityGroupIds")
    """Existing security groups."""
    instance_identity: str | None = Field(default=None, alias="instanceIdentity")
    """Existing identity: AWS instance profile name, GCP service account email, Alibaba RAM role, Huawei agency."""
    model_bucket: str | None = Field(default=None, alias="modelBucket")
    """Existing bucket holding the model files."""
    assets_bucket: str | None = Field(default=None, alias="assetsBucket")
    """Existing bucket for static assets."""
    protect_servers: bool | None = Field(default=None, alias="protectServers")
    """Protect the servers from deletion and replacement; default: true in production."""
    tags: dict[str, str] = Field(default_factory=dict)
    """Extra tags on every resource."""
    prices_file: str | None = Field(default=None, alias="pricesFile")
    """Price-override file used when sizing the workload (docs/pricing.md)."""
    alarm_notification: str | None = Field(default=None, alias="alarmNotification")
    """Where a fleet's alarms notify: SNS topic ARN (aws), notification channel projects/P/notificationChannels/N
    (gcp), CloudMonitor contact group name (alibaba), SMN topic URN (huawei); without it alarms only show in the
    console."""
    calibration_file: CalibrationFile | None = Field(default=None, alias="calibrationFile")
    """Measured speeds used when sizing the workload: calibrations/<name>.json in the project, from `inferstack
    calibrate RESULT… --output calibrations/<name>.json`."""


_KNOWN_KEYS = {field.alias or name for name, field in StackConfig.model_fields.items()} | set(_SECRET_KEYS)
_KEY_DOCS = {field.alias or name: field.description for name, field in StackConfig.model_fields.items()
             if field.description}
_SOURCES = ("workload", "workloadFile", "plan", "planFile")


@dataclass(frozen=True)
class StackSettings:
    """A checked stack config: the plan, or the workload to size (with its price overrides), and the
    InferenceServer arguments other than the plan."""

    cloud: Cloud
    plan: DeploymentPlan | None
    workload: WorkloadSpec | None
    prices_file: Path | None
    server_args: InferenceServerArgs
    calibration: Calibration | None = None


@dataclass(frozen=True)
class Deployment:
    plan: DeploymentPlan
    server: InferenceServer
    exports: dict[str, pulumi.Output[Any]]


def read_stack_config(project_dir: Path | None = None) -> StackSettings:
    """Read and check the `inferstack:` stack config; raise InputError before anything is created."""
    project_dir = project_dir or Path.cwd()
    raw = _raw_config()
    unknown = sorted(set(raw) - _KNOWN_KEYS)
    if unknown:
        raise InputError([Problem(f"{NAMESPACE}:{key}", "is not a known config key",
                                  fix=_did_you_mean(key) or f"use one of {', '.join(sorted(_KNOWN_KEYS))}")
                          for key in unknown])
    if "cloud" not in raw:
        raise input_error(f"{NAMESPACE}:cloud", "is not set", fix="pulumi config set inferstack:cloud aws "
                          "(one of aws, gcp, alibaba, huawei)")
    try:
        config = StackConfig.model_validate(raw)
    except ValidationError as error:
        raise InputError([_config_problem(p) for p in problems_from_validation(error, model=StackConfig)]) from None
    backend_for(config.cloud, field=f"{NAMESPACE}:cloud")
    _, cidr_problems = parse_cidrs(config.allowed_cidrs, f"{NAMESPACE}:allowedCidrs")
    if cidr_problems:
        raise InputError(cidr_problems)
    given = [key for key in _SOURCES if key in raw]
    if len(given) != 1:
        raise input_error(f"{NAMESPACE}:workload", "give exactly one of workload, workloadFile, plan, planFile",
                          value=given or None, fix="pulumi config set inferstack:workloadFile workload.yaml")
    plan, workload = _read_source(config, project_dir)
    measured = _stack_calibration(config, project_dir, sizes=workload is not None)
    prices_file = (project_file(project_dir, config.prices_file, f"{NAMESPACE}:pricesFile")
                   if config.prices_file is not None else None)
    if workload is not None:
        region = backend_for(config.cloud).configured_region()
        workload = for_stack(workload, config.cloud, stage=config.stage, region=region)  # type: ignore[arg-type]
        plan, workload = _pinned_plan(workload, project_dir, measured, prices_file)
    return StackSettings(cloud=config.cloud, plan=plan, workload=workload,  # type: ignore[arg-type]
                         prices_file=prices_file, server_args=_server_args(config),
                         calibration=measured.calibration if measured else None)


def deploy(settings: StackSettings) -> Deployment:
    """Size the workload if the stack gave one, create the InferenceServer, and return its stack outputs."""
    plan = settings.plan or size_workload(settings.workload, settings.cloud,  # type: ignore[arg-type]
                                          field=f"{NAMESPACE}:workload", prices_file=settings.prices_file,
                                          calibration=settings.calibration)
    server = InferenceServer(SERVER_NAME, {**settings.server_args, "plan": plan})
    exports = {
        "endpointUrl": server.endpoint_url,
        "loadBalancerAddress": server.load_balancer_address,
        "groupId": server.group_id,
        "endpointUrls": server.endpoint_urls,
        "instanceIds": server.instance_ids,
        "publicIps": server.public_ips,
        "privateIps": server.private_ips,
        "modelBucket": server.model_bucket_name,
        "staticAssetsUrl": server.static_assets_url,
        "staticAssetsPolicy": server.static_assets_policy,
        "firewallIds": server.firewall_ids,
        "identityId": server.identity_id,
        "apiKeyParameter": server.api_key_ref,
        "plan": server.plan_summary,
    }
    return Deployment(plan=server.plan, server=server, exports=exports)


#### Reading ####


def _raw_config() -> dict[str, Any]:
    """Every `inferstack:` key of the stack, structured values decoded (the engine passes them as JSON)."""
    merged = {**pulumi_config.get_config_env(), **pulumi_config.CONFIG.get()}
    raw: dict[str, Any] = {}
    for key, value in merged.items():
        namespace, _, name = key.partition(":")
        if namespace != NAMESPACE or name in _SECRET_KEYS:
            continue
        raw[name] = _decode(value)
    return raw


def _decode(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        decoded = json.loads(value)
    except ValueError:
        return value
    return decoded if isinstance(decoded, dict | list | bool) else value


def _config_problem(problem: Problem) -> Problem:
    """Name the config key as the user wrote it (`inferstack:allowedCidrs[0]`, not `allowedCidrs.0`), with the key's
    own documentation as the fix where the problem has none."""
    head, *rest = problem.field.split(".")
    where = f"{NAMESPACE}:{head}" + "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in rest)
    return Problem(where, problem.message, value=problem.value, fix=problem.fix or _KEY_DOCS.get(head))


def _did_you_mean(key: str) -> str | None:
    close = difflib.get_close_matches(key, sorted(_KNOWN_KEYS), n=1)
    return f"did you mean {NAMESPACE}:{close[0]}?" if close else None


def _read_source(config: StackConfig, project_dir: Path) -> tuple[DeploymentPlan | None, WorkloadSpec | None]:
    """The stack's plan or its workload; every file it names is read from the project only."""
    if config.workload is not None:
        workload = parse_workload(config.workload, source=f"{NAMESPACE}:workload", base_dir=project_dir)
        return None, confine_model_configs(workload, project_dir, f"{NAMESPACE}:workload")
    if config.workload_file is not None:
        key = f"{NAMESPACE}:workloadFile"
        workload = load_workload(project_file(project_dir, config.workload_file, key))
        return None, confine_model_configs(workload, project_dir, key)
    if config.plan_file is not None:
        path = project_file(project_dir, config.plan_file, f"{NAMESPACE}:planFile")
        plan = load_plan(path, config.cloud)  # type: ignore[arg-type]
    else:
        plan = read_plan(config.plan, config.cloud, source=f"{NAMESPACE}:plan")  # type: ignore[arg-type]
    if plan.cloud != config.cloud:
        raise input_error(f"{NAMESPACE}:cloud", f"differs from the plan's cloud ({plan.cloud})", value=config.cloud,
                          fix=f"set inferstack:cloud to {plan.cloud}, or plan for {config.cloud}")
    if config.stage is not None and config.stage != plan.stage:
        raise input_error(f"{NAMESPACE}:stage", f"differs from the plan's stage ({plan.stage})", value=config.stage,
                          fix="re-plan for this stage, or drop inferstack:stage")
    return plan, None


def _stack_calibration(config: StackConfig, project_dir: Path, *, sizes: bool) -> StackCalibration | None:
    """The stack's calibration file, read (None without one); refused for a stack that gives a plan."""
    if config.calibration_file is None:
        return None
    if not sizes:
        raise input_error(f"{NAMESPACE}:calibrationFile", "applies to a workload the stack sizes, and this stack "
                          "gives a plan", value=config.calibration_file,
                          fix="plan with `inferstack plan WORKLOAD --calibration FILE --json`, or drop the key")
    from inferstack.sizing.calibration import read_stack_calibration

    return read_stack_calibration(project_dir, config.calibration_file)


def _pinned_plan(workload: WorkloadSpec, project_dir: Path, calibration: StackCalibration | None,
                 prices_file: Path | None) -> tuple[DeploymentPlan | None, WorkloadSpec | None]:
    """The stack's pinned plan (inferstack.pin), checked against what the stack gives now, when it has one; else the
    workload, sized at this `pulumi up`."""
    stack_file = _stack_config_dir(project_dir) / f"Pulumi.{pulumi.get_stack()}.yaml"
    shown = stack_file.relative_to(project_dir) if stack_file.is_relative_to(project_dir) else stack_file
    path = pinned_path(stack_file)
    if path.is_file():
        return read_pinned(path, workload, stack_file=str(shown), calibration=calibration,
                           prices_file=prices_file), None
    if stack_file.is_file():
        pulumi.log.warn(f"stack {pulumi.get_stack()} sizes its workload at every `pulumi up`, so a catalog or price "
                        f"update can change its servers with nothing in a pull request showing why: pin its plan "
                        f"with `inferstack pin {shown}` and commit {path.name}")
    return None, workload


def _stack_config_dir(project_dir: Path) -> Path:
    """Where the project keeps its stack files: Pulumi.yaml's stackConfigDir, else the project folder."""
    project_file = project_dir / "Pulumi.yaml"
    settings = yaml.safe_load(project_file.read_text(encoding="utf-8")) if project_file.is_file() else None
    folder = settings.get("stackConfigDir") if isinstance(settings, dict) else None
    return project_dir / folder if isinstance(folder, str) else project_dir


def _server_args(config: StackConfig) -> InferenceServerArgs:
    args: dict[str, Any] = {"allowed_cidrs": config.allowed_cidrs, "static_assets": config.static_assets,
                            "tags": config.tags}
    for key in ("network_id", "subnet_ids", "security_group_ids", "instance_identity", "model_bucket",
                "assets_bucket", "assets_domain", "assets_certificate", "protect_servers", "api_domain",
                "api_certificate", "load_balancer_subnet_ids", "alarm_notification"):
        if getattr(config, key) is not None:
            args[key] = getattr(config, key)
    secrets = pulumi.Config(NAMESPACE)
    for config_key, arg in _SECRET_KEYS.items():
        value = secrets.get_secret(config_key)
        if value is not None:
            args[arg] = value
    return args  # type: ignore[return-value]
