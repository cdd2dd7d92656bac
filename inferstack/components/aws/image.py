"""A baked image (`plan.startup.image == "baked"`): EC2 Image Builder builds an AMI from the image servers boot by
default (servers.vendor_image_id: the DLAMI for GPUs, Ubuntu for CPUs) with what a server would otherwise install at
its first boot, so that a new server starts at its model sync.

What is installed is the boot script's own phases `driver`, `runtime` (Docker, the NVIDIA Container Toolkit, the
pinned runtime image pulled) and `gateway` (nginx), run by the server's own boot.sh (`boot.sh --phase NAME`), never
a second copy of its install logic. How it reaches the build instance: a server's boot.sh comes in its bundle, which
the user data names; the bundle's key changes with every plan (model, settings), and an image built from it would
be rebuilt with each. So boot.sh alone is stored beside the bundles, under its own sha256 (`boot_script_key`), and
the build instance downloads it (S3Download: boot.sh is larger than the 16,000 characters a component document may
hold inline) and checks its sha256; the settings the three phases read (`INSTALL_SETTINGS`, from the server's own
bootstrap.env) are written by the document itself. A new image is built only when one of those changes, or the
parent image does (`recipe_version`).

The build instance: the plan's instance type (the driver phase must see the GPU it serves), in the servers' first
subnet (a created network's are private, with NAT egress) with the servers' security groups, IMDSv2 and hop limit 1
as servers have, an encrypted gp3 root of the plan's disk, terminated on failure, and an instance profile that may
do what Image Builder and Session Manager need and read the one boot script object. After the phases it writes
`IMAGE_MANIFEST` (`manifest_commands`), which the boot can check.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import yaml

from inferstack.bootstrap.render import BUNDLE_PREFIX, CONFIG_DIR, shipped_copy
from inferstack.components.aws.identity import SESSION_MANAGER_ACTIONS, instance_role
from inferstack.components.aws.lookups import partition
from inferstack.components.aws.servers import (
    METADATA_HOP_LIMIT,
    ServerImage,
    image_facts,
    use_baked_image,
    vendor_image_id,
)
from inferstack.components.contract import StrOutput
from inferstack.components.naming import child_options
from inferstack.plan import DeploymentPlan

BUILD_PHASES = ("driver", "runtime", "gateway")
"""The boot phases an image holds; the others (metadata firewall, model sync, service, load) run at every boot."""
INSTALL_SETTINGS = (
    "DEVICE", "INSTALL_MODE", "RUNTIME", "RUNTIME_UNITS", "RUNTIME_PORTS", "PORT", "RUNTIME_USER", "RUNTIME_HOME",
    "NVIDIA_DRIVER_BRANCH", "NVIDIA_CONTAINER_TOOLKIT_VERSION", "DOCKER_VERSION_PIN", "RUNTIME_IMAGE",
    "PIP_REQUIREMENT", "PIP_DISTRIBUTION", "PIP_VERSION", "APT_PACKAGES", "GATEWAY_APT_PACKAGES")
"""The settings boot.sh reads when it starts (RUNTIME_UNITS, RUNTIME_PORTS) and in BUILD_PHASES: what an image is
built from, with boot.sh and the parent image. The others (model, bucket, bundle) are each server's own."""
IMAGE_MANIFEST = f"{CONFIG_DIR}/image.json"
IMAGE_MANIFEST_FORMAT = "inferstack-image/1"
BUILD_DIR = "/var/tmp/inferstack-image"
"""The build's scratch on the build instance, removed before the image is taken."""
GATEWAY_CONFIG = f"{CONFIG_DIR}/gateway.conf"
"""boot.sh's gateway phase checks that the bundle's configuration is there; an image carries none (each server's
bundle brings its own), so the build places an empty one for the check and removes it."""
COMPONENT_DATA_LIMIT = 16_000
"""Image Builder CreateComponent: inline `data` is at most 16,000 characters (API reference, CreateComponent)."""
REBOOT_REQUESTED = 100  # boot.sh: a phase that needs a reboot (a driver installed but not loaded) exits with it
TOE_REBOOT = 194
"""AWSTOE ExecuteBash: exit code 194 reboots the build instance and runs the step again (AWSTOE action modules)."""
STRICT = "set -euo pipefail"
"""First in each ExecuteBash step (its commands run as one script): a failed command fails the step."""
BUILD_TIMEOUT = "4h"
"""Pulling a runtime image of 10-20 GB and snapshotting the disk take long; the provider's default is 60 minutes."""
MANAGED_POLICIES = ("EC2InstanceProfileForImageBuilder",)
"""What the build instance's role needs of AWS's own policies (Image Builder User Guide, "Prerequisites: IAM"): the
Image Builder agent's calls. Its guide pairs it with AmazonSSMManagedInstanceCore, by which Systems Manager runs the
component; that policy also allows ssm:GetParameter(s) on every parameter, which would let the build instance (it
runs downloaded installers) read the stack's SecureStrings: its agent's actions are granted inline instead
(SYSTEMS_MANAGER_AGENT_ACTIONS)."""
SYSTEMS_MANAGER_AGENT_ACTIONS = (*SESSION_MANAGER_ACTIONS, "ec2messages:AcknowledgeMessage",
                                 "ec2messages:DeleteMessage", "ec2messages:FailMessage", "ec2messages:GetEndpoint",
                                 "ec2messages:GetMessages", "ec2messages:SendReply")
