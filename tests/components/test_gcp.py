"""InferenceServer on Google Cloud: capabilities, images, GPUs, zones, buckets, identity, CDN, bring your own."""

from __future__ import annotations

import json
import re
import secrets
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from inferstack import bootstrap
from inferstack.bootstrap.telemetry import TelemetryTarget
from inferstack.components import Capability, InferenceServer, StaticAssets, backend_for
from inferstack.components.gcp.identity import prefix_condition
from inferstack.components.gcp.naming import gcp_labels
from inferstack.components.gcp.network import covering_cidr
from inferstack.components.gcp.servers import (
    BOOT_DISKS,
    IMAGE_FAMILIES,
    METADATA_VALUE_LIMIT_BYTES,
    boot_disk_type,
    instance_metadata,
    machine_series,
)
from inferstack.errors import InputError
from inferstack.plan import Accelerator
from inferstack.preview import Recording, preview_stack, preview_workload, record
from inferstack.sizing.catalog import offers
from tests.components.neutral_view import FACT_MAPPERS
from tests.sample_plans import sample_plan

REPO = Path(__file__).resolve().parents[2]
GCP_CONFIG = {"gcp:region": "us-central1", "gcp:project": "inferstack-test"}
DOMAIN = "assets.example.com"
API_DOMAIN = "api.example.com"
INSTANCE = "gcp:compute/instance:Instance"
FIREWALL = "gcp:compute/firewall:Firewall"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
BUNDLE = "gcp:storage/bucketObject:BucketObject"
"""The boot bundle: its `name` is an object key, unique in its bucket (not a project-wide resource name)."""
IMAGE_LOOKUP = "gcp:compute/getImage:getImage"
LB_AGENT = "serviceAccount:service-123456789012@https-lb.iam.gserviceaccount.com"  # the preview's project number


def _run(program: Callable[[], Any], stack: str = "test", **config: Any) -> Recording:
    return record(program, config={**GCP_CONFIG, **config}, stack=stack)


def _server(plan: Any, name: str = "chat", config: dict[str, Any] | None = None, **args: Any) -> Recording:
    def program() -> pulumi.Output[dict[str, Any]]:
        server = InferenceServer(name, {"plan": plan, "assets_domain": DOMAIN, "api_domain": API_DOMAIN, **args})
        return pulumi.Output.all(
            urls=server.endpoint_urls, ids=server.instance_ids, bucket=server.model_bucket_name,
            assets_url=server.static_assets_url, policy=server.static_assets_policy, identity=server.identity_id,
            api_key_ref=server.api_key_ref, firewall_ids=server.firewall_ids, summary=server.plan_summary)

    return _run(program, **(config or {}))


def _rejected(build: Callable[[], Any], config: dict[str, Any]) -> tuple[str, Recording]:
    def program() -> str:
        with pytest.raises(InputError) as caught:
            build()
        return str(caught.value)

    recording = record(program, config=config, stack="test")
    return recording.value, recording


def _types(recording: Recording) -> set[str]:
    return {r.type.split(":")[-1] for r in recording.resources if r.custom}


def _two_zones(plan: Any) -> Any:
    """Loose servers in two zones (production plans are fleets: a managed group, tested in test_fleet_gcp.py)."""
    return plan.model_copy(update={"zones": 2, "replicas": 2, "instance_count": 2})


#### Capabilities and region ####


def test_capability_table_names_what_google_cloud_lacks_with_reasons() -> None:
    backend = backend_for("gcp")
    assert set(backend.capabilities) == set(Capability)
    missing = {c for c, support in backend.capabilities.items() if not support.available}
    assert missing == {Capability.METADATA_HARDENING, Capability.MANAGED_SHELL, Capability.TLS_ONLY_STORAGE,
                       Capability.CDN_DEFAULT_HOSTNAME, Capability.SPOT_ABOVE_FLOOR, Capability.BAKED_IMAGE,
                       Capability.MODEL_STREAMING, Capability.WARM_POOL, Capability.MULTI_NODE_REPLICAS}
    assert "one provisioning model" in backend.support(Capability.SPOT_ABOVE_FLOOR).note
    assert "storage.secureHttpTransport" in backend.support(Capability.TLS_ONLY_STORAGE).note
    assert "Metadata-Flavor: Google" in backend.support(Capability.METADATA_HARDENING).note
    assert "35.235.240.0/20" in backend.support(Capability.MANAGED_SHELL).note


