"""How Google Cloud answers in the offline preview (Pulumi's mocks): realistic ids and computed outputs per resource
type, and answers to the lookups the backend makes. No cloud is called.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pulumi

from inferstack.components.backend import PreviewAnswers, PreviewContext, PreviewLookup, PreviewResource
from inferstack.components.gcp.network import PROXY_ONLY_CIDR, PROXY_ONLY_PURPOSE
from inferstack.components.gcp.provider import ZONE_ENV, configured_region, environment_value

PREVIEW_PROJECT = "inferstack-preview"
PREVIEW_PROJECT_NUMBER = "123456789012"
PREVIEW_REGION = "us-central1"


def preview_answers() -> PreviewAnswers:
    """The answers for this run's stack config (its region and project)."""
    return PreviewAnswers(resources=_PREVIEW_OUTPUTS, lookups=_PREVIEW_INVOKES,
                          region=configured_region() or PREVIEW_REGION, account=_preview_project())


def _preview_project() -> str:
    return (pulumi.Config("gcp").get("project") or environment_value(("GOOGLE_PROJECT", "GOOGLE_CLOUD_PROJECT"))
            or PREVIEW_PROJECT)


#### Resources ####


def _resource_name(c: PreviewContext) -> str:
    """The explicit name, or the provider's autoname (name + random suffix), imitated."""
    return str(c.inputs.get("name") or f"{c.name}-{c.digest[:7]}")


def _path(c: PreviewContext, collection: str, *, regional: bool = False) -> str:
    scope = f"regions/{c.region}" if regional else "global"
    return f"projects/{c.account}/{scope}/{collection}/{_resource_name(c)}"


def _global(collection: str) -> PreviewResource:
    def make(c: PreviewContext) -> tuple[str, dict[str, Any]]:
        path = _path(c, collection)
        return path, {"name": _resource_name(c), "selfLink": f"https://www.googleapis.com/compute/v1/{path}"}
    return make


def _regional(collection: str) -> PreviewResource:
    def make(c: PreviewContext) -> tuple[str, dict[str, Any]]:
        path = _path(c, collection, regional=True)
        return path, {"name": _resource_name(c), "region": c.region,
                      "selfLink": f"https://www.googleapis.com/compute/v1/{path}"}
    return make


def _template_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    # name_prefix + a timestamp and a counter, as the provider names it; selfLinkUnique pins this very template.
    name = f"{c.inputs.get('namePrefix', c.name)}20260101000000{int(c.digest[:6], 16) % 10**8:08d}"
    path = f"projects/{c.account}/global/instanceTemplates/{name}"
    return path, {"name": name, "selfLink": f"https://www.googleapis.com/compute/v1/{path}",
                  "selfLinkUnique": f"{path}?uniqueId={int(c.digest[:15], 16)}"}


def _group_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    path, outputs = _regional("instanceGroupManagers")(c)
    group = f"https://www.googleapis.com/compute/v1/projects/{c.account}/regions/{c.region}/instanceGroups/" \
            f"{_resource_name(c)}"
    return path, {**outputs, "instanceGroup": group}


def _dns_authorization_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    domain = c.inputs["domain"]
    return f"projects/{c.account}/locations/{c.inputs.get('location', 'global')}/dnsAuthorizations/" \
           f"{_resource_name(c)}", {"dnsResourceRecords": [{
               "name": f"_acme-challenge_{c.digest[:16]}.{domain}.", "type": "CNAME",
               "data": f"{c.digest[16:24]}-{c.digest[24:28]}-{c.digest[28:32]}-{c.digest[32:36]}-{c.digest[36:48]}"
                       f".4.authorize.certificatemanager.goog."}]}


def _subnetwork_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    path = _path(c, "subnetworks", regional=True)
    return path, {"name": _resource_name(c), "region": c.region, "gatewayAddress": "10.64.0.1",
                  "selfLink": f"https://www.googleapis.com/compute/v1/{path}"}


def _bucket_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    name = _resource_name(c)
    return name, {"name": name, "url": f"gs://{name}", "selfLink": f"https://www.googleapis.com/storage/v1/b/{name}"}