"""The Systems Manager agent's own calls in AmazonSSMManagedInstanceCore (AWS managed policy reference, v2): taking
and answering Run Command's messages (ec2messages) and registering (the servers' SESSION_MANAGER_ACTIONS), without
its parameter reads, documents, associations and inventory. Not tried with a real Image Builder build."""


@dataclass(frozen=True)
class ImageBuild:
    """What a baked image is built from and where: the plan, the servers' network and their rendered user data."""

    plan: DeploymentPlan
    subnet_id: pulumi.Input[str]
    """A subnet with egress (the servers' first: a created network's are private, with NAT)."""
    firewall_ids: Sequence[pulumi.Input[str]]
    user_data: StrOutput
    """The servers' cloud-config (rendered, not encoded): its bootstrap.env gives the bucket and INSTALL_SETTINGS."""
    tags: Mapping[str, str]


#### The image ####


def bake(parent: pulumi.Resource, name: str, build: ImageBuild) -> ServerImage:
    """Builds the plan's image and registers it for the plan's servers (servers.server_image answers it)."""
    plan, opts = build.plan, child_options(parent)
    base = image_facts(parent, vendor_image_id(parent, plan))
    settings = build.user_data.apply(server_settings)
    bucket = settings.apply(lambda values: values["MODEL_BUCKET"])
    install = settings.apply(install_settings)
    script = boot_script()
    script_object = aws.s3.BucketObjectv2(
        f"{name}-image-boot-script", bucket=bucket, key=boot_script_key(script), content=script,
        content_type="text/x-shellscript", server_side_encryption="AES256", tags=build.tags, opts=opts)
    document = pulumi.Output.all(script_object.bucket, script_object.key, install).apply(
        lambda values: component_document(values[0], values[1], script, values[2]))
    component = aws.imagebuilder.Component(
        f"{name}-image-component", name=physical_name(name, "boot-phases"), platform="Linux",
        version=document.apply(lambda text: semantic_version(text)), data=document,
        description=f"inferstack boot phases {', '.join(BUILD_PHASES)}, run by the server's own boot.sh",
        tags=build.tags, opts=opts)
    root_gib = base.root_volume_size(plan)
    recipe_inputs = pulumi.Output.all(base.image_id, component.arn, base.root_device_name, root_gib)
    recipe = aws.imagebuilder.ImageRecipe(
        f"{name}-image-recipe", name=physical_name(name, "image"), parent_image=base.image_id,
        version=recipe_inputs.apply(lambda values: semantic_version(json.dumps(values))),
        components=[{"component_arn": component.arn}],
        block_device_mappings=[{"device_name": base.root_device_name, "ebs": {
            "volume_type": "gp3", "encrypted": "true", "delete_on_termination": "true", "volume_size": root_gib}}],
        # Servers are reached by Session Manager (Capability.MANAGED_SHELL): the agent stays in the image.
        systems_manager_agent={"uninstall_after_build": False},
        description=f"inferstack {plan.serving.runtime} on {plan.device}: {', '.join(BUILD_PHASES)} installed",
        tags=build.tags, opts=opts)
    infrastructure = aws.imagebuilder.InfrastructureConfiguration(
        f"{name}-image-build", name=physical_name(name, "image-build"),
        instance_profile_name=build_profile(parent, name, script_object, build.tags),
        instance_types=[plan.instance_type], subnet_id=build.subnet_id, security_group_ids=list(build.firewall_ids),
        instance_metadata_options={"http_tokens": "required", "http_put_response_hop_limit": METADATA_HOP_LIMIT},
        terminate_instance_on_failure=True, resource_tags=build.tags,
        description="inferstack image build: the servers' subnet and security groups", tags=build.tags, opts=opts)
    image = aws.imagebuilder.Image(
        f"{name}-image", image_recipe_arn=recipe.arn, infrastructure_configuration_arn=infrastructure.arn,
        # No test phase: its instance would be a second GPU server; the component's validate phase checks the build.
        image_tests_configuration={"image_tests_enabled": False}, tags=build.tags,
        opts=child_options(parent, custom_timeouts=pulumi.CustomTimeouts(create=BUILD_TIMEOUT)))
    baked = ServerImage(image_id=image.output_resources.apply(baked_ami_id), root_device_name=base.root_device_name,
                        root_volume_gib=root_gib)
    use_baked_image(parent, plan, baked)
    return baked


