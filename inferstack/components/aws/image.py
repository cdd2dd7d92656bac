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

With `plan.startup.runtime_caches` (vLLM in its container on a GPU) the build also syncs the model with the server's
own `boot.sh --phase model_sync` and starts the runtime once with the servers' own `docker run` (render.
container_command), until it answers its health path: the compile and kernel caches it writes under the runtime
user's home stay in the image; the weights, the model's settings and the credentials do not (`CleanUp`). vLLM keys
those caches by its configuration (the model's path and every engine argument) and its version, so the image is
built for the plan's model and arguments: a change to either builds a new one. The build instance's role then also
reads the model's prefix (identity.model_reader_statements), and a streaming runtime gets the credentials of a model
reader of the build's own (identity.model_reader, trusted by the build's role alone), written by the server's own
`cloud_access.py runtime-credentials`: never the build instance's, whose role also holds Image Builder's and the
Systems Manager agent's grants. A streaming build syncs the weights too (its check of each file's sha256), which
costs the build their download.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import yaml

from inferstack.bootstrap.files.cloud_access import ROLE_ARN_PATTERN
from inferstack.bootstrap.render import (
    BUNDLE_PREFIX,
    CONFIG_DIR,
    LIB_DIR,
    RUNTIME_CREDENTIALS,
    container_command,
    shell_line,
    shipped_copy,
    streams,
)
from inferstack.bootstrap.runtimes import RUNTIME_HOME, runtime_processes
from inferstack.components.aws.identity import (
    SESSION_MANAGER_ACTIONS,
    assume_reader_statements,
    instance_role,
    model_reader,
    model_reader_statements,
)
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
CACHE_PHASES = ("model_sync",)
"""What a build that keeps the runtime's caches runs besides BUILD_PHASES, before it starts the runtime once."""
CACHE_SETTINGS = (
    "INFERSTACK_CLOUD", "INFERSTACK_REGION", "MODEL_NAME", "MODEL_BUCKET", "MODEL_PREFIX", "MODEL_REVISION",
    "MODEL_FORMAT", "MODEL_LOADING", "NVME_EXPECTED", "SYNC_WORKERS", "HEALTH_PATH")