def _account_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    email = f"{c.inputs['accountId']}@{c.account}.iam.gserviceaccount.com"
    return f"projects/{c.account}/serviceAccounts/{email}", {
        "email": email, "member": f"serviceAccount:{email}", "uniqueId": str(int(c.digest[:15], 16))}


def _secret_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    return f"projects/{c.account}/secrets/{c.inputs['secretId']}", {
        "name": f"projects/{PREVIEW_PROJECT_NUMBER}/secrets/{c.inputs['secretId']}"}


def _instance_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    zone = c.inputs.get("zone", f"{c.region}-a")
    interfaces = [{**nic, "networkIp": c.private_ip,
                   "accessConfigs": [{**access, "natIp": c.public_ip}
                                     for access in nic.get("accessConfigs", [])]}
                  for nic in c.inputs.get("networkInterfaces", [])]
    return f"projects/{c.account}/zones/{zone}/instances/{_resource_name(c)}", {
        "name": _resource_name(c), "networkInterfaces": interfaces, "instanceId": str(int(c.digest[:15], 16)),
        "selfLink": f"https://www.googleapis.com/compute/v1/projects/{c.account}/zones/{zone}/instances/"
                    f"{_resource_name(c)}"}


def _iam_member_outputs(c: PreviewContext) -> tuple[str, dict[str, Any]]:
    target = c.inputs.get("bucket") or c.inputs.get("secretId") or c.inputs.get("project")
    return f"{target}/{c.inputs['role']}/{c.inputs['member']}", {"etag": f"BwY{c.digest[:9]}"}


