"""Huawei Cloud specifics: capabilities, CDN domain and certificate, network and NAT, elastic IPs only for public
endpoints, image lookup, agency grants, names, bring-your-own, plans without a price, the dev stack, the example.

The cloud-neutral security invariants run for Huawei in test_security_invariants.py (facts_huawei.py).
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import runpy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from inferstack.components import Capability, InferenceServer, backend_for
from inferstack.components.huawei import preview as huawei_preview
from inferstack.components.huawei import storage as huawei_storage
from inferstack.components.huawei.lookups import FLAVORS_LOOKUP, IMAGES_LOOKUP
from inferstack.components.huawei.servers import USER_DATA_LIMIT_BYTES, choose_image
from inferstack.components.observability import alarm_rules
from inferstack.errors import InputError
from inferstack.preview import Recording, RegisteredResource, preview_deployment, preview_stack, record
from tests.components.neutral_view import FACT_MAPPERS
from tests.sample_plans import sample_plan

# Brought ids: Huawei's VPC, subnet and security group ids are UUIDs
VPC = "0b1e55ed-0000-4000-8000-000000000001"
SUBNET_A = "0b1e55ed-0000-4000-8000-000000000002"
SUBNET_B = "0b1e55ed-0000-4000-8000-000000000003"
GROUP_ID = "0b1e55ed-0000-4000-8000-000000000004"

REPO = Path(__file__).resolve().parents[2]
REGION = "ap-southeast-3"
DOMAIN, CERTIFICATE = "assets.example.com", "scs1700000000001"
CDN = {"assets_domain": DOMAIN, "assets_certificate": CERTIFICATE}
API = {"api_domain": "api.example.com", "api_certificate": "0123456789abcdef0123456789abcdef"}  # a fleet's endpoint
CONFIG = {"huaweicloud:region": REGION}
API_KEY = "sk-huawei-0a1b2c3d4e5f"
MODEL_PREFIX = "models/llama-3.1-8b/bf16/"


def _deploy(run: Any, variant: str = "gpu-llm", stage: str = "internal", *, loose: bool = False,
            config: dict[str, Any] | None = None, stack: str = "test", **args: Any) -> Recording:
    """`loose`: a production plan's servers one by one (the plan without its fleet): several zones, no group."""
    plan = sample_plan("huawei", variant, stage)
    if loose:
        plan = plan.model_copy(update={"fleet": None})

    def program() -> pulumi.Output[dict[str, Any]]:
        server = InferenceServer("chat", {"plan": plan, **CDN, **(API if plan.fleet else {}), **args})
        return pulumi.Output.all(urls=server.endpoint_urls, public=server.public_ips, private=server.private_ips,
                                 bucket=server.model_bucket_name, assets=server.static_assets_url,
                                 identity=server.identity_id, api_key_ref=server.api_key_ref)

    return run(program, config=CONFIG if config is None else config, stack=stack)


def _of(recording: Recording, short_type: str) -> list[RegisteredResource]:
    """By short type ("Loadbalancer"), or by module and type where two modules share one ("As/group:Group", not
    the load balancer's log group "Lts/group:Group")."""
    return [r for r in recording.resources
            if r.custom and (r.type.split(":", 1)[1] if "/" in short_type else r.type.split(":")[-1]) == short_type]


def _policy(resource: RegisteredResource) -> dict[str, Any]:
    policy: dict[str, Any] = json.loads(resource.inputs["policy"])
    return policy


#### Capabilities ####