"""What boot.sh's model_sync phase and the runtime's first start read besides INSTALL_SETTINGS: the model, so an
image with caches is built for it."""
CACHE_PROGRAMS = ("model_sync.py", "cloud_access.py")
"""The server's own programs the cache build runs (model_sync phase; a streaming runtime's credentials), stored
beside boot.sh under their sha256 and removed from the image after the build."""
RUNTIME_START_TIMEOUT_S = 1800
"""How long the build waits for the runtime's first answer (boot.sh READY_TIMEOUT_S, a server's own wait): inside a
step's default timeout of 120 minutes (AWSTOE; the CDK's ComponentDocumentStep `timeout` default)."""
IMAGE_MANIFEST = f"{CONFIG_DIR}/image.json"
IMAGE_MANIFEST_FORMAT = "inferstack-image/1"
BUILD_DIR = "/var/tmp/inferstack-image"
"""The build's scratch on the build instance, removed before the image is taken."""
GATEWAY_CONFIG = f"{CONFIG_DIR}/gateway.conf"
"""boot.sh's gateway phase checks that the bundle's configuration is there; an image carries none (each server's
bundle brings its own), so the build places an empty one for the check and removes it."""
COMPONENT_DATA_LIMIT = 16_000
"""Image Builder CreateComponent: inline `data` is at most 16,000 characters (API reference, CreateComponent)."""
LIFECYCLE_TAG = "inferstack-image"
"""The tag on the stack's Image Builder images its lifecycle policy selects them by (the value: the image's name)."""
KEPT_IMAGES = 2
"""The newest images kept: the one the servers boot and the one before it, which a fleet rolled back to its previous
template version boots."""
LIFECYCLE_EXECUTION_POLICY = "service-role/EC2ImageBuilderLifecycleExecutionPolicy"
"""AWS's managed policy for Image Builder's lifecycle actions (AWS managed policy reference)."""
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
    caches = plan.startup.runtime_caches
    install = settings.apply(lambda values: install_settings(values, caches=caches))
    files = {"boot.sh": boot_script(), **({program: shipped_copy(program) for program in CACHE_PROGRAMS}
                                          if caches else {})}
    # boot.sh's resource keeps the name it had before the build shipped other programs (a new name would replace
    # it: the new object written, then the old resource's deletion would remove that same key).
    objects = {file: aws.s3.BucketObjectv2(
        f"{name}-image-" + ("boot-script" if file == "boot.sh" else file.removesuffix(".py").replace("_", "-")),
        bucket=bucket, key=shipped_key(file, text),
        content=text, content_type="text/x-shellscript" if file.endswith(".sh") else "text/x-python",
        server_side_encryption="AES256", tags=build.tags, opts=opts) for file, text in files.items()}
    identity = build_identity(parent, name, list(objects.values()), build.tags,
                              model_prefix=plan.model.bucket_prefix if caches else None,
                              stream=caches and streams(plan))
    document = pulumi.Output.all(bucket, install, identity.reader_arn).apply(
        lambda values: component_document(values[0], files, values[1], plan if caches else None, values[2]))
    component = aws.imagebuilder.Component(
        f"{name}-image-component", name=physical_name(name, "boot-phases"), platform="Linux",
        version=document.apply(lambda text: semantic_version(text)), data=document,
        description=f"inferstack boot phases {', '.join(BUILD_PHASES + (CACHE_PHASES if caches else ()))}, run by "
                    "the server's own boot.sh" + (", then the runtime started once" if caches else ""),
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
        description=f"inferstack {plan.serving.runtime} on {plan.device}: {', '.join(BUILD_PHASES)} installed"
                    + (", the runtime's caches kept" if caches else ""),
        tags=build.tags, opts=opts)
    infrastructure = aws.imagebuilder.InfrastructureConfiguration(
        f"{name}-image-build", name=physical_name(name, "image-build"),
        instance_profile_name=identity.profile_name,
        instance_types=[plan.instance_type], subnet_id=build.subnet_id, security_group_ids=list(build.firewall_ids),
        instance_metadata_options={"http_tokens": "required", "http_put_response_hop_limit": METADATA_HOP_LIMIT},
        terminate_instance_on_failure=True, resource_tags=build.tags,
        description="inferstack image build: the servers' subnet and security groups", tags=build.tags, opts=opts)
    image_tag = {LIFECYCLE_TAG: physical_name(name, "image")}
    image = aws.imagebuilder.Image(
        f"{name}-image", image_recipe_arn=recipe.arn, infrastructure_configuration_arn=infrastructure.arn,
        # No test phase: its instance would be a second GPU server; the component's validate phase checks the build.
        image_tests_configuration={"image_tests_enabled": False}, tags={**build.tags, **image_tag},
        # A replaced image is left to the lifecycle policy (keep_images): Image Builder's DeleteImage would drop the
        # image's record but leave its AMI and snapshot behind, where nothing would delete them.
        opts=child_options(parent, custom_timeouts=pulumi.CustomTimeouts(create=BUILD_TIMEOUT),
                           retain_on_delete=True))
    keep_images(parent, name, image_tag, build.tags)
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


#### Old images ####


def keep_images(parent: pulumi.Resource, name: str, image_tag: Mapping[str, str], tags: Mapping[str, str]) -> None:
    """An Image Builder lifecycle policy that deletes all but the KEPT_IMAGES newest images of this stack's build
    (selected by `image_tag`), their AMIs and snapshots included, run by a role only Image Builder may assume, with
    AWS's EC2ImageBuilderLifecycleExecutionPolicy (it acts only on resources tagged CreatedBy: EC2 Image Builder)."""
    opts = child_options(parent)
    partition_name, dns_suffix = partition(parent)
    role = aws.iam.Role(
        f"{name}-image-lifecycle-role", description="inferstack image build: delete the stack's old images",
        assume_role_policy=pulumi.Output.json_dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Action": "sts:AssumeRole",
            "Principal": {"Service": dns_suffix.apply(lambda suffix: f"imagebuilder.{suffix}")}}]}),
        tags=tags, opts=opts)
    attached = aws.iam.RolePolicyAttachment(
        f"{name}-image-lifecycle-execution", role=role.name, opts=opts,
        policy_arn=pulumi.Output.concat("arn:", partition_name, ":iam::aws:policy/", LIFECYCLE_EXECUTION_POLICY))
    aws.imagebuilder.LifecyclePolicy(
        f"{name}-image-lifecycle", name=physical_name(name, "image-lifecycle"), resource_type="AMI_IMAGE",
        description=f"inferstack: keep the {KEPT_IMAGES} newest images of the stack's build, delete the others",
        execution_role=pulumi.Output.all(role.arn, attached.id).apply(lambda values: str(values[0])),
        policy_details=[{"action": {"type": "DELETE", "include_resources": {"amis": True, "snapshots": True}},
                         "filter": {"type": "COUNT", "value": KEPT_IMAGES}}],
        resource_selection={"tag_map": dict(image_tag)}, tags=tags, opts=opts)