_PREVIEW_OUTPUTS: dict[str, PreviewResource] = {
    "gcp:compute/network:Network": _global("networks"),
    "gcp:compute/subnetwork:Subnetwork": _subnetwork_outputs,
    "gcp:compute/firewall:Firewall": _global("firewalls"),
    "gcp:storage/bucket:Bucket": _bucket_outputs,
    "gcp:storage/bucketIAMMember:BucketIAMMember": _iam_member_outputs,
    "gcp:serviceaccount/account:Account": _account_outputs,
    "gcp:secretmanager/secret:Secret": _secret_outputs,
    "gcp:secretmanager/secretVersion:SecretVersion": lambda c: (f"{c.inputs['secret']}/versions/1", {
        "name": f"{c.inputs['secret']}/versions/1", "version": "1"}),
    "gcp:secretmanager/secretIamMember:SecretIamMember": _iam_member_outputs,
    "gcp:projects/iAMMember:IAMMember": _iam_member_outputs,
    # The servers' logs: their bucket, the sink to it, the _Default bucket's exclusion (Cloud Logging API paths).
    "gcp:logging/projectBucketConfig:ProjectBucketConfig": lambda c: (
        f"projects/{c.inputs['project']}/locations/{c.inputs['location']}/buckets/{c.inputs['bucketId']}", {
            "name": f"projects/{c.inputs['project']}/locations/{c.inputs['location']}/buckets/{c.inputs['bucketId']}",
            "lifecycleState": "ACTIVE"}),
    "gcp:logging/projectSink:ProjectSink": lambda c: (f"projects/{c.inputs['project']}/sinks/{c.inputs['name']}", {
        "writerIdentity": "serviceAccount:cloud-logs@system.gserviceaccount.com"}),
    "gcp:logging/projectExclusion:ProjectExclusion": lambda c: (
        f"projects/{c.inputs['project']}/exclusions/{c.inputs['name']}", {}),
    "gcp:compute/backendBucket:BackendBucket": _global("backendBuckets"),
    "gcp:compute/globalAddress:GlobalAddress": lambda c: (_path(c, "addresses"), {
        "name": _resource_name(c), "address": f"198.51.100.{int(c.digest[:4], 16) % 254 + 1}"}),  # RFC 5737
    "gcp:compute/managedSslCertificate:ManagedSslCertificate": _global("sslCertificates"),
    "gcp:compute/sSLPolicy:SSLPolicy": _global("sslPolicies"),
    "gcp:compute/uRLMap:URLMap": _global("urlMaps"),
    "gcp:compute/targetHttpsProxy:TargetHttpsProxy": _global("targetHttpsProxies"),
    "gcp:compute/globalForwardingRule:GlobalForwardingRule": _global("forwardingRules"),
    "gcp:compute/instance:Instance": _instance_outputs,
    "gcp:redis/instance:Instance": lambda c: (f"projects/{c.account}/locations/{c.region}/instances/{c.name}", {
        "host": c.private_ip, "port": 6378, "reservedIpRange": f"10.200.{int(c.digest[:2], 16)}.0/29",
        "authString": f"preview-{c.digest[:32]}",
        "serverCaCerts": [{"cert": "-----BEGIN CERTIFICATE-----\nUFJFVklFVw==\n-----END CERTIFICATE-----\n"}]}),
    # A fleet: Cloud NAT, the group, its autoscaler and its load balancer.
    "gcp:compute/router:Router": _regional("routers"),
    "gcp:compute/routerNat:RouterNat": lambda c: (
        f"{c.account}/{c.region}/{c.inputs.get('router')}/{_resource_name(c)}", {"name": _resource_name(c)}),
    "gcp:compute/instanceTemplate:InstanceTemplate": _template_outputs,
    "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager": _group_outputs,
    "gcp:compute/regionAutoscaler:RegionAutoscaler": _regional("autoscalers"),
    "gcp:compute/healthCheck:HealthCheck": _global("healthChecks"),
    # An alert policy's name is its path, with an id Cloud Monitoring assigns (a number).
    "gcp:monitoring/dashboard:Dashboard": lambda c: (f"projects/{c.account}/dashboards/{c.digest[:32]}", {}),
    "gcp:monitoring/alertPolicy:AlertPolicy": lambda c: (
        f"projects/{c.account}/alertPolicies/{int(c.digest[:15], 16)}",
        {"name": f"projects/{c.account}/alertPolicies/{int(c.digest[:15], 16)}"}),
    "gcp:compute/regionHealthCheck:RegionHealthCheck": _regional("healthChecks"),
    "gcp:compute/securityPolicy:SecurityPolicy": _global("securityPolicies"),
    "gcp:compute/regionSecurityPolicy:RegionSecurityPolicy": _regional("securityPolicies"),
    "gcp:compute/backendService:BackendService": _global("backendServices"),
    "gcp:compute/regionBackendService:RegionBackendService": _regional("backendServices"),
    "gcp:compute/targetHttpProxy:TargetHttpProxy": _global("targetHttpProxies"),
    "gcp:compute/regionUrlMap:RegionUrlMap": _regional("urlMaps"),
    "gcp:compute/regionSslPolicy:RegionSslPolicy": _regional("sslPolicies"),
    "gcp:compute/regionTargetHttpsProxy:RegionTargetHttpsProxy": _regional("targetHttpsProxies"),
    "gcp:compute/regionTargetHttpProxy:RegionTargetHttpProxy": _regional("targetHttpProxies"),
    "gcp:compute/forwardingRule:ForwardingRule": _regional("forwardingRules"),
    "gcp:compute/address:Address": lambda c: (_path(c, "addresses", regional=True), {
        "name": _resource_name(c), "address": c.private_ip}),
    "gcp:certificatemanager/dnsAuthorization:DnsAuthorization": _dns_authorization_outputs,
    "gcp:certificatemanager/certificate:Certificate": lambda c: (
        f"projects/{c.account}/locations/{c.inputs.get('location', 'global')}/certificates/{_resource_name(c)}", {}),
}



#### Lookups ####


def _preview_machine_types(a: dict[str, Any], c: PreviewContext) -> dict[str, Any]:
    # Every zone offers every type in the preview; Arm types are the t2a/c4a/n4a series. A deployment asks GCE.
    name = str(a.get("filter", "")).removeprefix("name = ").strip()
    arm = name.split("-")[0] in {"t2a", "c4a", "n4a", "a4x"}
    return {"zone": a.get("zone"), "filter": a.get("filter"), "project": c.account, "id": f"{a.get('zone')}/{name}",
            "machineTypes": [{"name": name, "architecture": "ARM64" if arm else "X86_64", "description": name,
                              "guestCpus": 0, "memoryMb": 0, "isSharedCpus": False, "maximumPersistentDisks": 128,
                              "maximumPersistentDisksSizeGb": 263168, "selfLink": "", "accelerators": [],
                              "bundledLocalSsds": [], "deprecateds": []}]}


