"""The image servers boot (`plan.startup.image`): a brought image on each cloud, and on AWS a baked one, built by EC2
Image Builder from the boot script's own install phases (inferstack/components/aws/image.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from inferstack.bootstrap.render import shipped_copy
from inferstack.clouds import Cloud
from inferstack.components import InferenceServer
from inferstack.components.aws.image import (
    BUILD_PHASES,
    IMAGE_MANIFEST,
    INSTALL_SETTINGS,
    boot_script_key,
    semantic_version,
)
from inferstack.plan import DeploymentPlan
from inferstack.preview import Recording, RegisteredResource
from tests.sample_plans import sample_plan

API_DOMAIN = "api.example.com"
BROUGHT = {"aws": "ami-0123456789abcdef0", "gcp": "projects/acme-images/global/images/vllm-2026-01",
           "alibaba": "m-t4n0abcdefghij123456", "huawei": "0123abcd-4567-89ab-cdef-0123456789ab"}
COMPONENT, RECIPE = "aws:imagebuilder/component:Component", "aws:imagebuilder/imageRecipe:ImageRecipe"
INFRASTRUCTURE = "aws:imagebuilder/infrastructureConfiguration:InfrastructureConfiguration"
IMAGE, TEMPLATE = "aws:imagebuilder/image:Image", "aws:ec2/launchTemplate:LaunchTemplate"


def _with_image(plan: DeploymentPlan, image: str, image_id: str | None = None) -> DeploymentPlan:
    return plan.model_copy(update={"startup": plan.startup.model_copy(update={"image": image, "image_id": image_id})})


def _deploy(run: Any, plan: DeploymentPlan, **args: Any) -> Recording:
    return run(lambda: InferenceServer("chat", {"plan": plan, **args}))


def _one(recording: Recording, resource_type: str) -> RegisteredResource:
    (found,) = recording.of_type(resource_type)
    return found


def _invokes(recording: Recording, token: str) -> list[dict[str, Any]]:
    return [args for name, args in recording.invokes if name == token]


#### Brought images ####


def test_a_brought_ami_is_what_aws_servers_boot_and_is_looked_up_by_its_id_alone(run: Any) -> None:
    plan = _with_image(sample_plan("aws", "cpu-llm"), "brought", BROUGHT["aws"])
    recording = _deploy(run, plan)
    instance = _one(recording, "aws:ec2/instance:Instance")
    assert instance.inputs["ami"] == BROUGHT["aws"]
    assert instance.inputs["rootBlockDevice"]["volumeSize"] == plan.disk_gib  # sized against the brought image
    (lookup,) = _invokes(recording, "aws:ec2/getAmi:getAmi")
    assert lookup["filters"] == [{"name": "image-id", "values": [BROUGHT["aws"]]}]
    assert "owners" not in lookup and lookup["includeDeprecated"] is True  # the user's own choice, maybe shared
    assert _invokes(recording, "aws:ssm/getParameter:getParameter") == []  # no vendor image looked up


def test_a_brought_ami_is_what_a_fleets_template_boots(run: Any) -> None:
    plan = _with_image(sample_plan("aws", "gpu-llm", "production"), "brought", BROUGHT["aws"])
    recording = _deploy(run, plan, api_domain=API_DOMAIN)
    assert _one(recording, TEMPLATE).inputs["imageId"] == BROUGHT["aws"]
    assert recording.of_type(IMAGE) == []


@pytest.mark.parametrize(("image_id", "expected"), [
    (BROUGHT["gcp"], {"project": "acme-images", "name": "vllm-2026-01"}),
    ("projects/acme-images/global/images/family/vllm", {"project": "acme-images", "family": "vllm"}),
])
def test_a_brought_gcp_image_is_looked_up_by_its_project_and_name_or_family(run: Any, image_id: str,
                                                                            expected: dict[str, str]) -> None:
    recording = _deploy(run, _with_image(sample_plan("gcp", "cpu-llm"), "brought", image_id), static_assets=False)
    (lookup,) = _invokes(recording, "gcp:compute/getImage:getImage")
    assert lookup == expected
    instance = _one(recording, "gcp:compute/instance:Instance")
    image = instance.inputs["bootDisk"]["initializeParams"]["image"]
    assert image.startswith("https://www.googleapis.com/compute/v1/projects/acme-images/global/images/")
    assert image.endswith(expected.get("name") or "vllm-v20260101")


@pytest.mark.parametrize(("cloud", "token"), [("alibaba", "alicloud:ecs/getImages:getImages"),
                                              ("huawei", "huaweicloud:Ims/getImages:getImages")])
def test_a_brought_image_is_what_alibaba_and_huawei_servers_boot_looked_up_by_its_id(run: Any, cloud: Cloud,
                                                                                     token: str) -> None:
    plan = _with_image(sample_plan(cloud, "cpu-llm", "validation"), "brought", BROUGHT[cloud])
    recording = _deploy(run, plan, static_assets=False)
    (lookup,) = _invokes(recording, token)
    assert lookup == {"imageId": BROUGHT[cloud]}  # no owner, visibility or name filter: the user's own choice
    (instance,) = [r for r in recording.resources
                   if r.type.endswith(("ecs/instance:Instance", "Ecs/instance:Instance"))]
    assert instance.inputs["imageId"] == BROUGHT[cloud]


#### Baked images (AWS) ####


def _baked_fleet(run: Any) -> tuple[DeploymentPlan, Recording]:
    plan = _with_image(sample_plan("aws", "gpu-llm", "production"), "baked")
    return plan, _deploy(run, plan, api_domain=API_DOMAIN)


def _document(recording: Recording) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(_one(recording, COMPONENT).inputs["data"])
    return document


def test_the_fleets_template_boots_the_ami_image_builder_baked(run: Any) -> None:
    _, recording = _baked_fleet(run)
    (ami,) = _one(recording, IMAGE).outputs["outputResources"][0]["amis"]
    template = _one(recording, TEMPLATE)
    assert template.inputs["imageId"] == ami["image"]
    # a rebuilt image is a new template version, which the instance refresh rolls out (a vendor image's is ignored)
    assert "imageId" not in template.ignore_changes


def test_single_servers_boot_the_baked_ami_too(run: Any) -> None:
    recording = _deploy(run, _with_image(sample_plan("aws", "cpu-llm"), "baked"))
    (ami,) = _one(recording, IMAGE).outputs["outputResources"][0]["amis"]
    assert _one(recording, "aws:ec2/instance:Instance").inputs["ami"] == ami["image"]


def test_the_component_runs_the_servers_own_boot_script_phases_from_the_bucket(run: Any) -> None:
    _, recording = _baked_fleet(run)
    document = _document(recording)
    assert document["schemaVersion"] == 1.0 and [p["name"] for p in document["phases"]] == ["build", "validate"]
    build = document["phases"][0]["steps"]
    stored = recording.named("chat-image-boot-script")
    assert stored.inputs["content"] == shipped_copy("boot.sh")  # the servers' own boot.sh, not a copy of its logic
    assert stored.inputs["key"] == boot_script_key(shipped_copy("boot.sh"))
    assert stored.inputs["bucket"] == recording.named("chat-store-models").id
    (download,) = [step for step in build if step["action"] == "S3Download"]
    assert download["inputs"][0]["source"] == f"s3://{stored.inputs['bucket']}/{stored.inputs['key']}"
    commands = "\n".join(c for step in build if step["action"] == "ExecuteBash" for c in step["inputs"]["commands"])
    for phase in BUILD_PHASES:
        assert f"/var/tmp/inferstack-image/boot.sh --phase {phase}" in commands
    assert "--phase model_sync" not in commands and "--phase service" not in commands
    assert "python3 -c '" in commands and IMAGE_MANIFEST in commands
    assert "{{" not in _one(recording, COMPONENT).inputs["data"]  # AWSTOE would read it as a variable


def test_the_build_reads_the_install_settings_the_servers_have_and_no_others(run: Any) -> None:
    _, recording = _baked_fleet(run)
    commands = [c for step in _document(recording)["phases"][0]["steps"] if step["action"] == "ExecuteBash"
                for c in step["inputs"]["commands"]]
    (written,) = [c for c in commands if c.startswith("cat >/var/tmp/inferstack-image/bootstrap.env")]
    keys = {line.split("=", 1)[0] for line in written.splitlines()[1:-1]}
    assert keys <= set(INSTALL_SETTINGS) and {"RUNTIME_IMAGE", "DEVICE", "NVIDIA_DRIVER_BRANCH"} <= keys
    assert "MODEL_BUCKET" not in keys and "BUNDLE_KEY" not in keys  # per server: a new model rebuilds no image


def test_the_manifest_states_the_runtime_image_and_gateway_packages(run: Any) -> None:
    _, recording = _baked_fleet(run)
    commands = [c for step in _document(recording)["phases"][0]["steps"] if step["name"] == "WriteManifest"
                for c in step["inputs"]["commands"]]
    known = json.loads(commands[1].splitlines()[1])
    assert known["format"] == "inferstack-image/1" and known["phases"] == list(BUILD_PHASES)
    assert known["runtime_image"].startswith("vllm/vllm-openai:") and known["gateway_packages"][0] == "nginx"
    assert known["boot_sh_sha256"] and known["device"] == "gpu"


def test_the_build_instance_profile_reads_only_the_boot_script(run: Any) -> None:
    _, recording = _baked_fleet(run)
    attachments = recording.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    attached = sorted(r.inputs["policyArn"] for r in attachments if r.name.startswith("chat-image-build-"))
    # Not AmazonSSMManagedInstanceCore: it reads every parameter, the stack's SecureStrings included
    assert attached == ["arn:aws:iam::aws:policy/EC2InstanceProfileForImageBuilder"]
    (agent,) = json.loads(recording.named("chat-image-build-systems-manager").inputs["policy"])["Statement"]
    assert agent["Resource"] == "*" and not [a for a in agent["Action"] if a.startswith("ssm:Get")]
    assert set(agent["Action"]) >= {"ssm:UpdateInstanceInformation", "ec2messages:GetMessages"}
    policy = json.loads(recording.named("chat-image-build-boot-script").inputs["policy"])
    stored = recording.named("chat-image-boot-script").inputs
    assert policy["Statement"] == [{"Sid": "ReadBootScript", "Effect": "Allow", "Action": "s3:GetObject",
                                    "Resource": f"arn:aws:s3:::{stored['bucket']}/{stored['key']}"}]
    profile = recording.named("chat-image-build-profile")
    assert _one(recording, INFRASTRUCTURE).inputs["instanceProfileName"] == profile.outputs["name"]


def test_the_build_instance_is_hardened_as_servers_are_in_a_private_subnet(run: Any) -> None:
    plan, recording = _baked_fleet(run)
    build = _one(recording, INFRASTRUCTURE).inputs
    assert build["instanceMetadataOptions"] == {"httpTokens": "required", "httpPutResponseHopLimit": 1}
    assert build["terminateInstanceOnFailure"] is True and build["instanceTypes"] == [plan.instance_type]
    subnet = [r for r in recording.of_type("aws:ec2/subnet:Subnet") if r.id == build["subnetId"]]
    assert subnet and not subnet[0].inputs.get("mapPublicIpOnLaunch")  # a private subnet (NAT egress)
    assert build["securityGroupIds"] == [recording.named("chat-firewall-sg").id]
    (root,) = _one(recording, RECIPE).inputs["blockDeviceMappings"]
    assert root["ebs"] == {"volumeType": "gp3", "encrypted": "true", "deleteOnTermination": "true",
                           "volumeSize": plan.disk_gib}
    assert _one(recording, IMAGE).inputs["imageTestsConfiguration"] == {"imageTestsEnabled": False}


def test_recipe_and_component_versions_derive_from_what_goes_in(run: Any) -> None:
    _, recording = _baked_fleet(run)
    component, recipe = _one(recording, COMPONENT).inputs, _one(recording, RECIPE).inputs
    assert component["version"] == semantic_version(component["data"])
    assert recipe["parentImage"].startswith("ami-") and recipe["components"] == [
        {"componentArn": _one(recording, COMPONENT).outputs["arn"]}]
    assert recipe["version"] != component["version"]
    assert all(0 <= int(node) < 2**30 for node in recipe["version"].split("."))


def test_a_semantic_version_changes_with_its_content_and_fits_image_builders_nodes() -> None:
    first, second = semantic_version("driver runtime gateway"), semantic_version("driver runtime gateway\n")
    assert first != second and first == semantic_version("driver runtime gateway")
    assert all(len(v.split(".")) == 3 and all(int(n) < 2**30 for n in v.split(".")) for v in (first, second))


#### A baked image with the runtime's caches ####


def _cached_fleet(run: Any, stream: bool = False) -> tuple[DeploymentPlan, Recording]:
    plan = _with_image(sample_plan("aws", "gpu-llm", "production"), "baked")
    plan = plan.model_copy(update={"startup": plan.startup.model_copy(update={
        "runtime_caches": True, "model_loading": "stream" if stream else "download"})})
    return plan, _deploy(run, plan, api_domain=API_DOMAIN)


def _commands(recording: Recording, step: str) -> list[str]:
    (found,) = [s for s in _document(recording)["phases"][0]["steps"] if s["name"] == step]
    commands: list[str] = found["inputs"]["commands"]
    return commands


def test_a_build_keeping_the_runtimes_caches_syncs_the_model_and_starts_the_servers_own_runtime_once(
        run: Any) -> None:
    plan, recording = _cached_fleet(run)
    steps = [step["name"] for step in _document(recording)["phases"][0]["steps"]]
    assert steps == ["FetchBootScript", "CheckBootScript", "PhaseDriver", "PhaseRuntime", "PhaseGateway",
                     "PhaseModelSync", "StartRuntimeOnce", "WriteManifest", "CleanUp"]
    # The server's own programs, stored under their sha256 and checked before they run
    for program, resource in (("model_sync.py", "chat-image-model-sync"),
                              ("cloud_access.py", "chat-image-cloud-access")):
        stored = recording.named(resource).inputs
        assert stored["content"] == shipped_copy(program) and stored["key"].endswith(".py")
        assert any(program in c and "sha256sum --check" in c for c in _commands(recording, "CheckBootScript"))
    start = _commands(recording, "StartRuntimeOnce")
    (run_line,) = [c for c in start if c.startswith('"/usr/bin/docker" "run"')]
    # the unit's own command (render.container_command), detached and kept until the build stops it
    assert '"--detach"' in run_line and '"--rm"' not in run_line and '"${MODEL_DIR}"' in run_line
    assert plan.serving.health_path in " ".join(start) and any(c.startswith("docker stop") for c in start)
    assert start[-2] == "docker rm -f inferstack-server"  # removed whatever `docker stop` answered
    assert not [c for c in start if "credentials" in c]  # the weights are on the disk: no credentials
    cleanup = " ".join(_commands(recording, "CleanUp"))
    assert '${MODEL_ROOT:?}/models' in cleanup and "/etc/inferstack/model.env" in cleanup
    assert "{{" not in _one(recording, COMPONENT).inputs["data"]
    settings = next(c for c in _commands(recording, "CheckBootScript") if c.startswith("cat >"))
    assert "MODEL_PREFIX=" in settings and "BUNDLE_KEY" not in settings  # built for the model, not the bundle


def test_a_streaming_runtime_started_in_the_build_reads_with_a_model_reader_of_the_builds_own(run: Any) -> None:
    plan, recording = _cached_fleet(run, stream=True)
    reader = recording.named("chat-image-build-reader")
    trust = json.loads(reader.inputs["assumeRolePolicy"])["Statement"]
    assert trust == [{"Effect": "Allow", "Action": "sts:AssumeRole",
                      "Principal": {"AWS": recording.named("chat-image-build-role").outputs["arn"]}}]
    reads = json.loads(recording.named("chat-image-build-reader-model-read").inputs["policy"])
    assert reads["Statement"][1]["Resource"].endswith(f"/{plan.model.bucket_prefix}*")
    start = _commands(recording, "StartRuntimeOnce")
    # the server's own command, with the build's reader: never the build instance's own credentials
    (credentials,) = [c for c in start if "cloud_access.py runtime-credentials" in c]
    assert f"--role-arn {reader.outputs['arn']}" in credentials
    assert "--out /run/inferstack-secrets/runtime-credentials.env" in credentials
    assert '"--env-file" "/run/inferstack-secrets/runtime-credentials.env"' in " ".join(start)
    assert "/run/inferstack-secrets/runtime-credentials.env" in " ".join(_commands(recording, "CleanUp"))
    statements = json.loads(recording.named("chat-image-build-boot-script").inputs["policy"])["Statement"]
    assert statements[-1]["Sid"] == "AssumeModelReader" and statements[-1]["Resource"] == reader.outputs["arn"]


def test_the_build_starts_the_runtime_with_the_servers_own_unit_command(run: Any) -> None:
    """vLLM keys its compile caches by its configuration (the model path and every engine argument): the build's
    `docker run` is the unit's ExecStart but for detaching, keeping the container until it is removed, and the hub
    token (an environment variable, outside the key)."""
    import shlex

    from inferstack.bootstrap.options import BootstrapOptions
    from inferstack.bootstrap.render import render

    for stream in (False, True):
        plan, recording = _cached_fleet(run, stream)
        (run_line,) = [c for c in _commands(recording, "StartRuntimeOnce") if c.startswith('"/usr/bin/docker" "run"')]
        options = BootstrapOptions(region="us-east-1", model_bucket="models-bucket", model_reader_role=(
            "arn:aws:iam::123456789012:role/reader" if stream else None))
        unit = next(f["content"] for f in json.loads(render(plan, "aws", options).bundle)["files"]
                    if f["path"].endswith("inferstack-server.service"))
        (exec_start,) = [line.removeprefix("ExecStart=") for line in unit.splitlines() if line.startswith("ExecStart=")]
        built = [word for word in shlex.split(run_line) if word != "--detach"]
        assert built == [word for word in exec_start.split() if word != "--rm"]
def test_the_cache_builds_identity_reads_the_model_prefix_as_its_readers_do(run: Any) -> None:
    plan, recording = _cached_fleet(run)
    statements = json.loads(recording.named("chat-image-build-boot-script").inputs["policy"])["Statement"]
    reads, listing, files = statements
    assert reads["Action"] == "s3:GetObject" and len(reads["Resource"]) == 3  # boot.sh and the two programs
    assert listing["Action"] == "s3:ListBucket"
    assert listing["Condition"] == {"StringLike": {"s3:prefix": [f"{plan.model.bucket_prefix}*"]}}
    assert files["Resource"].endswith(f"/{plan.model.bucket_prefix}*")


def test_the_manifest_names_the_model_whose_caches_the_image_holds(run: Any) -> None:
    plan, recording = _cached_fleet(run)
    known = json.loads(_commands(recording, "WriteManifest")[1].splitlines()[1])
    assert known["runtime_caches"] == {"model": plan.model.name, "revision": plan.model.revision}
    _, plain = _baked_fleet(run)
    assert json.loads(_commands(plain, "WriteManifest")[1].splitlines()[1])["runtime_caches"] is None


@pytest.mark.parametrize("stream", [False, True])
def test_each_build_step_passes_shellcheck(run: Any, tmp_path: Path, stream: bool) -> None:
    _, recording = _cached_fleet(run, stream)
    for step in _document(recording)["phases"][0]["steps"] + _document(recording)["phases"][1]["steps"]:
        if step["action"] != "ExecuteBash":
            continue
        script = tmp_path / f"{step['name']}.sh"
        script.write_text("#!/bin/bash\n" + "\n".join(step["inputs"]["commands"]) + "\n")
        # SC1091: model.env is the server's own file, written by the model_sync phase on the build instance
        checked = subprocess.run(["shellcheck", "--shell=bash", "--exclude=SC1091", str(script)],
                                 capture_output=True, text=True)
        assert checked.returncode == 0, f"{step['name']}:\n{checked.stdout}"


def test_replaced_images_are_left_to_a_lifecycle_policy_that_keeps_the_two_newest(run: Any) -> None:
    """Image Builder's DeleteImage leaves the AMI and its snapshot behind: a replaced image stays (retain_on_delete)
    and the stack's lifecycle policy deletes all but the newest two, AMIs and snapshots included."""
    _, recording = _baked_fleet(run)
    image = _one(recording, IMAGE)
    assert image.retain_on_delete
    policy = _one(recording, "aws:imagebuilder/lifecyclePolicy:LifecyclePolicy").inputs
    assert policy["resourceType"] == "AMI_IMAGE"
    assert policy["policyDetails"] == [{"action": {"type": "DELETE", "includeResources": {"amis": True,
                                                                                         "snapshots": True}},
                                        "filter": {"type": "COUNT", "value": 2}}]
    (selected,) = policy["resourceSelection"]["tagMap"].items()
    assert image.inputs["tags"][selected[0]] == selected[1]  # it selects this stack's images by their tag
    role = recording.named("chat-image-lifecycle-role")
    assert policy["executionRole"] == role.outputs["arn"]
    assert json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Principal"] == {
        "Service": "imagebuilder.amazonaws.com"}
    attached = recording.named("chat-image-lifecycle-execution").inputs["policyArn"]
    assert attached == "arn:aws:iam::aws:policy/service-role/EC2ImageBuilderLifecycleExecutionPolicy"


@pytest.mark.parametrize("reader_arn", [None, "arn:aws:iam::123456789012:role/reader; curl evil", "reader"])
def test_a_streaming_build_refuses_a_reader_that_is_not_an_iam_role_arn(reader_arn: str | None) -> None:
    """The reader's ARN is written into the build's shell step: only an IAM role ARN's characters reach it."""
    from inferstack.components.aws.image import runtime_start_commands

    plan = sample_plan("aws", "gpu-llm", "production")
    plan = plan.model_copy(update={"startup": plan.startup.model_copy(update={
        "image": "baked", "runtime_caches": True, "model_loading": "stream"})})
    with pytest.raises(ValueError, match="IAM role ARN"):
        runtime_start_commands(plan, {"INFERSTACK_REGION": "us-east-1"}, reader_arn)
    assert runtime_start_commands(plan, {"INFERSTACK_REGION": "us-east-1"},
                                  "arn:aws:iam::123456789012:role/reader")