#### The build instance's identity ####


@dataclass(frozen=True)
class BuildIdentity:
    profile_name: StrOutput
    """The build instance's profile, named once every grant is attached."""
    reader_arn: pulumi.Input[str | None]
    """The build's own model reader role, for a streaming runtime started in the build; None without one."""


def build_identity(parent: pulumi.Resource, name: str, shipped: Sequence[aws.s3.BucketObjectv2],
                   tags: Mapping[str, str], *, model_prefix: str | None, stream: bool) -> BuildIdentity:
    """An instance profile for the build instance only: Image Builder's managed policy, the Systems Manager agent's
    own calls, s3:GetObject on the objects it downloads (boot.sh; the cache build's programs) and, for a build that
    starts the runtime (`model_prefix`), the model's prefix as its readers read it. A streaming runtime started in
    the build gets credentials of a model reader of its own (`stream`), never the build instance's: their role also
    holds Image Builder's and the Systems Manager agent's grants."""
    opts = child_options(parent)
    partition_name, _ = partition(parent)
    role = instance_role(parent, f"{name}-image-build-role",
                         "inferstack image build: Image Builder, Session Manager, boot.sh", tags)
    attached = [aws.iam.RolePolicyAttachment(
        f"{name}-image-build-{policy}", role=role.name,
        policy_arn=pulumi.Output.concat("arn:", partition_name, ":iam::aws:policy/", policy), opts=opts)
        for policy in MANAGED_POLICIES]
    bucket_arn = pulumi.Output.concat("arn:", partition_name, ":s3:::", shipped[0].bucket)
    statements: list[dict[str, Any]] = [{
        "Sid": "ReadBootScript", "Effect": "Allow", "Action": "s3:GetObject",
        "Resource": [pulumi.Output.concat(bucket_arn, "/", item.key) for item in shipped] if len(shipped) > 1
        else pulumi.Output.concat(bucket_arn, "/", shipped[0].key)}]
    reader = None
    if model_prefix is not None:
        statements += model_reader_statements(bucket_arn, model_prefix)
        if stream:
            reader = model_reader(parent, f"{name}-image-build-reader", role, bucket_arn, model_prefix, tags,
                                  "inferstack image build: its runtime streams the model prefix")
            statements += assume_reader_statements(reader)
    read = aws.iam.RolePolicy(f"{name}-image-build-boot-script", role=role.id, opts=opts,
                              policy=pulumi.Output.json_dumps({"Version": "2012-10-17", "Statement": statements}))
    agent = aws.iam.RolePolicy(f"{name}-image-build-systems-manager", role=role.id, opts=opts,
                               policy=pulumi.Output.json_dumps({"Version": "2012-10-17", "Statement": [{
                                   "Sid": "SystemsManagerAgent", "Effect": "Allow",
                                   "Action": list(SYSTEMS_MANAGER_AGENT_ACTIONS), "Resource": "*"}]}))
    profile = aws.iam.InstanceProfile(f"{name}-image-build-profile", role=role.name, tags=tags, opts=opts)
    # As the servers' profile: named once every grant is attached, so the build can read its script at once.
    return BuildIdentity(
        profile_name=pulumi.Output.all(profile.name, read.id, agent.id, *(a.id for a in attached)).apply(
            lambda ids: str(ids[0])),
        reader_arn=reader.ready if reader else None)


#### What the build runs ####


def boot_script() -> str:
    """The servers' boot.sh, as their bundle carries it (render.bundle_files)."""
    return shipped_copy("boot.sh")


def shipped_key(file: str, text: str) -> str:
    """Where a server program the build downloads is stored: beside the bundles, under its sha256."""
    stem, _, suffix = file.rpartition(".")
    return f"{BUNDLE_PREFIX}image/{stem.replace('_', '-')}-{hashlib.sha256(text.encode()).hexdigest()}.{suffix}"


def boot_script_key(script: str) -> str:
    return shipped_key("boot.sh", script)