def test_the_capability_table_states_what_the_provider_cannot_do_with_reasons() -> None:
    backend = backend_for("huawei")
    missing = {c for c, support in backend.capabilities.items() if not support.available}
    assert missing == {Capability.METADATA_HARDENING, Capability.BUCKET_PUBLIC_ACCESS_BLOCK,
                       Capability.CDN_DEFAULT_HOSTNAME, Capability.MANAGED_SHELL, Capability.SECRET_SCOPED_GRANTS,
                       Capability.TERMINATION_PROTECTION, Capability.LOCAL_NVME_CACHE, Capability.ROLLING_UPDATE,
                       Capability.SPOT_ABOVE_FLOOR, Capability.BAKED_IMAGE,
                       Capability.MODEL_STREAMING, Capability.WARM_POOL, Capability.MULTI_NODE_REPLICAS}
    assert "instance refresh" in backend.support(Capability.ROLLING_UPDATE).note
    assert "0.0.12" in backend.support(Capability.METADATA_HARDENING).note
    assert "public-access-block" in backend.support(Capability.BUCKET_PUBLIC_ACCESS_BLOCK).note
    assert "resource-level CSMS" in backend.support(Capability.SECRET_SCOPED_GRANTS).note
    scaling = backend.support(Capability.REQUEST_AUTOSCALING).note
    assert "never per server" in scaling and "custom namespace" in scaling and "not tried on a real project" in scaling
    assert "agency_name" in backend.support(Capability.MANAGED_FLEET).note
    assert "tls-1-2-fs-with-1-3" in backend.support(Capability.LOAD_BALANCER_TLS).note


@pytest.mark.parametrize(("args", "expected"), [
    ({}, "chat.assets_domain: is required on Huawei Cloud: Huawei CDN accelerates only a domain you own"),
    ({"assets_domain": DOMAIN}, "chat.assets_certificate: is required with a domain on Huawei Cloud: the id of the "
                                "domain's certificate in SCM"),
    ({"assets_domain": DOMAIN, "assets_certificate": "cert-1"}, "chat.assets_certificate: is not the id of the "
                                                               "domain's certificate in SCM"),
    ({"assets_certificate": CERTIFICATE}, "chat.assets_certificate: is given without a domain"),
])
def test_static_assets_without_a_domain_and_its_certificate_are_refused_before_anything_is_created(
        args: dict[str, str], expected: str) -> None:
    plan = sample_plan("huawei", "gpu-llm", "internal")

    def program() -> str:
        with pytest.raises(InputError) as caught:
            InferenceServer("chat", {"plan": plan, **args})  # type: ignore[typeddict-item]
        return str(caught.value)

    recording = record(program, config=CONFIG)
    assert expected in recording.value
    assert recording.resources == []


def test_without_static_assets_no_cdn_settings_are_needed(run: Any) -> None:
    recording = _deploy(run, static_assets=False, config={"huaweicloud:region": REGION})
    assert not _of(recording, "Domain")
    assert sorted(b.name for b in _of(recording, "Bucket")) == ["chat-store-data", "chat-store-logs",
                                                                   "chat-store-models"]


#### Network and firewall ####


def test_network_is_a_vpc_with_one_subnet_per_zone_and_nat_egress(run: Any) -> None:
    recording = _deploy(run, stage="production", loose=True)
    (vpc,) = _of(recording, "Vpc")
    subnets = sorted(_of(recording, "Subnet"), key=lambda s: s.name)
    assert vpc.inputs["cidr"] == "10.64.0.0/16"
    assert [(s.inputs["cidr"], s.inputs["gatewayIp"]) for s in subnets] == [
        ("10.64.0.0/20", "10.64.0.1"), ("10.64.16.0/20", "10.64.16.1")]
    assert [s.inputs["availabilityZone"] for s in subnets] == [f"{REGION}a", f"{REGION}b"]
    (gateway,) = _of(recording, "Gateway")
    (nat_address,) = _of(recording, "Eip")  # a private endpoint: the NAT gateway's address is the only one
    rules = _of(recording, "SnatRule")
    assert gateway.inputs["vpcId"] == vpc.id
    assert {r.inputs["subnetId"] for r in rules} == {s.id for s in subnets}
    assert {r.inputs["floatingIpId"] for r in rules} == {nat_address.id}


