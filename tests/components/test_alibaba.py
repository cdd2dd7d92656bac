"""Alibaba Cloud: capabilities, images, GPU servers, names, CDN and KMS settings, bring-your-own, prices, preview.

The cloud-neutral security properties run in test_security_invariants.py (facts_alibaba.py maps them); these
tests cover what is specific to Alibaba, for servers that stand alone (a fleet's are in test_fleet_alibaba.py).
Every program runs under Pulumi mocks (`run`, conftest.py), whose stack config carries the KMS instance and key
(`inferstack-alibaba:`).
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pulumi
import pytest
import yaml

from inferstack.components import Capability, InferenceServer, InferenceServerArgs, ServerSecrets, backend_for
from inferstack.components.alibaba.preview import PREVIEW_IMAGE_ID, PREVIEW_LOOKUPS
from inferstack.components.alibaba.servers import IMAGE_NAME_REGEX, USER_DATA_LIMIT_BYTES
from inferstack.components.alibaba.settings import CONFIG_NAMESPACE, KMS_INSTANCE_KEY, KMS_KEY_KEY
from inferstack.components.alibaba.storage import CDN_ORIGIN_ROLE
from inferstack.components.shared import NETWORK_CIDR, compressed_user_data
from inferstack.errors import InputError
from inferstack.plan import DeploymentPlan, Price
from inferstack.preview import Recording, preview_deployment, preview_stack, preview_workload, record
from tests.components.conftest import STACK_CONFIG
from tests.sample_plans import Variant, sample_plan

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "alibaba-gpu-chat"
REGION = {"alicloud:region": "ap-southeast-1"}
INSTANCE = "alicloud:ecs/instance:Instance"
RULE = "alicloud:ecs/securityGroupRule:SecurityGroupRule"
BUCKET = "alicloud:oss/bucket:Bucket"
API_KEY = "sk-alibaba-3c2b1a0f9e8d"
DOMAIN = "static.example.com"
ECS_USER_DATA_LIMIT = 32 * 1024  # ECS: 32 KB of user data, read as the Base64 text
API_ENDPOINT = {"api_domain": "api.example.com", "api_certificate": "12345678-ap-southeast-1"}


def _deploy(run: Any, plan: Any, name: str = "chat", config: dict[str, Any] | None = None,
            **args: Any) -> Recording:
    endpoint = API_ENDPOINT if plan.fleet else {}

    def program() -> pulumi.Output[dict[str, Any]]:
        server = InferenceServer(name, cast(InferenceServerArgs, {"plan": plan, "assets_domain": DOMAIN, **endpoint,
                                                                  **args}))
        return pulumi.Output.all(
            urls=server.endpoint_urls, ids=server.instance_ids, bucket=server.model_bucket_name,
            assets=server.static_assets_url, policy=server.static_assets_policy, identity=server.identity_id,
            api_key=server.api_key_ref, summary=server.plan_summary)

    recording: Recording = run(program, config={**REGION, **(config or {})})
    return recording


def _rejected(run: Any, program: Callable[[], Any], config: dict[str, Any] | None = None) -> tuple[str, Recording]:
    """The InputError a program raises, and what it had registered by then."""
    def guarded() -> str:
        with pytest.raises(InputError) as caught:
            program()
        return str(caught.value)

    recording = run(guarded, config={**REGION, **(config or {})})
    return recording.value, recording


def _standalone(plan: DeploymentPlan) -> DeploymentPlan:
    """A production plan without a fleet (as plans written before fleets read): its servers stand alone."""
    return plan.model_copy(update={"fleet": None})


def _user_data(instance: Any) -> str:
    return gzip.decompress(base64.b64decode(instance.inputs["userData"])).decode()


def _bundle(recording: Recording) -> str:
    """The boot bundle the deployment stores in its model bucket (everything the user data does not carry)."""
    (bundle,) = recording.of_type("alicloud:oss/bucketObject:BucketObject")
    content: str = bundle.inputs["content"]
    return content


def _invokes(recording: Recording, token: str) -> list[dict[str, Any]]:
    return [args for called, args in recording.invokes if called == token]


#### Capabilities ####


def test_every_capability_is_stated_with_a_reason() -> None:
    backend = backend_for("alibaba")
    assert set(backend.capabilities) == set(Capability)
    assert all(len(support.note) > 20 for support in backend.capabilities.values())
    missing = {c for c, support in backend.capabilities.items() if not support.available}
    assert missing == {Capability.DRIVER_READY_IMAGE, Capability.CDN_DEFAULT_HOSTNAME, Capability.ROLLING_UPDATE,
                       Capability.BAKED_IMAGE, Capability.MODEL_STREAMING, Capability.WARM_POOL,
                       Capability.MULTI_NODE_REPLICAS}
    assert "bootstrap installs" in backend.support(Capability.DRIVER_READY_IMAGE).note
    assert "Priority" in backend.support(Capability.ROLLING_UPDATE).note  # why ESS instance refresh is not used


#### Images and GPU servers ####


@pytest.mark.parametrize("variant", ["gpu-llm", "cpu-llm"])
def test_image_is_the_newest_ubuntu_2204_system_image_that_runs_on_the_instance_type(run: Any,
                                                                                     variant: Variant) -> None:
    plan = sample_plan("alibaba", variant, "validation")
    recording = _deploy(run, plan)
    (lookup,) = _invokes(recording, "alicloud:ecs/getImages:getImages")
    assert lookup == {"owners": "system", "nameRegex": IMAGE_NAME_REGEX, "mostRecent": True,
                      "instanceType": plan.instance_type, "osType": "linux"}
    (instance,) = recording.of_type(INSTANCE)
    assert instance.inputs["imageId"] == PREVIEW_IMAGE_ID
    assert instance.inputs["systemDiskSize"] == plan.disk_gib  # larger than the 20 GiB image
    assert instance.ignore_changes == ("imageId",)


def test_system_disk_is_never_smaller_than_the_image(run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    large_image = {"images": [{"id": "ubuntu_22_04_x64_200G_custom.vhd", "size": 200}]}
    monkeypatch.setitem(PREVIEW_LOOKUPS, "alicloud:ecs/getImages:getImages", lambda a, region: large_image)
    (instance,) = _deploy(run, sample_plan("alibaba", "cpu-llm", "validation")).of_type(INSTANCE)
    assert instance.inputs["systemDiskSize"] == 200


def test_no_ubuntu_image_for_the_instance_type_is_an_error_naming_it(run: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PREVIEW_LOOKUPS, "alicloud:ecs/getImages:getImages", lambda a, region: {"images": []})
    with pytest.raises(InputError, match=r"plan.instance_type: has no Ubuntu 22.04 system image in this region"):
        _deploy(run, sample_plan("alibaba", "gpu-llm", "validation"))


def test_gpu_server_boots_the_plain_image_and_the_bootstrap_installs_the_driver(run: Any) -> None:
    recording = _deploy(run, sample_plan("alibaba", "gpu-llm", "validation"))
    (instance,) = recording.of_type(INSTANCE)
    user_data = _user_data(instance)
    assert user_data.startswith("#cloud-config")
    assert "DEVICE=gpu" in user_data and "INFERSTACK_CLOUD=alibaba" in user_data
    assert "nvidia-headless-${NVIDIA_DRIVER_BRANCH}-server" in _bundle(recording)  # boot.sh, in the bundle


#### Servers ####


def test_servers_demand_metadata_tokens_take_the_role_and_encrypt_their_system_disk(run: Any) -> None:
    recording = _deploy(run, sample_plan("alibaba", "cpu-encoder", "internal"))
    (instance,) = recording.of_type(INSTANCE)
    role = recording.named("chat-identity-role")
    assert instance.inputs["httpTokens"] == "required" and instance.inputs["httpEndpoint"] == "enabled"
    assert instance.inputs["roleName"] == role.inputs["roleName"]
    assert instance.inputs["systemDiskEncrypted"] is True
    assert instance.inputs["systemDiskCategory"] == "cloud_essd"
    assert instance.inputs["securityGroups"] == [recording.named("chat-firewall-sg").id]
    assert "keyName" not in instance.inputs and "password" not in instance.inputs
    assert instance.inputs["deletionProtection"] is False


def test_production_spreads_replicas_over_two_vswitches_in_two_zones_with_deletion_protection(run: Any) -> None:
    recording = _deploy(run, _standalone(sample_plan("alibaba", "gpu-llm", "production")))
    instances = sorted(recording.of_type(INSTANCE), key=lambda i: i.name)
    switches = {s.id: s for s in recording.of_type("alicloud:vpc/switch:Switch")}
    assert [i.inputs["vswitchId"] in switches for i in instances] == [True, True]
    zones = [switches[i.inputs["vswitchId"]].inputs["zoneId"] for i in instances]
    assert zones == ["ap-southeast-1a", "ap-southeast-1b"]
    assert all(i.inputs["deletionProtection"] is True for i in instances)
    (zone_lookup,) = _invokes(recording, "alicloud:index/getZones:getZones")
    assert zone_lookup == {"availableInstanceType": "ecs.gn7i-c8g1.2xlarge", "availableResourceCreation": "VSwitch"}


def test_more_zones_than_sell_the_instance_type_fails_with_the_zones(run: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PREVIEW_LOOKUPS, "alicloud:index/getZones:getZones",
                        lambda a, region: {"zones": [{"id": "ap-southeast-1c"}]})
    with pytest.raises(InputError, match=r"ecs.gn7i-c8g1.2xlarge is offered in 1 zone\(s\) of this region "
                                         r"\(ap-southeast-1c\)"):
        _deploy(run, _standalone(sample_plan("alibaba", "gpu-llm", "production")))


def test_spot_servers_are_released_on_interruption_and_skip_deletion_protection(run: Any) -> None:
    plan = _standalone(sample_plan("alibaba", "cpu-llm", "production")).model_copy(update={"spot": True})
    instances = _deploy(run, plan).of_type(INSTANCE)
    assert {i.inputs["spotStrategy"] for i in instances} == {"SpotAsPriceGo"}
    assert {i.inputs["spotInterruptionBehavior"] for i in instances} == {"Terminate"}
    assert {i.inputs["deletionProtection"] for i in instances} == {False}  # Alibaba ignores it on spot


def test_user_data_is_compressed_within_the_ecs_limit(run: Any) -> None:
    (instance,) = _deploy(run, sample_plan("alibaba", "gpu-llm", "validation")).of_type(INSTANCE)
    assert len(instance.inputs["userData"]) <= ECS_USER_DATA_LIMIT
    assert _user_data(instance).startswith("#cloud-config")


def test_the_gzip_limit_is_what_fits_32_kb_of_base64() -> None:
    assert 4 * math.ceil(USER_DATA_LIMIT_BYTES / 3) == ECS_USER_DATA_LIMIT
    incompressible = base64.b64encode(random.Random(7).randbytes(60_000)).decode()
    with pytest.raises(InputError, match=r"bytes of user data; ECS accepts 24576"):
        compressed_user_data("#cloud-config\n" + incompressible, limit_bytes=USER_DATA_LIMIT_BYTES,
                             service="ECS")


def test_a_plan_for_another_region_than_the_provider_is_rejected_before_anything_is_created(run: Any) -> None:
    plan = sample_plan("alibaba", "cpu-llm", "validation")
    message, recording = _rejected(run, lambda: InferenceServer("chat", {"plan": plan}),
                                   config={"alicloud:region": "cn-hangzhou"})
    assert "was made for region ap-southeast-1 but the provider deploys to cn-hangzhou" in message
    assert "alicloud:region" in message and recording.resources == []


#### Network and firewall ####


def test_only_the_api_port_is_opened_and_egress_is_web_and_cloud_services_then_drop(run: Any) -> None:
    plan = sample_plan("alibaba", "cpu-encoder", "internal")
    rules = _deploy(run, plan, allowed_cidrs=["10.20.0.0/16"]).of_type(RULE)
    assert {r.inputs["nicType"] for r in rules} == {"intranet"}
    ingress = {(r.inputs["portRange"], r.inputs["cidrIp"]) for r in rules if r.inputs["type"] == "ingress"}
    assert ingress == {("8000/8000", "10.20.0.0/16"), ("8002/8002", NETWORK_CIDR)}
    accepted = {(r.inputs["ipProtocol"], r.inputs["portRange"], r.inputs["cidrIp"]) for r in rules
                if r.inputs["type"] == "egress" and r.inputs["policy"] == "accept"}
    assert accepted == {("tcp", "443/443", "0.0.0.0/0"), ("tcp", "80/80", "0.0.0.0/0"),
                        ("udp", "53/53", "100.100.0.0/16"), ("tcp", "53/53", "100.100.0.0/16"),
                        ("udp", "123/123", "100.100.0.0/16")}
    (drop,) = [r for r in rules if r.inputs["policy"] == "drop"]
    assert (drop.inputs["type"], drop.inputs["ipProtocol"], drop.inputs["priority"]) == ("egress", "all", 100)
    assert max(r.inputs["priority"] for r in rules if r.inputs["policy"] == "accept") < drop.inputs["priority"]


def test_security_group_isolates_its_members_from_each_other(run: Any) -> None:
    group = _deploy(run, sample_plan("alibaba", "cpu-llm", "validation")).named("chat-firewall-sg")
    assert group.inputs["innerAccessPolicy"] == "Drop" and group.inputs["vpcId"].startswith("vpc-")


#### Names ####


def test_two_servers_in_one_stack_get_distinct_urns_and_distinct_global_names(run: Any) -> None:
    plan = sample_plan("alibaba", "cpu-llm", "validation")
    recording = run(lambda: pulumi.Output.all(*(
        InferenceServer(name, {"plan": plan, "assets_domain": f"{name}.example.com",
                               "api_key": pulumi.Output.secret(API_KEY)}).endpoint_url for name in ("a", "b"))))
    urns = [r.urn for r in recording.resources]
    assert len(urns) == len(set(urns))
    for key, resource_type in (("bucket", BUCKET), ("roleName", "alicloud:ram/role:Role"),
                               ("policyName", "alicloud:ram/policy:Policy"),
                               ("secretName", "alicloud:kms/secret:Secret")):
        names = [r.inputs[key] for r in recording.of_type(resource_type)]
        assert len(names) == len(set(names)) and len(names) >= 2, resource_type


def test_bucket_and_ram_names_fit_alibaba_rules_and_differ_between_regions(run: Any) -> None:
    def names(region: str) -> list[str]:
        plan = sample_plan("alibaba", "cpu-llm", "validation").model_copy(update={"region": region})
        recording = _deploy(run, plan, config={"alicloud:region": region})
        return sorted([r.inputs["bucket"] for r in recording.of_type(BUCKET)] +
                      [r.inputs["roleName"] for r in recording.of_type("alicloud:ram/role:Role")])

    singapore, hangzhou = names("ap-southeast-1"), names("cn-hangzhou")
    assert not set(singapore) & set(hangzhou)
    for name in singapore:
        assert len(name) <= 63 and name == name.lower() and name.replace("-", "").isalnum(), name


#### CDN ####


DNS_READY = "inferstack-alibaba:assetsDnsReady"
DOMAIN_CONFIG = "alicloud:cdn/domainConfig:DomainConfig"


def _cdn_functions(recording: Recording) -> dict[str, Any]:
    return {r.inputs["functionName"]: r.inputs["functionArgs"] for r in recording.of_type(DOMAIN_CONFIG)}


def test_cdn_serves_the_configured_domain_over_https_from_the_private_bucket(run: Any) -> None:
    recording = _deploy(run, sample_plan("alibaba", "cpu-llm", "validation"), config={DNS_READY: "true"})
    domain = recording.named("chat-assets-cdn")
    bucket = recording.named("chat-assets-bucket").id
    assert domain.inputs["domainName"] == DOMAIN
    assert domain.inputs["scope"] == "overseas" and domain.inputs["cdnType"] == "web"
    assert domain.inputs["sources"] == [{"type": "oss", "content": f"{bucket}.oss-ap-southeast-1.aliyuncs.com",
                                         "port": 443, "priority": 20, "weight": 10}]
    assert domain.inputs["certificateConfig"] == {"certType": "free", "serverCertificateStatus": "on"}
    assert _cdn_functions(recording) == {"l2_oss_key": [{"argName": "private_oss_auth", "argValue": "on"}],
                                         "https_force": [{"argName": "enable", "argValue": "on"},
                                                         {"argName": "https_rewrite", "argValue": "301"}]}
    assert _invokes(recording, "alicloud:ram/getRoles:getRoles") == [{"nameRegex": f"^{CDN_ORIGIN_ROLE}$"}]
    assert recording.value["assets"] == "https://static.example.com" and recording.value["policy"] is None


def test_before_dns_points_at_the_cdn_the_domain_is_offline_and_the_deploy_says_where_to_point_it(
        caplog: pytest.LogCaptureFixture) -> None:
    plan = sample_plan("alibaba", "cpu-llm", "validation")
    first_up = {key: value for key, value in STACK_CONFIG.items() if key != DNS_READY}  # the default: not ready
    recording = record(lambda: InferenceServer("chat", {"plan": plan, "assets_domain": DOMAIN}).static_assets_url,
                       config=first_up)

    domain = recording.named("chat-assets-cdn")
    assert "certificateConfig" not in domain.inputs  # a free certificate would be refused before the CNAME exists
    assert domain.inputs["status"] == "offline"  # so it serves nothing, never plain HTTP
    # No redirect to an HTTPS the domain cannot serve yet; the origin stays private all along.
    assert _cdn_functions(recording) == {"l2_oss_key": [{"argName": "private_oss_auth", "argValue": "on"}]}
    assert (f"chat-assets: {DOMAIN} is offline (it serves nothing until it has HTTPS). Point its CNAME at "
            f"{DOMAIN}.w.kunlunsl.com; once that resolves, run `pulumi config set {DNS_READY} true` and `pulumi up`"
            in caplog.text)


def test_once_dns_is_ready_the_next_up_adds_the_free_certificate_in_place_and_forces_https(
        run: Any, caplog: pytest.LogCaptureFixture) -> None:
    plan = sample_plan("alibaba", "cpu-llm", "validation")
    first = _deploy(run, plan, config={DNS_READY: "false"}).named("chat-assets-cdn")
    caplog.clear()
    second = _deploy(run, plan, config={DNS_READY: "true"})
    domain = second.named("chat-assets-cdn")
    # Only the certificate and the status change on the domain: both are updated in place (not ForceNew).
    assert {key for key in first.inputs.keys() | domain.inputs.keys()
            if first.inputs.get(key) != domain.inputs.get(key)} == {"certificateConfig", "status"}
    assert domain.inputs["status"] == "online"
    assert domain.inputs["certificateConfig"] == {"certType": "free", "serverCertificateStatus": "on"}
    assert _cdn_functions(second)["https_force"] == [{"argName": "enable", "argValue": "on"},
                                                     {"argName": "https_rewrite", "argValue": "301"}]
    assert "is offline" not in caplog.text


def test_a_dns_ready_setting_that_is_not_true_or_false_is_refused_before_anything_is_created(run: Any) -> None:
    plan = sample_plan("alibaba", "cpu-llm", "validation")
    message, recording = _rejected(run, lambda: InferenceServer("chat", {"plan": plan, "assets_domain": DOMAIN}),
                                   {DNS_READY: "yes"})
    assert f"{DNS_READY}: is not true or false (got 'yes')" in message
    assert recording.resources == []


def test_a_mainland_region_serves_the_cdn_domestically(run: Any) -> None:
    plan = sample_plan("alibaba", "cpu-llm", "validation").model_copy(update={"region": "cn-hangzhou"})
    recording = _deploy(run, plan, config={"alicloud:region": "cn-hangzhou"})
    assert recording.named("chat-assets-cdn").inputs["scope"] == "domestic"


def test_static_assets_without_a_domain_are_refused_before_anything_is_created(run: Any) -> None:
    plan = sample_plan("alibaba", "cpu-llm", "validation")
    message, recording = _rejected(run, lambda: InferenceServer("chat", {"plan": plan}))
    assert "chat.assets_domain: is required on Alibaba Cloud: Alibaba Cloud CDN accelerates only a domain" in message
    assert "inferstack:assetsDomain" in message and "static_assets false" in message
    assert recording.resources == []


def test_a_certificate_is_refused_because_alibaba_issues_the_domains_own(run: Any) -> None:
    plan = sample_plan("alibaba", "cpu-llm", "validation")
    message, recording = _rejected(run, lambda: InferenceServer("chat", {
        "plan": plan, "assets_domain": DOMAIN, "assets_certificate": "cas-123"}))
    assert "chat.assets_certificate: is not used on Alibaba Cloud" in message and recording.resources == []


def test_a_malformed_domain_is_rejected_naming_the_argument_before_anything_is_created(run: Any) -> None:
    plan = sample_plan("alibaba", "cpu-llm", "validation")
    message, recording = _rejected(run, lambda: InferenceServer("chat", {
        "plan": plan, "assets_domain": "https://static.example.com/"}))
    assert "chat.assets_domain: is not a lowercase DNS name (got 'https://static.example.com/')" in message
    assert recording.resources == []


def test_missing_cdn_origin_authorisation_stops_the_cdn_with_the_fix(run: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PREVIEW_LOOKUPS, "alicloud:ram/getRoles:getRoles",
                        lambda a, region: {"roles": [], "names": [], "ids": []})
    with pytest.raises(InputError, match=rf"needs the account's {CDN_ORIGIN_ROLE}.*authorise it once"):
        _deploy(run, sample_plan("alibaba", "cpu-llm", "validation"))


#### Secrets and identity ####


def test_api_key_is_a_kms_secret_in_the_configured_instance_readable_by_this_role_only(run: Any) -> None:
    plan = sample_plan("alibaba", "gpu-llm", "validation")
    recording = _deploy(run, plan, allowed_cidrs=["0.0.0.0/0"], api_key=pulumi.Output.secret(API_KEY))
    (secret,) = recording.of_type("alicloud:kms/secret:Secret")
    assert secret.inputs["secretName"] == "inferstack/inferstack/test/chat-secrets/api-key"
    assert secret.inputs["dkmsInstanceId"] == STACK_CONFIG[f"{CONFIG_NAMESPACE}:{KMS_INSTANCE_KEY}"]
    assert secret.inputs["encryptionKeyId"] == STACK_CONFIG[f"{CONFIG_NAMESPACE}:{KMS_KEY_KEY}"]
    assert secret.inputs["forceDeleteWithoutRecovery"] is True
    assert secret.masked_inputs["secretData"] == "[secret]"
    policy = json.loads(recording.named("chat-identity-secrets-read").inputs["policyDocument"])
    assert policy["Statement"] == [{"Effect": "Allow", "Action": "kms:GetSecretValue",
                                    "Resource": [secret.outputs["arn"]]}]
    assert recording.value["api_key"] == secret.inputs["secretName"]
    (instance,) = recording.of_type(INSTANCE)
    assert secret.inputs["secretName"] in _bundle(recording)  # the gateway fetches it by name at each start
    assert API_KEY not in _user_data(instance) and API_KEY not in _bundle(recording)


@pytest.mark.parametrize("component", [
    lambda: InferenceServer("chat", {"plan": sample_plan("alibaba", "cpu-llm", "validation"), "static_assets": False,
                                     "api_key": API_KEY}),
    lambda: ServerSecrets("chat", {"cloud": "alibaba", "api_key": API_KEY}),
])
def test_secrets_without_a_kms_instance_are_rejected_naming_both_keys_before_anything_is_created(
        component: Callable[[], Any]) -> None:
    without_kms = {key: value for key, value in STACK_CONFIG.items() if not key.startswith(CONFIG_NAMESPACE)}

    def program() -> str:
        with pytest.raises(InputError) as caught:
            component()
        return str(caught.value)

    recording = record(program, config=without_kms)
    assert "needs inferstack-alibaba:kmsInstanceId and inferstack-alibaba:kmsKeyId" in recording.value
    assert recording.resources == []


def test_a_malformed_kms_id_is_rejected_naming_the_key(run: Any) -> None:
    plan = sample_plan("alibaba", "cpu-llm", "validation")
    message, recording = _rejected(run, lambda: InferenceServer("chat", {"plan": plan, "api_key": API_KEY}),
                                   config={"inferstack-alibaba:kmsKeyId": "alias/my-key"})
    assert "inferstack-alibaba:kmsKeyId: is not a KMS id (got 'alias/my-key')" in message
    assert recording.resources == []


def test_role_trusts_ecs_only_and_reads_the_model_prefix_of_one_bucket(run: Any) -> None:
    plan = sample_plan("alibaba", "cpu-llm", "validation")
    recording = _deploy(run, plan)
    trust = json.loads(recording.named("chat-identity-role").inputs["assumeRolePolicyDocument"])
    assert trust["Statement"] == [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                   "Principal": {"Service": ["ecs.aliyuncs.com"]}}]
    bucket = recording.named("chat-store-models").id
    statements = json.loads(recording.named("chat-identity-model-read").inputs["policyDocument"])["Statement"]
    assert statements == [
        {"Effect": "Allow", "Action": "oss:ListObjects", "Resource": f"acs:oss:*:*:{bucket}",
         "Condition": {"StringLike": {"oss:Prefix": [f"{plan.model.bucket_prefix}*"]}}},
        {"Effect": "Allow", "Action": "oss:GetObject", "Resource": [f"acs:oss:*:*:{bucket}/{plan.model.bucket_prefix}*",
                                                                    f"acs:oss:*:*:{bucket}/inferstack/bootstrap/*"]}]
    attachments = recording.of_type("alicloud:ram/rolePolicyAttachment:RolePolicyAttachment")
    assert {(a.inputs["policyType"], a.inputs["roleName"]) for a in attachments} == {
        ("Custom", recording.named("chat-identity-role").inputs["roleName"])}


#### Bring your own ####


def test_brought_pieces_are_used_as_given_and_nothing_is_created_for_them(run: Any) -> None:
    plan = _standalone(sample_plan("alibaba", "gpu-llm", "production"))
    recording = _deploy(run, plan, network_id="vpc-byo", subnet_ids=["vsw-byoa", "vsw-byob"],
                        security_group_ids=["sg-byo"], instance_identity="byo-role", model_bucket="byo-models",
                        assets_bucket="byo-assets")
    created = {r.type.split(":")[1].split("/")[0] + "/" + r.type.split(":")[-1] for r in recording.resources
               if r.custom}
    # + the boot bundle, and where the servers' logs go (create_telemetry: nothing to bring for it)
    assert created == {"ecs/Instance", "cdn/DomainNew", "cdn/DomainConfig", "oss/BucketObject", "log/Project",
                       "log/Store", "log/MachineGroup", "log/LogTailConfig", "log/LogTailAttachment"}
    instances = sorted(recording.of_type(INSTANCE), key=lambda i: i.name)
    assert [i.inputs["vswitchId"] for i in instances] == ["vsw-byoa", "vsw-byob"]
    assert {tuple(i.inputs["securityGroups"]) for i in instances} == {("sg-byo",)}
    assert {i.inputs["roleName"] for i in instances} == {"byo-role"}
    assert "byo-models" in _user_data(instances[0])  # the bootstrap syncs the brought bucket
    assert recording.named("chat-bundle").inputs["bucket"] == "byo-models"
    (source,) = recording.named("chat-assets-cdn").inputs["sources"]
    assert source["content"] == "byo-assets.oss-ap-southeast-1.aliyuncs.com"
    assert recording.value["bucket"] == "byo-models" and recording.value["identity"] is None


def test_a_brought_network_without_a_firewall_opens_the_api_to_the_vpc_range_it_looks_up(run: Any) -> None:
    plan = sample_plan("alibaba", "cpu-llm", "validation")
    recording = _deploy(run, plan, network_id="vpc-byo", subnet_ids=["vsw-byoa"])
    assert _invokes(recording, "alicloud:vpc/getNetworks:getNetworks") == [{"ids": ["vpc-byo"]}]
    ingress = [r for r in recording.of_type(RULE) if r.inputs["type"] == "ingress"]
    assert [r.inputs["cidrIp"] for r in ingress] == ["10.0.0.0/16"]  # the preview's answer for a brought VPC
    assert not recording.of_type("alicloud:vpc/network:Network")


#### Prices ####


def test_plan_summary_states_the_price_in_cny(run: Any) -> None:
    plan = sample_plan("alibaba", "gpu-llm", "production")
    summary = _deploy(run, plan).value["summary"]
    assert summary["monthly_cost"] == str(plan.price.monthly) and summary["monthly_cost"].endswith(" CNY")
    assert plan.price.monthly_ranking and summary["summary"].endswith(f"{plan.price.monthly_ranking}/month")


def test_a_plan_without_a_known_price_still_deploys_and_says_the_price_is_unknown(run: Any) -> None:
    unknown = Price(hourly_per_instance=None, monthly=None, monthly_ranking=None, per_million_output_tokens=None,
                    source=None, source_date=None, priced_region=None)
    plan = sample_plan("alibaba", "cpu-llm", "validation").model_copy(update={"price": unknown})
    recording = _deploy(run, plan)
    assert len(recording.of_type(INSTANCE)) == 1
    assert recording.value["summary"]["monthly_cost"] is None
    assert recording.value["summary"]["summary"].endswith("price unknown")
    assert "Monthly cost estimate: price unknown" in preview_deployment(plan).render_tree()


#### Preview, example, stack ####


def test_preview_of_a_workload_shows_the_alibaba_resources_and_the_cny_cost() -> None:
    result = preview_workload(EXAMPLE / "workload.yaml", cloud="alibaba", assets_domain=DOMAIN)
    assert result.notes == []
    types = {r.type for r in result.resources if r.custom}
    assert all(t.startswith("alicloud:") for t in types)
    assert INSTANCE in types and "alicloud:cdn/domainNew:DomainNew" in types
    tree = result.render_tree()
    assert "CNY/month" in tree and "httpTokens=required" in tree


def test_dev_stack_is_a_small_validation_deployment_without_cdn() -> None:
    config = yaml.safe_load((REPO / "stacks" / "Pulumi.alibaba-dev.yaml").read_text())["config"]
    result = preview_stack(config, stack="alibaba-dev")
    assert result.plan.cloud == "alibaba" and result.plan.stage == "validation" and result.plan.instance_count == 1
    assert not [r for r in result.resources if r.type.startswith("alicloud:cdn/")]
    assert result.outputs["plan"]["monthly_cost"].endswith(" CNY")