def server_settings(user_data: str) -> dict[str, str]:
    """The servers' bootstrap.env, read from their cloud-config (render.loader_files writes it there)."""
    files = yaml.safe_load(user_data.split("\n", 1)[1] if user_data.startswith("#cloud-config") else user_data)
    (settings,) = [f["content"] for f in files["write_files"] if f["path"] == f"{CONFIG_DIR}/bootstrap.env"]
    pairs = (line.split("=", 1) for line in str(settings).splitlines() if line and not line.startswith("#"))
    return {key: value for key, value in pairs}


def install_settings(settings: Mapping[str, str], *, caches: bool = False) -> dict[str, str]:
    """The settings the build phases read (INSTALL_SETTINGS, and CACHE_SETTINGS for a build that keeps the runtime's
    caches), as the servers have them."""
    keys = INSTALL_SETTINGS + (CACHE_SETTINGS if caches else ())
    return {key: settings[key] for key in keys if key in settings}


def component_document(bucket: str, files: Mapping[str, str], settings: Mapping[str, str],
                       caches_for: DeploymentPlan | None = None, reader_arn: str | None = None) -> str:
    """The component (schemaVersion 1.0): build downloads boot.sh (and, for a build that keeps the runtime's caches,
    `caches_for` the plan, the server programs it runs), checks each, writes the settings, runs the phases, starts the
    runtime once where it keeps caches, writes the manifest and cleans up; validate checks what the image must
    hold."""
    script = files["boot.sh"]
    script_path, settings_path = f"{BUILD_DIR}/boot.sh", f"{BUILD_DIR}/bootstrap.env"
    destinations = {file: f"{BUILD_DIR}/{file}" for file in files}
    programs = [file for file in files if file != "boot.sh"]
    env = "".join(f"{key}={value}\n" for key, value in settings.items())
    build: list[dict[str, Any]] = [
        {"name": "FetchBootScript", "action": "S3Download", "maxAttempts": 3,
         "inputs": [{"source": f"s3://{bucket}/{shipped_key(file, text)}", "destination": destinations[file]}
                    for file, text in files.items()]},
        {"name": "CheckBootScript", "action": "ExecuteBash", "inputs": {"commands": [
            STRICT, *(f"echo '{hashlib.sha256(text.encode()).hexdigest()}  {destinations[file]}' | "
                      "sha256sum --check --strict" for file, text in files.items()),
            f"chmod 0755 {script_path}",
            *([f"install -d -m 0755 {LIB_DIR}", f"install -m 0644 {' '.join(destinations[f] for f in programs)} "
               f"{LIB_DIR}/"] if programs else []),
            f"cat >{settings_path} <<'INFERSTACK_SETTINGS'\n{env}INFERSTACK_SETTINGS",
            f"install -d -m 0755 {CONFIG_DIR}",
            f"[ -e {GATEWAY_CONFIG} ] || touch {GATEWAY_CONFIG} {BUILD_DIR}/gateway-placeholder"]}},
    ]
    phases = BUILD_PHASES + (CACHE_PHASES if caches_for else ())
    build += [{"name": f"Phase{phase.title().replace('_', '')}", "action": "ExecuteBash", "inputs": {"commands": [
        STRICT, f"INFERSTACK_CONFIG={settings_path} {script_path} --phase {phase} || code=$?",
        f"[ \"${{code:-0}}\" -ne {REBOOT_REQUESTED} ] || exit {TOE_REBOOT}",
        "exit \"${code:-0}\""]}} for phase in phases]
    if caches_for:
        build.append({"name": "StartRuntimeOnce", "action": "ExecuteBash",
                      "inputs": {"commands": runtime_start_commands(caches_for, settings, reader_arn)}})
    build += [
        {"name": "WriteManifest", "action": "ExecuteBash", "inputs": {"commands": manifest_commands(script, settings)}},
        {"name": "CleanUp", "action": "ExecuteBash", "inputs": {"commands": cleanup_commands(files)}},
    ]
    document = {"name": "inferstack-boot-phases", "schemaVersion": 1.0,
                "description": f"The boot phases {', '.join(phases)}" + (", then the runtime started once"
                                                                         if caches_for else "")
                               + ", by the server's own boot.sh",
                "phases": [{"name": "build", "steps": build},
                           {"name": "validate", "steps": [{"name": "CheckImage", "action": "ExecuteBash",
                                                           "inputs": {"commands": validate_commands(settings)}}]}]}
    text = yaml.safe_dump(document, sort_keys=False, width=1 << 16)
    if len(text) > COMPONENT_DATA_LIMIT:
        raise ValueError(f"the image component document is {len(text)} characters; Image Builder takes "
                         f"{COMPONENT_DATA_LIMIT} inline")
    return text