def test_security_group_drops_the_default_rules_and_opens_only_what_the_server_needs(run: Any) -> None:
    recording = _deploy(run, variant="cpu-encoder")
    (group,) = _of(recording, "Secgroup")
    assert group.inputs["deleteDefaultRules"] is True
    rules = {(r.inputs["direction"], r.inputs["protocol"], r.inputs["portRangeMin"], r.inputs["remoteIpPrefix"])
             for r in _of(recording, "SecgroupRule")}
    assert rules == {
        ("ingress", "tcp", 8000, "10.64.0.0/16"), ("ingress", "tcp", 8002, "10.64.0.0/16"),
        ("egress", "tcp", 443, "0.0.0.0/0"), ("egress", "tcp", 80, "0.0.0.0/0"),
        ("egress", "udp", 53, "100.125.0.0/16"), ("egress", "tcp", 53, "100.125.0.0/16"),
        ("egress", "udp", 123, "100.125.0.0/16")}


def test_replicas_are_spread_over_the_zones_of_their_subnets(run: Any) -> None:
    recording = _deploy(run, stage="production", loose=True)
    zone_of_subnet = {s.id: s.inputs["availabilityZone"] for s in _of(recording, "Subnet")}
    servers = _of(recording, "Instance")
    zones = [s.inputs["availabilityZone"] for s in servers]
    assert len(set(zones)) == 2
    assert all(zone_of_subnet[s.inputs["networks"][0]["uuid"]] == s.inputs["availabilityZone"] for s in servers)