def _preview_subnetworks(a: dict[str, Any], c: PreviewContext) -> dict[str, Any]:
    """The subnetworks of a network the program created itself (a user's own network brought to a component), as
    created; else a network's proxy-only subnetwork (the range create_network gives it), or, for a network brought
    from elsewhere, which the preview cannot see, a placeholder subnetwork."""
    query = str(a.get("filter", ""))
    network = re.search(r'networks/([^"\s]+)', query)
    name = network[1] if network else "brought"
    proxy_only = PROXY_ONLY_PURPOSE in query
    created = _created_subnetworks(c, name)
    if created is not None:
        found = [{"ipCidrRange": s.get("ipCidrRange"), "name": s.get("name"),
                  "privateIpGoogleAccess": bool(s.get("privateIpGoogleAccess"))}
                 for s in created if not proxy_only or s.get("purpose") == PROXY_ONLY_PURPOSE]
    elif proxy_only:
        found = [{"ipCidrRange": PROXY_ONLY_CIDR, "name": "proxy-only", "privateIpGoogleAccess": False}]
    else:
        found = [{"ipCidrRange": "10.0.0.0/20", "name": "brought", "privateIpGoogleAccess": True}]
    return {"subnetworks": [{**subnetwork, "network": f"https://www.googleapis.com/compute/v1/projects/{c.account}/"
                             f"global/networks/{name}", "networkName": name, "networkSelfLink": "", "selfLink": "",
                             "description": ""} for subnetwork in found],
            "id": "subnetworks", "project": c.account, "region": c.region, "filter": a.get("filter")}


def _created_subnetworks(c: PreviewContext, network_name: str) -> list[Mapping[str, Any]] | None:
    """The subnetworks the program created on a network of that name it created itself; None if it created none."""
    networks = c.created.get("gcp:compute/network:Network", {}).values()
    if not any(network.get("name") == network_name for network in networks):
        return None
    subnetworks = c.created.get("gcp:compute/subnetwork:Subnetwork", {}).values()
    return [s for s in subnetworks if str(s.get("network", "")).rstrip("/").rsplit("/", 1)[-1] == network_name]


def _preview_image(a: dict[str, Any], c: PreviewContext) -> dict[str, Any]:
    """An image by family (its newest, a placeholder date in the name) or by name (a brought image, as named)."""
    name = a.get("name") or f"{a['family']}-v20260101"
    return {"family": a.get("family") or "", "project": a["project"], "name": name, "diskSizeGb": 10,
            "selfLink": f"https://www.googleapis.com/compute/v1/projects/{a['project']}/global/images/{name}",
            "id": f"projects/{a['project']}/global/images/{name}", "status": "READY"}


_PREVIEW_INVOKES: dict[str, PreviewLookup] = {
    "gcp:organizations/getClientConfig:getClientConfig": lambda a, c: {
        "project": c.account, "region": c.region,
        "zone": pulumi.Config("gcp").get("zone") or environment_value(ZONE_ENV) or f"{c.region}-a",
        "id": f"projects/{c.account}/regions/{c.region}", "accessToken": "", "defaultLabels": {}},
    "gcp:organizations/getProject:getProject": lambda a, c: {
        "projectId": c.account, "number": PREVIEW_PROJECT_NUMBER, "name": c.account, "id": f"projects/{c.account}"},
    "gcp:compute/getZones:getZones": lambda a, c: {
        "names": [f"{c.region}-{zone}" for zone in "abcf"], "region": c.region, "project": c.account,
        "status": a.get("status"), "id": f"projects/{c.account}/regions/{c.region}"},
    "gcp:compute/getMachineTypes:getMachineTypes": _preview_machine_types,
    # The image size is a placeholder smaller than any plan's disk, so the plan decides the preview.
    "gcp:compute/getImage:getImage": _preview_image,
    "gcp:compute/getSubnetworks:getSubnetworks": _preview_subnetworks,
}