def runtime_start_commands(plan: DeploymentPlan, settings: Mapping[str, str],
                           reader_arn: str | None = None) -> list[str]:
    """The runtime's first start, as a server's unit starts it (its first process: the others share its caches),
    with the model the model_sync phase placed and model.env names; detached, waited for on its health path (each
    request at most 5 s, as boot.sh's), then stopped and removed. A streaming runtime reads the bucket with the
    build's own model reader's credentials (`reader_arn`), written by the server's own cloud_access.py
    runtime-credentials into the file a server's unit writes its reader's to."""
    process = runtime_processes(plan)[0]
    words = container_command(plan, process, hub_token=False)
    run = [words[0], words[1], "--detach", *(word for word in words[2:] if word != "--rm")]
    health = f"http://127.0.0.1:{process.port}{settings.get('HEALTH_PATH', plan.serving.health_path)}"
    tries = RUNTIME_START_TIMEOUT_S // 5
    commands = [STRICT, f"set -a; . {CONFIG_DIR}/model.env; set +a",
                f"docker rm -f {process.name} >/dev/null 2>&1 || true"]
    if streams(plan):
        if not reader_arn or not re.fullmatch(ROLE_ARN_PATTERN, reader_arn):
            raise ValueError(f"a streaming runtime started in the image build needs the build's model reader role, "
                             f"an IAM role ARN (got {reader_arn!r:.80})")
        commands.append(f"python3 {LIB_DIR}/cloud_access.py runtime-credentials --region "
                        f"{settings['INFERSTACK_REGION']} --role-arn {reader_arn} --out {RUNTIME_CREDENTIALS}")
    return [*commands,
        shell_line(run),
        f"for _ in $(seq {tries}); do curl -fs --max-time 5 -o /dev/null {health} && break; "
        # (no Go template: AWSTOE reads double braces as its own variables)
        f"[ -n \"$(docker ps -q --filter 'name=^{process.name}$' --filter status=running)\" ] || break; sleep 5; "
        "done",
        f"if ! curl -fsS --max-time 5 -o /dev/null {health}; then docker logs --tail 100 {process.name}; "
        f"docker rm -f {process.name}; echo 'the runtime did not answer {health}'; exit 1; fi",
        # stopped whatever `docker stop` answers, then removed: a container left behind would keep its environment
        # (the credentials file's values) under /var/lib/docker in the image
        f"docker stop -t 30 {process.name} || true", f"docker rm -f {process.name}",
        f"echo \"runtime caches: $(du -sh {RUNTIME_HOME} | cut -f1)\""]


def cleanup_commands(files: Mapping[str, str]) -> list[str]:
    """What the image must not keep: the build's scratch, the placeholder gateway configuration and, after a runtime
    start, the weights (under model.env's MODEL_ROOT), the model's settings, the credentials and the programs."""
    commands = [STRICT, f"[ ! -e {BUILD_DIR}/gateway-placeholder ] || rm -f {GATEWAY_CONFIG}"]
    if len(files) > 1:
        commands += [f"if [ -f {CONFIG_DIR}/model.env ]; then . {CONFIG_DIR}/model.env; "
                     "rm -rf \"${MODEL_ROOT:?}/models\" \"${MODEL_ROOT:?}/triton-repo\"; fi",
                     # the configuration and tokenizer files a streaming vLLM pulled beside its caches (each
                     # start pulls them again)
                     f"rm -rf {RUNTIME_HOME}/.cache/vllm/assets/model_streamer",
                     f"rm -f {CONFIG_DIR}/model.env {RUNTIME_CREDENTIALS} "
                     + " ".join(f"{LIB_DIR}/{file}" for file in files if file != "boot.sh"),
                     f"rmdir --ignore-fail-on-non-empty {LIB_DIR}"]
    return [*commands, f"rm -rf {BUILD_DIR} /run/inferstack-boot"]


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
            "runtime_caches": {"model": settings["MODEL_NAME"], "revision": settings.get("MODEL_REVISION") or None}
            if "MODEL_NAME" in settings else None,
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
    if "MODEL_NAME" in settings:  # a build that started the runtime: its compile caches, no container, no credential
        checks += [f"test -n \"$(ls -A {RUNTIME_HOME}/.cache/vllm/torch_compile_cache)\"",
                   "test -z \"$(docker ps -aq)\"", f"test ! -e {CONFIG_DIR}/model.env",
                   f"test ! -e {RUNTIME_CREDENTIALS}"]
    return checks