def test_a_flavor_sold_in_too_few_zones_fails_at_lookup_with_the_zones(run: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    sold_everywhere = huawei_preview.PREVIEW_LOOKUPS[FLAVORS_LOOKUP]
    monkeypatch.setitem(huawei_preview.PREVIEW_LOOKUPS, FLAVORS_LOOKUP, lambda a, c: (
        sold_everywhere(a, c) if a["availabilityZone"] == f"{REGION}a" else {**sold_everywhere(a, c), "ids": []}))
    plan = sample_plan("huawei", "gpu-llm", "production")
    with pytest.raises(InputError, match=rf"plan.zones: {plan.instance_type} is offered in 1 zone\(s\) of this "
                                         rf"region \({REGION}a\) \(got 2\)"):
        _deploy(run, stage="production")


#### Elastic IPs only for public endpoints ####


def test_a_private_endpoint_gets_no_public_address(run: Any) -> None:
    recording = _deploy(run, stage="production", loose=True)
    assert not _of(recording, "EipAssociate")
    assert recording.value["public"] == ["", ""]
    assert all(url.startswith("http://10.64.") for url in recording.value["urls"])


def test_private_allowed_networks_do_not_get_a_public_address(run: Any) -> None:
    recording = _deploy(run, allowed_cidrs=["10.20.0.0/16"])
    assert not _of(recording, "EipAssociate") and recording.value["public"] == [""]


def test_a_public_endpoint_gives_each_server_its_own_elastic_ip(run: Any) -> None:
    recording = _deploy(run, stage="production", loose=True, allowed_cidrs=["203.0.113.0/24"], api_key=API_KEY)
    associations = _of(recording, "EipAssociate")
    servers = {s.id for s in _of(recording, "Instance")}
    addresses = {e.outputs["address"] for e in _of(recording, "Eip") if e.name.startswith("chat-server-")}
    assert {a.inputs["instanceId"] for a in associations} == servers
    assert {a.inputs["publicIp"] for a in associations} == addresses == set(recording.value["public"])
    assert {url.split("//")[1].split(":")[0] for url in recording.value["urls"]} == addresses


#### Storage ####


def test_buckets_are_private_encrypted_versioned_and_refuse_plain_http(run: Any) -> None:
    recording = _deploy(run)
    buckets = _of(recording, "Bucket")
    assert len(buckets) == 4  # models, data, logs, assets
    for bucket in buckets:
        inputs = bucket.inputs
        assert (inputs["acl"], inputs["encryption"], inputs["sseAlgorithm"], inputs["versioning"]) == (
            "private", True, "AES256", True)
        assert inputs["policyFormat"] == "obs"
        (statement,) = _policy(bucket)["Statement"]
        assert statement["Effect"] == "Deny" and statement["Condition"] == {"Bool": {"SecureTransport": ["false"]}}
        assert statement["Resource"] == [bucket.id, f"{bucket.id}/*"]
    (logs,) = [b for b in buckets if b.name == "chat-store-logs"]
    assert logs.inputs["lifecycleRules"][0]["expirations"] == [{"days": 365}]


def test_bucket_names_are_deterministic_bounded_and_unique_per_stack_and_account(
        run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def names(stack: str) -> set[str]:
        return {b.id for b in _of(_deploy(run, static_assets=False, stack=stack), "Bucket")}

    dev = names("dev")
    assert dev == names("dev")
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]", n) and n.startswith("inferstack-dev-") for n in dev)
    assert not dev & names("prod")
    monkeypatch.setattr(huawei_preview, "PREVIEW_PROJECT_ID", "fedcba9876543210fedcba9876543210")  # another account
    assert not dev & names("dev")


def test_access_logs_are_written_by_an_obs_agency_that_may_only_write_the_logs_bucket(run: Any) -> None:
    recording = _deploy(run, static_assets=False)
    logs = recording.named("chat-store-logs").id
    delivery = recording.named("chat-store-log-delivery").inputs
    writer = recording.named("chat-store-log-write").inputs
    assert delivery["delegatedServiceName"] == "op_svc_obs" and delivery["domainRoles"] == [writer["name"]]
    assert json.loads(writer["policy"])["Statement"] == [
        {"Effect": "Allow", "Action": ["obs:object:PutObject"], "Resource": [f"obs:*:*:object:{logs}/*"]}]
    for purpose in ("models", "data"):
        assert recording.named(f"chat-store-{purpose}").inputs["loggings"] == [
            {"targetBucket": logs, "targetPrefix": f"{purpose}/", "agency": delivery["name"]}]


#### Secrets and identity ####


def test_the_agency_lets_ecs_read_only_the_model_prefix(run: Any) -> None:
    recording = _deploy(run)
    agency = recording.named("chat-identity-agency").inputs
    model_read = recording.named("chat-identity-model-read").inputs
    bucket = recording.named("chat-store-models").id
    assert agency["delegatedServiceName"] == "op_svc_ecs" and agency["domainRoles"] == [model_read["name"]]
    assert "projectRoles" not in agency  # no secrets, no secrets grant
    assert model_read["type"] == "AX"
    assert json.loads(model_read["policy"]) == {"Version": "1.1", "Statement": [{
        "Effect": "Allow", "Action": ["obs:object:GetObject"],
        "Resource": [f"obs:*:*:object:{bucket}/{MODEL_PREFIX}*", f"obs:*:*:object:{bucket}/inferstack/bootstrap/*"]}]}
    assert {s.inputs["agencyName"] for s in _of(recording, "Instance")} == {agency["name"]}


def test_secrets_are_read_with_a_grant_limited_to_the_region_project(run: Any) -> None:
    recording = _deploy(run, api_key=API_KEY)
    agency = recording.named("chat-identity-agency").inputs
    secrets_read = recording.named("chat-identity-secrets-read").inputs
    assert agency["projectRoles"] == [{"project": REGION, "roles": [secrets_read["name"]]}]
    assert secrets_read["type"] == "XA"
    assert json.loads(secrets_read["policy"])["Statement"] == [
        {"Effect": "Allow", "Action": ["csms:secretVersion:get", "kms:dek:decrypt"]}]


def test_the_api_key_is_a_csms_secret_the_server_reads_by_name(run: Any) -> None:
    recording = _deploy(run, allowed_cidrs=["0.0.0.0/0"], api_key=API_KEY)
    (secret,) = _of(recording, "Secret")
    name = secret.inputs["name"]
    assert len(name) <= 64 and name.endswith("-api-key") and re.fullmatch(r"[a-z0-9-]+", name)
    assert secret.inputs["secretText"] == API_KEY and secret.masked_inputs["secretText"] == "[secret]"
    assert recording.value["api_key_ref"] == name
    (bundle,) = _of(recording, "BucketObject")
    assert name in bundle.inputs["content"] and API_KEY not in bundle.inputs["content"]  # fetched by name at start
    for server in _of(recording, "Instance"):
        assert API_KEY not in gzip.decompress(base64.b64decode(server.inputs["userData"])).decode()


def test_iam_names_fit_huawei_limits_and_differ_per_stack(run: Any) -> None:
    def names(stack: str) -> set[str]:
        recording = _deploy(run, api_key=API_KEY, stack=stack)
        return {r.inputs["name"] for r in _of(recording, "Role") + _of(recording, "Agency")}

    dev = names("dev")
    assert len(dev) == 7  # model-read, secrets-read, agency; two log writers and their agencies
    assert all(len(n) <= 64 for n in dev)
    assert not dev & names("prod")


#### Compute ####


def test_gpu_servers_boot_the_tesla_driver_image_and_cpu_servers_plain_ubuntu(run: Any) -> None:
    backend = backend_for("huawei")
    for variant, expected in (("gpu-llm", "Ubuntu 22.04 server 64bit with Tesla Driver"),
                              ("cpu-llm", "Ubuntu 22.04 server 64bit")):
        recording = _deploy(run, variant=variant)
        plan = sample_plan("huawei", variant, "internal")
        (lookup,) = [args for token, args in recording.invokes if token == IMAGES_LOOKUP]
        assert lookup == {"nameRegex": r"^Ubuntu\ 22\.04\ server\ 64bit", "visibility": "public",
                          "flavorId": plan.instance_type}
        images = backend.preview_invoke(IMAGES_LOOKUP, lookup)["images"]
        (server,) = _of(recording, "Instance")
        (chosen,) = [i for i in images if i["id"] == server.inputs["imageId"]]
        assert chosen["name"].startswith(expected) and (variant.startswith("gpu") or chosen["name"] == expected)
        assert server.inputs["flavorId"] == plan.instance_type


def test_choose_image_prefers_the_newest_driver_ready_image_and_falls_back_to_plain_ubuntu() -> None:
    gpu, cpu = sample_plan("huawei", "gpu-llm"), sample_plan("huawei", "cpu-llm")
    plain = {"id": "plain", "name": "Ubuntu 22.04 server 64bit", "createdAt": "2025-03-01T00:00:00Z"}
    old = {"id": "old", "name": "Ubuntu 22.04 server 64bit with Tesla Driver 470.57.02 and CUDA 11.4",
           "createdAt": "2024-01-01T00:00:00Z"}
    new = {"id": "new", "name": "Ubuntu 22.04 server 64bit with Tesla Driver 535.54.03 and CUDA 12.2",
           "createdAt": "2025-01-01T00:00:00Z"}
    other = {"id": "other", "name": "Ubuntu 22.04 server 64bit for SAP", "createdAt": "2026-01-01T00:00:00Z"}
    assert choose_image([plain, old, new, other], gpu)["id"] == "new"
    assert choose_image([plain, other], gpu)["id"] == "plain"  # the bootstrap installs the driver
    assert choose_image([plain, old, new], cpu)["id"] == "plain"
    with pytest.raises(InputError, match=re.escape("plan.instance_type: no public 'Ubuntu 22.04 server 64bit' image")):
        choose_image([new, other], cpu)


def test_the_system_disk_is_encrypted_with_the_evs_key_and_never_smaller_than_the_image(
        run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    recording = _deploy(run)
    (server,) = _of(recording, "Instance")
    (key_lookup,) = [args for token, args in recording.invokes if token == "huaweicloud:Dew/getKey:getKey"]
    key = backend_for("huawei").preview_invoke("huaweicloud:Dew/getKey:getKey", key_lookup)
    assert key_lookup == {"keyAlias": "evs/default"}
    assert server.inputs["systemDiskKmsKeyId"] == key["keyId"]
    assert (server.inputs["systemDiskType"], server.inputs["systemDiskSize"]) == ("GPSSD", 100)  # the plan's disk

    def large_image(args: dict[str, Any], context: Any) -> dict[str, Any]:
        answer = huawei_preview._preview_images(args, context)
        return {**answer, "images": [{**image, "minDiskGb": 200} for image in answer["images"]]}

    monkeypatch.setitem(huawei_preview.PREVIEW_LOOKUPS, IMAGES_LOOKUP, large_image)
    (server,) = _of(_deploy(run), "Instance")
    assert server.inputs["systemDiskSize"] == 200


def test_user_data_is_gzip_base64_within_the_ecs_limit_and_cloud_init_unpacks_it(run: Any) -> None:
    (server,) = _of(_deploy(run, variant="cpu-llm", api_key=API_KEY), "Instance")
    packed = base64.b64decode(server.inputs["userData"], validate=True)
    text = gzip.decompress(packed).decode()
    assert len(packed) <= USER_DATA_LIMIT_BYTES and text.startswith("#cloud-config")
    system_python = shutil.which("python3", path="/usr/bin")
    probe = "import cloudinit.user_data" if system_python else None
    if not system_python or subprocess.run([system_python, "-c", probe or ""], capture_output=True).returncode:
        pytest.skip("cloud-init's Python package is not installed (apt-get install cloud-init)")
    unpacked = subprocess.run(
        [system_python, "-c", "import sys; from cloudinit.user_data import convert_string; "
         "part = next(p for p in convert_string(sys.stdin.buffer.read()).walk() if not p.is_multipart()); "
         "sys.stdout.buffer.write(part.get_payload(decode=True))"],
        input=packed, capture_output=True, check=True).stdout
    assert unpacked.decode() == text


def test_spot_plans_run_on_spot_capacity(run: Any) -> None:
    plan = sample_plan("huawei", "cpu-llm", "validation").model_copy(update={"spot": True})
    recording = run(lambda: InferenceServer("chat", {"plan": plan, "static_assets": False}).endpoint_url,
                    config={"huaweicloud:region": REGION})
    assert {s.inputs["chargingMode"] for s in _of(recording, "Instance")} == {"spot"}


def test_a_newer_image_does_not_replace_a_running_server(run: Any) -> None:
    recording = _deploy(run, stage="production", loose=True)
    assert {s.ignore_changes for s in _of(recording, "Instance")} == {("imageId",)}


#### CDN ####


def test_the_cdn_serves_the_configured_domain_over_https_from_the_private_bucket(run: Any) -> None:
    recording = _deploy(run)
    domain = recording.named("chat-assets-cdn").inputs
    bucket = recording.named("chat-assets-bucket")
    assert domain["name"] == "assets.example.com" and domain["type"] == "web"
    assert domain["serviceArea"] == "outside_mainland_china"
    assert domain["sources"] == [{"origin": bucket.outputs["bucketDomainName"], "originType": "obs_bucket",
                                  "obsBucketType": "private", "active": 1}]
    https = domain["configs"]["httpsSettings"]
    assert (https["httpsEnabled"], https["certificateSource"], https["scmCertificateId"]) == (
        True, 2, "scs1700000000001")
    assert domain["configs"]["forceRedirect"] == {"enabled": True, "type": "https", "redirectCode": 301}
    assert domain["configs"]["originProtocol"] == "https"
    assert recording.value["assets"] == f"https://{DOMAIN}"


def test_mainland_china_regions_are_served_in_mainland_china() -> None:
    assert huawei_storage._service_area("cn-north-4") == "mainland_china"
    assert huawei_storage._service_area("ap-southeast-1") == "outside_mainland_china"  # Hong Kong


#### Bring your own ####


def test_everything_brought_leaves_only_servers_cdn_and_secrets_to_create(run: Any) -> None:
    recording = _deploy(run, stage="production", loose=True, network_id=VPC, subnet_ids=[SUBNET_A, SUBNET_B],
                        security_group_ids=[GROUP_ID], instance_identity="team-agency",
                        model_bucket="team-models", assets_bucket="team-assets", api_key=API_KEY)
    assert {r.type.split(":")[-1] for r in recording.resources if r.custom} == {"Instance", "Domain", "Secret",
                                                                               "BucketObject"}
    servers = _of(recording, "Instance")
    assert sorted(s.inputs["networks"][0]["uuid"] for s in servers) == [SUBNET_A, SUBNET_B]
    assert {s.inputs["agencyName"] for s in servers} == {"team-agency"}
    assert all(s.inputs["securityGroupIds"] == [GROUP_ID] for s in servers)
    assert ("huaweicloud:Obs/getBuckets:getBuckets", {"bucket": "team-assets"}) in recording.invokes
    origin = recording.named("chat-assets-cdn").inputs["sources"][0]["origin"]
    assert origin == f"team-assets.obs.{REGION}.myhuaweicloud.com"
    assert recording.value["bucket"] == "team-models" and recording.value["identity"] is None


def test_a_brought_network_is_looked_up_for_its_range_and_nothing_is_created_for_it(run: Any) -> None:
    recording = _deploy(run, network_id=VPC, subnet_ids=[SUBNET_A])
    assert not {"Vpc", "Subnet", "Gateway", "SnatRule"} & {r.type.split(":")[-1] for r in recording.resources}
    assert ("huaweicloud:Vpc/getVpc:getVpc", {"id": VPC}) in recording.invokes
    api = recording.named("chat-firewall-api-network").inputs
    assert api["remoteIpPrefix"] == "192.168.0.0/16"  # the preview's placeholder for the brought VPC's range


def test_a_brought_model_bucket_is_granted_by_prefix_and_never_modified(run: Any) -> None:
    recording = _deploy(run, model_bucket="team-models")
    assert not [r for r in recording.resources if r.type == "inferstack:index:ModelStore"]
    # The boot bundle is the one object stored in it, under its own prefix; nothing configures the bucket.
    assert [r.name for r in recording.resources if r.custom and "team-models" in (r.id, r.inputs.get("bucket"))] == [
        "chat-bundle"]
    resources = _policy(recording.named("chat-identity-model-read"))["Statement"][0]["Resource"]
    assert resources == [f"obs:*:*:object:team-models/{MODEL_PREFIX}*",
                         "obs:*:*:object:team-models/inferstack/bootstrap/*"]


#### Plans without a price, the dev stack, the example ####


def test_a_plan_without_a_price_deploys_and_says_the_price_is_unknown() -> None:
    plan = sample_plan("huawei", "gpu-llm", "production")
    assert plan.price.monthly is None
    result = preview_deployment(plan, {"inferstack:assetsDomain": DOMAIN, "inferstack:assetsCertificate": CERTIFICATE,
                                       "inferstack:apiCertificate": API["api_certificate"]})
    (group,) = [r for r in result.resources if r.type == "huaweicloud:As/group:Group"]
    assert group.inputs["minInstanceNumber"] == 2
    assert result.outputs["plan"]["monthly_cost"] is None
    assert result.outputs["plan"]["summary"].endswith("price unknown")
    assert "Monthly cost estimate: price unknown" in result.render_tree()


def test_the_dev_stack_sizes_its_workload_and_deploys_a_private_server_without_cdn() -> None:
    from inferstack.components.program import read_stack_config

    config = yaml.safe_load((REPO / "stacks" / "Pulumi.huawei-dev.yaml").read_text())["config"]
    settings = record(read_stack_config, config=config).value
    assert settings.workload.stage == "validation" and settings.workload.placement.clouds == ["huawei"]
    result = preview_stack(config)
    assert result.plan.cloud == "huawei" and result.plan.region == REGION and not result.plan.price.known
    types = [r.type for r in result.resources]
    assert types.count("huaweicloud:Ecs/instance:Instance") == result.plan.instance_count
    assert "huaweicloud:Cdn/domain:Domain" not in types and "huaweicloud:Ecs/eipAssociate:EipAssociate" not in types


def test_the_example_runs_as_a_fleet_on_its_api_domain_once_its_workload_is_production(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "huawei-gpu-chat"
    shutil.copytree(REPO / "examples" / "huawei-gpu-chat", folder)
    workload = yaml.safe_load((folder / "workload.yaml").read_text())
    (folder / "workload.yaml").write_text(yaml.safe_dump({**workload, "stage": "production"}))
    config = yaml.safe_load((folder / "Pulumi.dev.yaml").read_text())["config"]
    monkeypatch.chdir(folder)
    recording = record(lambda: runpy.run_path(str(folder / "__main__.py")), project="huawei-gpu-chat", stack="dev",
                       config={**config, "huawei-gpu-chat:apiDomain": "chat.example.com",
                               "huawei-gpu-chat:apiCertificate": API["api_certificate"]})
    assert len(recording.of_type("huaweicloud:As/group:Group")) == 1
    assert not recording.of_type("huaweicloud:Ecs/instance:Instance")
    (https,) = [r for r in recording.of_type("huaweicloud:DedicatedElb/listener:Listener")
                if r.inputs["protocol"] == "HTTPS"]
    assert https.inputs["serverCertificate"] == API["api_certificate"]


#### URNs and preview ####


def test_two_servers_in_one_stack_have_unique_urns_and_names(run: Any) -> None:
    plan = sample_plan("huawei", "cpu-llm", "production")
    recording = run(lambda: [InferenceServer(name, {"plan": plan, "api_key": API_KEY, **CDN, **API,
                                                    "assets_domain": f"{name}.example.com",
                                                    "api_domain": f"{name}-api.example.com"}).endpoint_url
                             for name in ("chat", "embed")], config=CONFIG)
    urns = [r.urn for r in recording.resources]
    assert len(urns) == len(set(urns))
    # CPU fleets scale on CPU (two alarm rules each), and each fleet is watched by the alarms its plan calls for
    watched = len(alarm_rules(plan))
    assert watched >= 3 and len(_of(recording, "As/group:Group")) == 2
    assert len(_of(recording, "Alarmrule")) == 2 * (2 + watched)
    for short_type, key in (("Bucket", "bucket"), ("Role", "name"), ("Agency", "name"), ("Secret", "name"),
                            ("As/group:Group", "scalingGroupName"), ("Configuration", "scalingConfigurationName"),
                            ("Policy", "scalingPolicyName"), ("Alarmrule", "alarmName")):
        names = [r.inputs[key] for r in _of(recording, short_type)]
        assert len(names) == len(set(names)), short_type


def test_the_preview_refuses_lookups_the_backend_never_makes() -> None:
    with pytest.raises(NotImplementedError, match="huaweicloud:Evs/getVolumes:getVolumes"):
        backend_for("huawei").preview_invoke("huaweicloud:Evs/getVolumes:getVolumes", {})


def test_the_facts_mapper_reports_a_public_acl_an_open_policy_and_plain_http() -> None:
    facts = FACT_MAPPERS["huawei"]  # through neutral_view, which imports every mapper (facts_huawei among them)

    def bucket(name: str, **inputs: Any) -> RegisteredResource:
        return RegisteredResource(urn=f"urn:{name}", type="huaweicloud:Obs/bucket:Bucket", name=name, parent=None,
                                  custom=True, id=name, raw_inputs={"bucket": name, **inputs}, outputs={},
                                  protect=False, ignore_changes=(), provider="")

    open_policy = json.dumps({"Statement": [{"Effect": "Allow", "Principal": {"ID": ["*"]}, "Action": ["GetObject"],
                                             "Resource": ["b/*"]}]})
    recording = Recording(resources=[
        bucket("a", acl="public-read", encryption=True, sseAlgorithm="AES256", versioning=True,
               policy=huawei_storage.tls_only_policy("a")),  # TLS-only and private by policy, but the ACL is public
        bucket("b", acl="private", encryption=False, versioning=False, policy=open_policy)], invokes=[], value=None)
    first, second = facts(recording).buckets
    assert first.readers == ("acl:public-read",)
    assert first.tls_only and first.encrypted and first.versioned
    assert second.readers == ("*",) and not (second.tls_only or second.encrypted or second.versioned)