@pytest.mark.parametrize(("config", "env", "region"), [
    ({"gcp:region": "europe-west4"}, {}, "europe-west4"),
    ({}, {"GOOGLE_REGION": "asia-east1"}, "asia-east1"),
    ({"gcp:zone": "us-east4-c"}, {}, "us-east4"),
    ({}, {}, None),
])
def test_region_comes_from_the_provider_config_or_its_environment(
        monkeypatch: pytest.MonkeyPatch, config: dict[str, str], env: dict[str, str], region: str | None) -> None:
    for name in ("GOOGLE_REGION", "GCLOUD_REGION", "CLOUDSDK_COMPUTE_REGION", "GOOGLE_ZONE", "GCLOUD_ZONE",
                 "CLOUDSDK_COMPUTE_ZONE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert record(lambda: backend_for("gcp").configured_region(), config=config).value == region


def test_plan_for_another_region_than_gcp_region_is_rejected_before_anything_exists() -> None:
    message, recording = _rejected(lambda: InferenceServer("chat", {"plan": sample_plan("gcp")}),
                                   {**GCP_CONFIG, "gcp:region": "europe-west4"})
    assert "made for region us-central1" in message and "gcp:region" in message
    assert recording.resources == []


#### Compute ####


@pytest.mark.parametrize(("variant", "machine_type", "image"), [
    ("gpu-llm", None, IMAGE_FAMILIES[("gpu", "X86_64")]),
    ("cpu-llm", None, IMAGE_FAMILIES[("cpu", "X86_64")]),
    ("cpu-llm", "t2a-standard-8", IMAGE_FAMILIES[("cpu", "ARM64")]),
])
def test_image_is_looked_up_by_family_for_the_device_and_architecture(
        variant: str, machine_type: str | None, image: tuple[str, str]) -> None:
    plan = sample_plan("gcp", variant, "validation")
    if machine_type:
        plan = plan.model_copy(update={"instance_type": machine_type, "offer": machine_type})
    recording = _server(plan, static_assets=False)
    assert [(a["project"], a["family"]) for token, a in recording.invokes if token == IMAGE_LOOKUP] == [image]
    (instance,) = recording.of_type(INSTANCE)
    assert instance.inputs["bootDisk"]["initializeParams"]["image"].endswith(f"/images/{image[1]}-v20260101")
    assert "bootDisk.initializeParams.image" in instance.ignore_changes  # a newer image replaces nothing


def test_bundled_gpu_machine_attaches_nothing_and_stops_for_host_maintenance() -> None:
    (instance,) = _server(sample_plan("gcp", "gpu-llm", "validation"), static_assets=False).of_type(INSTANCE)
    assert instance.inputs["machineType"] == "g2-standard-8"
    assert instance.inputs["guestAccelerators"] == []
    assert instance.inputs["scheduling"]["onHostMaintenance"] == "TERMINATE"


def test_n1_with_t4_attaches_the_plans_guest_accelerators() -> None:
    t4 = Accelerator(id="T4", name="T4", memory_gib=16, count=2, attach_type="nvidia-tesla-t4")
    plan = sample_plan("gcp", "gpu-llm", "validation").model_copy(
        update={"instance_type": "n1-standard-16", "offer": "n1-standard-16+2x nvidia-tesla-t4", "accelerator": t4})
    (instance,) = _server(plan, static_assets=False).of_type(INSTANCE)
    assert instance.inputs["guestAccelerators"] == [{"type": "nvidia-tesla-t4", "count": 2}]
    assert instance.inputs["scheduling"]["onHostMaintenance"] == "TERMINATE"


# The boot disk types Google's machine-series pages ("Supported disk types for <series>") state for each machine
# family of the catalog (its `family` column): Persistent Disk types, and Hyperdisk Balanced, the Hyperdisk type
# that boots. A family the catalog gains needs its row here.
BOOT_DISKS_GOOGLE_STATES: dict[str, set[str]] = {
    "n1-standard": {"pd-standard", "pd-balanced", "pd-ssd"},
    "n2-standard": {"pd-standard", "pd-balanced", "pd-ssd"},
    "n2-highmem": {"pd-standard", "pd-balanced", "pd-ssd"},
    "c3-standard": {"pd-balanced", "pd-ssd", "hyperdisk-balanced"},
    "g2-standard": {"pd-balanced", "pd-ssd"},
    "a2-highgpu": {"pd-standard", "pd-balanced", "pd-ssd"},
    "a2-ultragpu": {"pd-standard", "pd-balanced", "pd-ssd"},
    "a3-highgpu": {"pd-balanced", "pd-ssd", "hyperdisk-balanced"},
    "a3-ultragpu": {"hyperdisk-balanced"},  # A3 Ultra: Hyperdisk only
    "g4-standard": {"hyperdisk-balanced"},  # G4: Hyperdisk only
}


def test_every_gcp_machine_type_in_the_catalog_boots_from_a_disk_type_its_family_supports() -> None:
    gcp_offers = [offer for offer in offers() if offer.cloud == "gcp"]
    assert {offer.family for offer in gcp_offers} == set(BOOT_DISKS_GOOGLE_STATES)
    for offer in gcp_offers:
        assert boot_disk_type(offer.machine_type) in BOOT_DISKS_GOOGLE_STATES[offer.family], offer.machine_type


@pytest.mark.parametrize(("machine_type", "series", "disk"), [
    ("a3-ultragpu-8g", "a3-ultragpu", "hyperdisk-balanced"),
    ("a3-highgpu-8g", "a3", "pd-balanced"),
    ("a3-megagpu-8g", "a3", "pd-balanced"),
    ("c3-highcpu-192-metal", "c3-metal", "hyperdisk-balanced"),
    ("c3-standard-8-lssd", "c3", "pd-balanced"),
    ("c4-standard-8", "c4", "hyperdisk-balanced"),
    ("n1-standard-16", "n1", "pd-balanced"),
])
def test_the_boot_disk_type_is_chosen_by_machine_series_and_its_variants(machine_type: str, series: str,
                                                                         disk: str) -> None:
    assert machine_series(machine_type) == series
    assert boot_disk_type(machine_type) == disk


def test_every_boot_disk_row_names_a_type_that_boots_and_googles_page_for_it() -> None:
    for series, boot_disk in BOOT_DISKS.items():
        assert boot_disk.type in {"pd-balanced", "hyperdisk-balanced"}, series
        assert boot_disk.source.startswith("cloud.google.com/compute/docs/"), series


def test_an_a3_ultra_server_boots_from_hyperdisk_balanced() -> None:
    plan = sample_plan("gcp", "gpu-llm", "validation").model_copy(
        update={"instance_type": "a3-ultragpu-8g", "offer": "a3-ultragpu-8g"})
    (instance,) = _server(plan, static_assets=False).of_type(INSTANCE)
    assert instance.inputs["bootDisk"]["initializeParams"]["type"] == "hyperdisk-balanced"


def test_a_machine_series_without_a_known_boot_disk_is_refused_before_anything_exists() -> None:
    plan = sample_plan("gcp", "cpu-llm", "validation").model_copy(
        update={"instance_type": "q9-standard-8", "offer": "q9-standard-8"})
    message, recording = _rejected(lambda: InferenceServer("chat", {"plan": plan, "static_assets": False}),
                                   GCP_CONFIG)
    assert "chat.plan: uses machine series q9, whose boot disk type inferstack does not know (got " \
           "'q9-standard-8')" in message
    assert "add the series to BOOT_DISKS in inferstack/components/gcp/servers.py" in message
    assert recording.resources == []


def test_cpu_server_live_migrates_and_has_no_gpu() -> None:
    (instance,) = _server(sample_plan("gcp", "cpu-llm", "validation"), static_assets=False).of_type(INSTANCE)
    assert instance.inputs["guestAccelerators"] == []
    assert instance.inputs["scheduling"]["onHostMaintenance"] == "MIGRATE"


def test_spot_plans_run_on_spot_vms_that_stop_when_preempted() -> None:
    plan = sample_plan("gcp", "cpu-encoder", "validation").model_copy(update={"spot": True})
    (instance,) = _server(plan, static_assets=False).of_type(INSTANCE)
    assert instance.inputs["scheduling"] == {"provisioningModel": "SPOT", "preemptible": True,
                                             "automaticRestart": False, "instanceTerminationAction": "STOP",
                                             "onHostMaintenance": "TERMINATE"}


def test_servers_are_shielded_vms_with_os_login_and_no_ssh_keys() -> None:
    recording = _server(sample_plan("gcp", "gpu-llm", "internal"), static_assets=False)
    assert recording.of_type(INSTANCE)
    for instance in recording.of_type(INSTANCE):
        assert instance.inputs["shieldedInstanceConfig"] == {
            "enableSecureBoot": True, "enableVtpm": True, "enableIntegrityMonitoring": True}
        metadata = instance.inputs["metadata"]
        assert metadata["enable-oslogin"] == "TRUE" and metadata["block-project-ssh-keys"] == "TRUE"
        assert metadata["disable-legacy-endpoints"] == "TRUE" and metadata["serial-port-enable"] == "FALSE"
        assert "ssh-keys" not in metadata and "sshKeys" not in metadata
    assert not [r for r in recording.of_type(FIREWALL) if "22" in json.dumps(r.inputs.get("allows", []))]


def test_user_data_and_bundle_are_the_rendered_bootstrap_naming_bucket_region_and_secret() -> None:
    plan = sample_plan("gcp", "cpu-llm", "internal")
    recording = _server(plan, static_assets=False, api_key=pulumi.Output.secret("sk-gcp-user-data"))
    (instance,) = recording.of_type(INSTANCE)
    (log_bucket,) = recording.of_type("gcp:logging/projectBucketConfig:ProjectBucketConfig")
    logs = log_bucket.inputs["bucketId"]  # the Ops Agent's log names and job name
    expected = bootstrap.render_bootstrap(plan, "gcp", bootstrap.BootstrapOptions(
        model_bucket=recording.value["bucket"], region="us-central1", api_key_secret=recording.value["api_key_ref"],
        telemetry=TelemetryTarget(logs=logs, metrics=logs)))
    assert instance.inputs["metadata"]["user-data"] == expected.user_data
    (bundle,) = recording.of_type("gcp:storage/bucketObject:BucketObject")
    assert bundle.inputs["bucket"] == recording.value["bucket"] and bundle.inputs["name"] == expected.bundle_key
    assert bundle.inputs["content"] == expected.bundle
    assert recording.value["api_key_ref"].startswith("projects/inferstack-test/secrets/")
    assert "sk-gcp-user-data" not in json.dumps([r.masked_inputs for r in recording.resources])


def test_user_data_over_the_metadata_limit_fails_with_its_size() -> None:
    with pytest.raises(InputError, match=rf"is \d+ bytes; a Compute Engine metadata value holds "
                                         rf"{METADATA_VALUE_LIMIT_BYTES}"):
        instance_metadata(secrets.token_hex(METADATA_VALUE_LIMIT_BYTES))


def test_protected_loose_servers_carry_deletion_protection_and_each_replica_has_its_zone() -> None:
    recording = _server(_two_zones(sample_plan("gcp", "gpu-llm", "internal")), protect_servers=True)
    instances = recording.of_type(INSTANCE)
    assert instances and all(i.inputs["deletionProtection"] is True and i.protect for i in instances)
    assert sorted(i.inputs["zone"] for i in instances) == ["us-central1-a", "us-central1-b"]


def test_production_keeps_its_buckets_on_destroy() -> None:
    recording = _server(sample_plan("gcp", "gpu-llm", "production"))
    assert len(recording.of_type(BUCKET)) == 4
    assert all(b.inputs["forceDestroy"] is False for b in recording.of_type(BUCKET))


@pytest.mark.parametrize("stage", ["validation", "internal"])
def test_non_production_stages_are_easy_to_tear_down(stage: str) -> None:
    recording = _server(sample_plan("gcp", "cpu-llm", stage))
    assert all(i.inputs["deletionProtection"] is False for i in recording.of_type(INSTANCE))
    assert all(b.inputs["forceDestroy"] is True for b in recording.of_type(BUCKET))


def test_the_configured_zone_gets_the_first_replica() -> None:
    recording = _server(_two_zones(sample_plan("gcp", "gpu-llm", "internal")), config={"gcp:zone": "us-central1-f"})
    assert [i.inputs["zone"] for i in sorted(recording.of_type(INSTANCE), key=lambda i: i.name)] == [
        "us-central1-f", "us-central1-a"]


def test_more_zones_than_offer_the_machine_type_fails_at_lookup_with_the_zones() -> None:
    plan = sample_plan("gcp", "gpu-llm", "production").model_copy(
        update={"zones": 5, "replicas": 5, "instance_count": 5})
    with pytest.raises(InputError, match=r"g2-standard-8 is offered in 4 zone\(s\) of this region "
                                         r"\(us-central1-a, us-central1-b, us-central1-c, us-central1-f\)"):
        _server(plan, static_assets=False)


def test_plan_without_a_known_price_still_deploys_and_says_so() -> None:
    plan = sample_plan("gcp", "cpu-encoder", "validation")
    plan = plan.model_copy(update={"price": plan.price.model_copy(update={
        "hourly_per_instance": None, "monthly": None, "monthly_ranking": None, "source": None})})
    recording = _server(plan, static_assets=False)
    assert recording.of_type(INSTANCE)
    assert recording.value["summary"]["monthly_cost"] is None
    assert recording.value["summary"]["summary"].endswith("price unknown")


#### Firewall ####


def test_rules_target_the_servers_network_tag_and_egress_is_web_only() -> None:
    recording = _server(sample_plan("gcp", "cpu-encoder", "validation"), static_assets=False,
                        allowed_cidrs=["198.51.100.0/24"], api_key=pulumi.Output.secret("k"))
    (tag,) = recording.value["firewall_ids"]
    assert recording.of_type(INSTANCE)[0].inputs["tags"] == [tag]
    rules = {r.name: r.inputs for r in recording.of_type(FIREWALL)}
    assert all(rule["targetTags"] == [tag] for rule in rules.values())
    assert rules["chat-firewall-api-198-51-100-0-24"]["sourceRanges"] == ["198.51.100.0/24"]
    assert rules["chat-firewall-metrics"]["sourceRanges"] == ["10.64.0.0/20"]  # the subnetwork only
    allow, deny = rules["chat-firewall-egress-web"], rules["chat-firewall-egress-deny"]
    assert allow["allows"] == [{"protocol": "tcp", "ports": ["443", "80"]}] and allow["direction"] == "EGRESS"
    assert deny["denies"] == [{"protocol": "all"}] and deny["priority"] > allow["priority"]


def test_resource_names_are_valid_gcp_names_even_for_odd_projects() -> None:
    recording = record(lambda: InferenceServer("Chat_1", {"plan": sample_plan("gcp"), "static_assets": False}),
                       config=GCP_CONFIG, project="9lives", stack="Prod_EU")
    names = [r.inputs["name"] for r in recording.resources
             if r.custom and "name" in r.inputs and r.type not in (BUCKET, BUNDLE)]
    assert names and all(len(n) <= 63 and n[0].isalpha() and n == n.lower() for n in names)
    buckets = [b.inputs["name"] for b in recording.of_type(BUCKET)]  # bucket names may start with a digit
    assert buckets and all(re.fullmatch(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]", b) for b in buckets)
    (account,) = recording.of_type("gcp:serviceaccount/account:Account")
    assert 6 <= len(account.inputs["accountId"]) <= 30 and account.inputs["accountId"][0].isalpha()


def test_tags_become_valid_gcp_labels() -> None:
    assert gcp_labels({"Team": "ML Ops", "2fa": "On", "cost/center": "42"}) == {
        "team": "ml_ops", "t_2fa": "on", "cost_center": "42"}


#### Storage ####


def test_buckets_are_private_versioned_regional_and_log_to_the_logs_bucket() -> None:
    recording = _server(sample_plan("gcp", "cpu-llm", "internal"))
    buckets = {b.name: b.inputs for b in recording.of_type(BUCKET)}
    assert set(buckets) == {"chat-store-models", "chat-store-data", "chat-store-logs", "chat-assets-bucket"}
    logs = buckets["chat-store-logs"]["name"]
    for name, bucket in buckets.items():
        assert bucket["uniformBucketLevelAccess"] is True and bucket["publicAccessPrevention"] == "enforced"
        assert bucket["versioning"] == {"enabled": True} and bucket["location"] == "us-central1"
        assert {"action": {"type": "Delete"}, "condition": {"withState": "ARCHIVED", "daysSinceNoncurrentTime": 30,
                                                            "numNewerVersions": 4}} in bucket["lifecycleRules"]
        if name != "chat-store-logs":
            assert bucket["logging"]["logBucket"] == logs
    delivery = [m.inputs for m in recording.of_type(BUCKET_MEMBER) if m.inputs["bucket"] == logs]
    assert delivery == [{"bucket": logs, "role": "roles/storage.objectCreator",
                         "member": "group:cloud-storage-analytics@google.com"}]


def test_bucket_names_differ_between_gcp_projects() -> None:
    def model_bucket(project: str) -> str:
        recording = _server(sample_plan("gcp", "cpu-llm", "validation"), static_assets=False,
                            config={"gcp:project": project})
        return str(recording.value["bucket"])

    assert model_bucket("team-a") != model_bucket("team-b")


#### Identity and secrets ####


def test_service_account_reads_the_model_prefix_and_its_secrets_only() -> None:
    plan = sample_plan("gcp", "gpu-llm", "internal")
    recording = _server(plan, static_assets=False, api_key=pulumi.Output.secret("k1"),
                        hub_token=pulumi.Output.secret("k2"))
    (account,) = recording.of_type("gcp:serviceaccount/account:Account")
    member = account.outputs["member"]
    bucket = recording.value["bucket"]
    (model_read,) = [m.inputs for m in recording.of_type(BUCKET_MEMBER) if m.inputs["member"] == member]
    assert model_read["bucket"] == bucket and model_read["role"] == "roles/storage.objectViewer"
    assert model_read["condition"]["expression"] == prefix_condition(bucket, plan.model.bucket_prefix,
                                                                     "inferstack/bootstrap/")
    secret_reads = recording.of_type("gcp:secretmanager/secretIamMember:SecretIamMember")
    assert sorted(r.inputs["secretId"] for r in secret_reads) == sorted(
        s.id for s in recording.of_type("gcp:secretmanager/secret:Secret"))
    assert {r.inputs["role"] for r in secret_reads} == {"roles/secretmanager.secretAccessor"}
    # No project-wide role but the Ops Agent's two write-only ones (Google offers no narrower grant for them).
    project_roles = [r.inputs for r in recording.resources if r.type.startswith("gcp:projects/")]
    assert sorted(r["role"] for r in project_roles) == ["roles/logging.logWriter", "roles/monitoring.metricWriter"]
    assert all(r["member"] == member and r["project"] == "inferstack-test" for r in project_roles)
    assert all(i.inputs["serviceAccount"]["email"] == account.outputs["email"] for i in recording.of_type(INSTANCE))


def test_prefix_condition_covers_objects_and_listings_under_the_prefix_and_objects_under_the_second() -> None:
    assert prefix_condition("models-b", "models/x/bf16/", "inferstack/bootstrap/") == (
        'resource.name.startsWith("projects/_/buckets/models-b/objects/models/x/bf16/") || '
        'api.getAttribute("storage.googleapis.com/objectListPrefix", "").startsWith("models/x/bf16/") || '
        'resource.name.startsWith("projects/_/buckets/models-b/objects/inferstack/bootstrap/")')
    with pytest.raises(InputError, match="model_prefix"):
        prefix_condition("b", 'models/") || true || ("', "inferstack/bootstrap/")
    with pytest.raises(InputError, match="bundle_prefix"):
        prefix_condition("b", "models/", '") || true || ("')


def test_secret_values_are_stored_in_secret_manager_as_pulumi_secrets() -> None:
    recording = _server(sample_plan("gcp", "cpu-llm", "validation"), static_assets=False,
                        api_key=pulumi.Output.secret("sk-stored"))
    (version,) = recording.of_type("gcp:secretmanager/secretVersion:SecretVersion")
    assert version.inputs["secretData"] == "sk-stored" and version.masked_inputs["secretData"] == "[secret]"
    (secret,) = recording.of_type("gcp:secretmanager/secret:Secret")
    assert version.inputs["secret"] == secret.id == recording.value["api_key_ref"]
    assert secret.inputs["replication"] == {"auto": {}}


#### Static assets ####


def test_static_assets_without_a_domain_are_refused_before_anything_exists() -> None:
    message, recording = _rejected(lambda: InferenceServer("chat", {"plan": sample_plan("gcp")}), GCP_CONFIG)
    assert "chat.assets_domain: is required on Google Cloud: the HTTPS load balancer" in message
    assert "inferstack:assetsDomain" in message and "static_assets false" in message
    assert recording.resources == []


def test_the_static_assets_component_refuses_a_missing_domain_itself() -> None:
    message, recording = _rejected(lambda: StaticAssets("site", {"cloud": "gcp"}), GCP_CONFIG)
    assert "site.domain: is required on Google Cloud" in message and recording.resources == []


@pytest.mark.parametrize(("args", "expected"), [
    ({"assets_domain": "https://Assets.example.com/"}, "chat.assets_domain: is not a lowercase DNS name"),
    ({"assets_domain": DOMAIN, "assets_certificate": "projects/my-prj/global/sslCertificates/c"},
     "chat.assets_certificate: is not used on Google Cloud: the cloud issues the domain's certificate itself"),
])
def test_a_malformed_domain_or_an_unusable_certificate_is_refused(args: dict[str, str], expected: str) -> None:
    message, recording = _rejected(lambda: InferenceServer("chat", {"plan": sample_plan("gcp"), **args}), GCP_CONFIG)
    assert expected in message and recording.resources == []


def test_assets_are_served_over_https_only_from_a_bucket_only_the_load_balancer_reads() -> None:
    recording = _server(sample_plan("gcp", "cpu-llm", "validation"))
    assert recording.value["assets_url"] == f"https://{DOMAIN}"
    (backend,) = recording.of_type("gcp:compute/backendBucket:BackendBucket")
    assert backend.inputs["enableCdn"] is True and backend.inputs["cdnPolicy"]["cacheMode"] == "FORCE_CACHE_ALL"
    (certificate,) = recording.of_type("gcp:compute/managedSslCertificate:ManagedSslCertificate")
    assert certificate.inputs["managed"] == {"domains": ["assets.example.com"]}
    (rule,) = recording.of_type("gcp:compute/globalForwardingRule:GlobalForwardingRule")
    assert rule.inputs["portRange"] == "443" and rule.inputs["loadBalancingScheme"] == "EXTERNAL_MANAGED"
    assert not recording.of_type("gcp:compute/targetHttpProxy:TargetHttpProxy")
    (tls,) = recording.of_type("gcp:compute/sSLPolicy:SSLPolicy")
    assert tls.inputs["minTlsVersion"] == "TLS_1_2"
    readers = [m.inputs for m in recording.of_type(BUCKET_MEMBER) if m.inputs["bucket"] == backend.inputs["bucketName"]]
    assert readers == [{"bucket": backend.inputs["bucketName"], "role": "roles/storage.objectViewer",
                        "member": LB_AGENT}]
    (cdn,) = FACT_MAPPERS["gcp"](recording).cdns
    assert cdn.https_only and cdn.private_origin


#### Bring your own ####


def _nothing_targets(recording: Recording, brought: str) -> bool:
    return all(r.id != brought and brought not in (r.inputs.get("bucket"), r.inputs.get("network"))
               for r in recording.resources if r.custom and r.type != INSTANCE)


def test_existing_network_and_subnetworks_are_used_and_none_is_created() -> None:
    subnets = ["projects/my-prj/regions/us-central1/subnetworks/a", "projects/my-prj/regions/us-central1/subnetworks/b"]
    recording = _server(_two_zones(sample_plan("gcp", "gpu-llm", "internal")),
                        network_id="projects/my-prj/global/networks/shared", subnet_ids=subnets)
    assert not _types(recording) & {"Network", "Subnetwork"}
    assert sorted(i.inputs["networkInterfaces"][0]["subnetwork"] for i in recording.of_type(INSTANCE)) == subnets
    assert {r.inputs["network"] for r in recording.of_type(FIREWALL)} == {"projects/my-prj/global/networks/shared"}
    assert ("gcp:compute/getSubnetworks:getSubnetworks", {"filter": "network eq .*/networks/shared"}) in \
        recording.invokes
    metrics = next(r for r in recording.of_type(FIREWALL) if r.name == "chat-firewall-api-network")
    assert metrics.inputs["sourceRanges"] == ["10.0.0.0/20"]  # the preview's subnetwork of the brought network


def test_existing_network_tags_replace_the_firewall() -> None:
    recording = _server(sample_plan("gcp", "gpu-llm", "validation"), security_group_ids=["team-inference"])
    assert not recording.of_type(FIREWALL)
    assert recording.of_type(INSTANCE)[0].inputs["tags"] == ["team-inference"]


def test_existing_service_account_replaces_the_identity() -> None:
    email = "inference@my-prj.iam.gserviceaccount.com"
    recording = _server(sample_plan("gcp", "gpu-llm", "validation"), instance_identity=email)
    assert not _types(recording) & {"Account", "SecretIamMember"}
    assert recording.of_type(INSTANCE)[0].inputs["serviceAccount"]["email"] == email
    assert recording.value["identity"] is None


def test_existing_model_bucket_is_read_and_never_modified() -> None:
    recording = _server(sample_plan("gcp", "gpu-llm", "validation"), model_bucket="team-models")
    assert not [r for r in recording.resources if r.type == "inferstack:index:ModelStore"]
    assert recording.value["bucket"] == "team-models"
    # Naming the bucket: the boot bundle (an object under its own prefix) and the non-authoritative read grant (it
    # adds a member); no setting of the bucket changes.
    naming = [r for r in recording.resources
              if r.custom and r.type != INSTANCE and "team-models" in json.dumps(r.inputs)]
    assert sorted((r.type, r.name) for r in naming) == [(BUCKET_MEMBER, "chat-identity-model-read"),
                                                        (BUNDLE, "chat-bundle")]
    assert recording.named("chat-bundle").inputs["name"].startswith("inferstack/bootstrap/")


def test_existing_assets_bucket_is_served_without_touching_it() -> None:
    recording = _server(sample_plan("gcp", "gpu-llm", "validation"), assets_bucket="team-assets")
    assert _nothing_targets(recording, "team-assets")
    (backend,) = recording.of_type("gcp:compute/backendBucket:BackendBucket")
    assert backend.inputs["bucketName"] == "team-assets"
    assert json.loads(recording.value["policy"]) == {
        "bindings": [{"role": "roles/storage.objectViewer", "members": [LB_AGENT]}]}


def test_everything_brought_leaves_only_servers_load_balancer_and_secrets_to_create() -> None:
    recording = _server(_two_zones(sample_plan("gcp", "gpu-llm", "internal")), network_id="shared",
                        subnet_ids=["sub-a", "sub-b"], security_group_ids=["team-inference"],
                        instance_identity="inference@my-prj.iam.gserviceaccount.com", model_bucket="team-models",
                        assets_bucket="team-assets", api_key=pulumi.Output.secret("k"))
    assert _types(recording) == {"Instance", "BackendBucket", "GlobalAddress", "ManagedSslCertificate", "SSLPolicy",
                                 "URLMap", "TargetHttpsProxy", "GlobalForwardingRule", "Secret", "SecretVersion",
                                 "BucketObject", "ProjectBucketConfig", "ProjectSink", "ProjectExclusion"}


def test_covering_cidr_is_the_smallest_block_holding_every_subnetwork() -> None:
    assert covering_cidr(["10.1.0.0/24", "10.1.3.0/24"]) == "10.1.0.0/22"
    assert covering_cidr(["10.128.0.0/20"]) == "10.128.0.0/20"
    with pytest.raises(InputError, match="has no subnetwork in this region"):
        covering_cidr([])


#### Component conventions and preview ####


def test_two_servers_in_one_stack_have_unique_urns() -> None:
    plan = sample_plan("gcp", "gpu-llm", "production")
    recording = _run(lambda: [InferenceServer(name, {"plan": plan, "assets_domain": f"{name}.example.com",
                                                     "api_domain": f"api.{name}.example.com"}).endpoint_url
                              for name in ("chat", "embed")])
    urns = Counter(r.urn for r in recording.resources)
    assert len(recording.resources) > 50 and [urn for urn, count in urns.items() if count > 1] == []
    names = Counter(r.inputs["name"] for r in recording.resources if r.custom and "name" in r.inputs
                    and r.type != BUNDLE)
    assert [name for name, count in names.items() if count > 1] == []  # GCP names are project-wide


def test_preview_answers_only_the_lookups_the_backend_makes() -> None:
    with pytest.raises(NotImplementedError, match="gcp:compute/getInstance:getInstance"):
        backend_for("gcp").preview_invoke("gcp:compute/getInstance:getInstance", {})


def test_cli_preview_sizes_a_workload_for_gcp_with_its_assets_domain() -> None:
    result = preview_workload(REPO / "examples" / "workloads" / "embeddings-bert.yaml", cloud="gcp",
                              assets_domain=DOMAIN, config={"gcp:project": "my-prj"})
    assert result.plan.cloud == "gcp" and result.outputs["staticAssetsUrl"] == f"https://{DOMAIN}"
    assert result.notes == []
    instance = next(r for r in result.resources if r.type == INSTANCE)
    assert f"machineType={result.plan.instance_type}" in instance.key_properties()
    assert instance.inputs["serviceAccount"]["email"].endswith("@my-prj.iam.gserviceaccount.com")


def test_gcp_dev_stack_file_previews_from_its_workload() -> None:
    config = yaml.safe_load((REPO / "stacks" / "Pulumi.gcp-dev.yaml").read_text())["config"]
    result = preview_stack(config)
    assert result.plan.cloud == "gcp" and result.plan.stage == "validation" and result.plan.region == "us-central1"
    assert not [r for r in result.resources if r.type == "gcp:compute/backendBucket:BackendBucket"]
    assert [r.inputs["machineType"] for r in result.resources if r.type == INSTANCE] == [result.plan.instance_type]