def baked_ami_id(output_resources: Sequence[Any] | None) -> str:
    """The AMI the build made: pulumi_aws imagebuilder.Image `output_resources[0].amis[0].image`."""
    amis = _field(output_resources[0], "amis") if output_resources else None
    if not amis:
        raise ValueError("the Image Builder image lists no AMI in its output resources")
    return str(_field(amis[0], "image"))


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name)


def physical_name(name: str, purpose: str) -> str:
    """Image Builder names are unique in an account and region: the resource's name and a digest of the project and
    stack, so two stacks never claim one name."""
    digest = hashlib.sha256(f"{pulumi.get_project()}/{pulumi.get_stack()}".encode()).hexdigest()[:8]
    return f"{name}-{purpose}-{digest}"


def semantic_version(content: str) -> str:
    """Components and recipes are immutable per version: a version derived from what goes in (1.minor.patch from its
    sha256, each node under Image Builder's 2^30 - 1) is new exactly when the content is."""
    digest = hashlib.sha256(content.encode()).hexdigest()
    return f"1.{int(digest[:7], 16)}.{int(digest[7:14], 16)}"


#### The build instance's identity ####


def build_profile(parent: pulumi.Resource, name: str, script: aws.s3.BucketObjectv2,
                  tags: Mapping[str, str]) -> StrOutput:
    """An instance profile for the build instance only: Image Builder's managed policy, the Systems Manager agent's
    own calls, and s3:GetObject on the one boot script object."""
    opts = child_options(parent)
    partition_name, _ = partition(parent)
    role = instance_role(parent, f"{name}-image-build-role",
                         "inferstack image build: Image Builder, Session Manager, boot.sh", tags)
    attached = [aws.iam.RolePolicyAttachment(
        f"{name}-image-build-{policy}", role=role.name,
        policy_arn=pulumi.Output.concat("arn:", partition_name, ":iam::aws:policy/", policy), opts=opts)
        for policy in MANAGED_POLICIES]
    script_arn = pulumi.Output.concat("arn:", partition_name, ":s3:::", script.bucket, "/", script.key)
    read = aws.iam.RolePolicy(f"{name}-image-build-boot-script", role=role.id, opts=opts,
                              policy=pulumi.Output.json_dumps({"Version": "2012-10-17", "Statement": [{
                                  "Sid": "ReadBootScript", "Effect": "Allow", "Action": "s3:GetObject",
                                  "Resource": script_arn}]}))
    agent = aws.iam.RolePolicy(f"{name}-image-build-systems-manager", role=role.id, opts=opts,
                               policy=pulumi.Output.json_dumps({"Version": "2012-10-17", "Statement": [{
                                   "Sid": "SystemsManagerAgent", "Effect": "Allow",
                                   "Action": list(SYSTEMS_MANAGER_AGENT_ACTIONS), "Resource": "*"}]}))
    profile = aws.iam.InstanceProfile(f"{name}-image-build-profile", role=role.name, tags=tags, opts=opts)
    # As the servers' profile: named once every grant is attached, so the build can read its script at once.
    return pulumi.Output.all(profile.name, read.id, agent.id, *(a.id for a in attached)).apply(
        lambda ids: str(ids[0]))


#### What the build runs ####


def boot_script() -> str:
    """The servers' boot.sh, as their bundle carries it (render.bundle_files)."""
    return shipped_copy("boot.sh")


def boot_script_key(script: str) -> str:
    return f"{BUNDLE_PREFIX}image/boot-{hashlib.sha256(script.encode()).hexdigest()}.sh"


def server_settings(user_data: str) -> dict[str, str]:
    """The servers' bootstrap.env, read from their cloud-config (render.loader_files writes it there)."""
    files = yaml.safe_load(user_data.split("\n", 1)[1] if user_data.startswith("#cloud-config") else user_data)
    (settings,) = [f["content"] for f in files["write_files"] if f["path"] == f"{CONFIG_DIR}/bootstrap.env"]
    pairs = (line.split("=", 1) for line in str(settings).splitlines() if line and not line.startswith("#"))
    return {key: value for key, value in pairs}


def install_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """The settings the build phases read (INSTALL_SETTINGS), as the servers have them."""
    return {key: settings[key] for key in INSTALL_SETTINGS if key in settings}


def component_document(bucket: str, key: str, script: str, settings: Mapping[str, str]) -> str:
    """The component (schemaVersion 1.0): build downloads boot.sh, checks it, writes the settings, runs the phases,
    writes the manifest and cleans up; validate checks what the image must hold."""
    script_path, settings_path = f"{BUILD_DIR}/boot.sh", f"{BUILD_DIR}/bootstrap.env"
    env = "".join(f"{key}={value}\n" for key, value in settings.items())
    build: list[dict[str, Any]] = [
        {"name": "FetchBootScript", "action": "S3Download", "maxAttempts": 3,
         "inputs": [{"source": f"s3://{bucket}/{key}", "destination": script_path}]},
        {"name": "CheckBootScript", "action": "ExecuteBash", "inputs": {"commands": [
            STRICT, f"echo '{hashlib.sha256(script.encode()).hexdigest()}  {script_path}' | sha256sum --check --strict",
            f"chmod 0755 {script_path}",
            f"cat >{settings_path} <<'INFERSTACK_SETTINGS'\n{env}INFERSTACK_SETTINGS",
            f"install -d -m 0755 {CONFIG_DIR}",
            f"[ -e {GATEWAY_CONFIG} ] || touch {GATEWAY_CONFIG} {BUILD_DIR}/gateway-placeholder"]}},
    ]
    build += [{"name": f"Phase{phase.title()}", "action": "ExecuteBash", "inputs": {"commands": [
        STRICT, f"INFERSTACK_CONFIG={settings_path} {script_path} --phase {phase} || code=$?",
        f"[ \"${{code:-0}}\" -ne {REBOOT_REQUESTED} ] || exit {TOE_REBOOT}",
        "exit \"${code:-0}\""]}} for phase in BUILD_PHASES]
    build += [
        {"name": "WriteManifest", "action": "ExecuteBash", "inputs": {"commands": manifest_commands(script, settings)}},
        {"name": "CleanUp", "action": "ExecuteBash", "inputs": {"commands": [
            STRICT, f"[ ! -e {BUILD_DIR}/gateway-placeholder ] || rm -f {GATEWAY_CONFIG}",
            f"rm -rf {BUILD_DIR} /run/inferstack-boot"]}},
    ]
    document = {"name": "inferstack-boot-phases", "schemaVersion": 1.0,
                "description": "The boot phases driver, runtime and gateway, by the server's own boot.sh",
                "phases": [{"name": "build", "steps": build},
                           {"name": "validate", "steps": [{"name": "CheckImage", "action": "ExecuteBash",
                                                           "inputs": {"commands": validate_commands(settings)}}]}]}
    text = yaml.safe_dump(document, sort_keys=False, width=1 << 16)
    if len(text) > COMPONENT_DATA_LIMIT:
        raise ValueError(f"the image component document is {len(text)} characters; Image Builder takes "
                         f"{COMPONENT_DATA_LIMIT} inline")
    return text


# Fills in what only the build instance knows (the driver's version, the date) and writes the manifest. No single
# quote inside: it runs as `python3 -c '...'`.
_MANIFEST_PROGRAM = (
    "import datetime, json, subprocess, sys; manifest = json.load(open(sys.argv[1])); "
    "query = subprocess.run([\"nvidia-smi\", \"--query-gpu=driver_version\", \"--format=csv,noheader\"], "
    "capture_output=True, text=True) if manifest[\"device\"] == \"gpu\" else None; "
    "version = query.stdout.split()[0] if query and query.returncode == 0 and query.stdout.split() else None; "
    "manifest[\"driver\"] = {\"present\": version is not None, \"version\": version}; "
    "manifest[\"built_at\"] = datetime.datetime.now(datetime.timezone.utc).strftime(\"%Y-%m-%dT%H:%M:%SZ\"); "
    "json.dump(manifest, open(sys.argv[2], \"w\"), indent=1, sort_keys=True)")


def manifest(script: str, settings: Mapping[str, str]) -> dict[str, Any]:
    """What the image holds, as far as it is known before the build (`manifest_commands` adds `driver` and
    `built_at`)."""
    gateway = ["nginx", *filter(None, settings.get("GATEWAY_APT_PACKAGES", "").split(","))]
    return {"format": IMAGE_MANIFEST_FORMAT, "phases": list(BUILD_PHASES), "device": settings.get("DEVICE", ""),
            "install_mode": settings.get("INSTALL_MODE", ""), "runtime_image": settings.get("RUNTIME_IMAGE") or None,
            "pip_requirement": settings.get("PIP_REQUIREMENT") or None, "gateway_packages": gateway,
            "boot_sh_sha256": hashlib.sha256(script.encode()).hexdigest(),
            "settings_sha256": hashlib.sha256(json.dumps(dict(settings), sort_keys=True).encode()).hexdigest()}


def manifest_commands(script: str, settings: Mapping[str, str]) -> list[str]:
    known = json.dumps(manifest(script, settings), sort_keys=True)
    return [STRICT, f"cat >{BUILD_DIR}/image.json.in <<'INFERSTACK_MANIFEST'\n{known}\nINFERSTACK_MANIFEST",
            f"python3 -c '{_MANIFEST_PROGRAM}' {BUILD_DIR}/image.json.in {IMAGE_MANIFEST}",
            f"chmod 0644 {IMAGE_MANIFEST}"]


def validate_commands(settings: Mapping[str, str]) -> list[str]:
    checks = [STRICT, f"test -s {IMAGE_MANIFEST}", "command -v nginx"]
    if settings.get("INSTALL_MODE") == "container" and settings.get("RUNTIME_IMAGE"):
        checks.append(f"docker image inspect --format=ok {settings['RUNTIME_IMAGE']}")
    if settings.get("DEVICE") == "gpu":
        checks.append("nvidia-smi")
    return checks
