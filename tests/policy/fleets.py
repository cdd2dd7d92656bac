"""A compliant fleet on each cloud, hand-built the way the engine sends it: a template and a managed group over two
zones, the load balancer with an HTTPS listener (TLS 1.2+) and an HTTP listener that only redirects, a backend with
its health check on the serving port, and the servers' firewall admitting the serving port from the load balancer
only; production's protections (Pulumi's `protect` and the cloud's deletion flags, as inferstack sets them); and the
API key, a secret the servers' identity may read (`api_key`). Property dependencies relate the resources, as a
preview knows them.

The validator cases take single resources from here, the fleet stack tests and their mutations whole stacks
(`fleet(cloud)`); each mutation changes one resource of a compliant stack (`changed`).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from typing import Any

from guardrails import resource_types
from guardrails.resource_types import (
    ALI_LAUNCH_TEMPLATES,
    ALI_LISTENER,
    ALI_LISTENER_RULE,
    ALI_LOAD_BALANCER,
    ALI_POLICY,
    ALI_ROLE,
    ALI_ROLE_POLICY_ATTACHMENT,
    ALI_SCALING_GROUP,
    ALI_SECRET,
    ALI_SECURITY_GROUP,
    ALI_SECURITY_GROUP_RULE,
    ALI_VSWITCH,
    AWS_AUTOSCALING_GROUP,
    AWS_INGRESS_RULE,
    AWS_LAUNCH_TEMPLATE,
    AWS_LISTENERS,
    AWS_LOAD_BALANCERS,
    AWS_PARAMETER,
    AWS_ROLE,
    AWS_ROLE_POLICY,
    AWS_SECURITY_GROUP,
    AWS_SUBNET,
    AWS_TARGET_GROUPS,
    GCP_AUTOSCALERS,
    GCP_BACKEND_SERVICES,
    GCP_FIREWALL,
    GCP_FORWARDING_RULES,
    GCP_HEALTH_CHECKS,
    GCP_HTTP_PROXIES,
    GCP_HTTPS_PROXIES,
    GCP_REGION_GROUP_MANAGER,
    GCP_REGION_INSTANCE_TEMPLATE,
    GCP_SECRET,
    GCP_SECRET_IAM_MEMBER,
    GCP_SERVICE_ACCOUNT,
    GCP_SSL_POLICIES,
    GCP_URL_MAPS,
    HW_AGENCY,
    HW_AS_CONFIGURATION,
    HW_AS_GROUP,
    HW_L7_POLICY,
    HW_LISTENER,
    HW_LOAD_BALANCER,
    HW_POOL,
    HW_ROLE,
    HW_SECRET,
    HW_SECURITY_GROUP,
    HW_SECURITY_GROUP_RULE,
)

from tests.policy.harness import Resource

SERVING_PORT = 8000.0
HEALTH_PATH = "/health"
WORLD = "0.0.0.0/0"
NETWORK = "10.64.0.0/16"

#### AWS: launch template, Auto Scaling group, ALB ####

AWS_TEMPLATE = {
    "imageId": "ami-0123456789abcdef0", "instanceType": "g6.xlarge", "userData": "H4sIAAAAAAAA/0vOz0ktyQcAAAD//w==",
    "iamInstanceProfile": {"name": "inv-identity-profile"},
    "metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1.0},
    "blockDeviceMappings": [{"deviceName": "/dev/sda1",
                             "ebs": {"encrypted": "true", "volumeSize": 200.0, "volumeType": "gp3"}}],
    "networkInterfaces": [{"associatePublicIpAddress": "false", "deviceIndex": 0.0, "securityGroups": ["sg-srv"]}]}
AWS_TARGET_GROUP = {
    "port": SERVING_PORT, "protocol": "HTTP", "targetType": "instance", "vpcId": "vpc-1",
    "arn": "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/inv/0123456789abcdef",
    "healthCheck": {"enabled": True, "path": HEALTH_PATH, "port": "traffic-port", "protocol": "HTTP",
                    "matcher": "200"}}
AWS_LB_ARN = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/app/inv/0123456789abcdef"
AWS_HTTPS_LISTENER = {
    "loadBalancerArn": AWS_LB_ARN, "port": 443.0, "protocol": "HTTPS",
    "sslPolicy": "ELBSecurityPolicy-TLS13-1-2-2021-06",
    "certificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d",
    "defaultActions": [{"type": "forward", "targetGroupArn": AWS_TARGET_GROUP["arn"]}]}
AWS_HTTP_LISTENER = {
    "loadBalancerArn": AWS_LB_ARN, "port": 80.0, "protocol": "HTTP",
    "defaultActions": [{"type": "redirect",
                        "redirect": {"protocol": "HTTPS", "port": "443", "statusCode": "HTTP_301"}}]}


def _aws_rule(group: str, port: float, **source: Any) -> dict[str, Any]:
    return {"securityGroupId": group, "ipProtocol": "tcp", "fromPort": port, "toPort": port, **source}


def aws() -> list[Resource]:
    subnet = "arn:aws:ec2:us-east-1:123456789012:subnet/{}"
    return [
        Resource(AWS_SUBNET, "private-0", {"availabilityZone": "us-east-1a", "arn": subnet.format("subnet-a")}),
        Resource(AWS_SUBNET, "private-1", {"availabilityZone": "us-east-1b", "arn": subnet.format("subnet-b")}),
        Resource(AWS_SECURITY_GROUP, "servers", {"name": "servers", "vpcId": "vpc-1"}),
        Resource(AWS_SECURITY_GROUP, "lb-firewall", {"name": "lb", "vpcId": "vpc-1"}),
        Resource(AWS_INGRESS_RULE, "servers-api",
                 _aws_rule("sg-srv", SERVING_PORT, referencedSecurityGroupId="sg-lb"),
                 {"securityGroupId": ["servers"], "referencedSecurityGroupId": ["lb-firewall"]}),
        Resource(AWS_INGRESS_RULE, "servers-metrics", _aws_rule("sg-srv", 8001.0, cidrIpv4=NETWORK),
                 {"securityGroupId": ["servers"]}),
        Resource(AWS_INGRESS_RULE, "lb-https", _aws_rule("sg-lb", 443.0, cidrIpv4=WORLD),
                 {"securityGroupId": ["lb-firewall"]}),
        Resource(AWS_INGRESS_RULE, "lb-http", _aws_rule("sg-lb", 80.0, cidrIpv4=WORLD),
                 {"securityGroupId": ["lb-firewall"]}),
        Resource(AWS_LAUNCH_TEMPLATE, "template", AWS_TEMPLATE, {"networkInterfaces": ["servers"]},
                 protect=True),
        Resource(AWS_AUTOSCALING_GROUP, "group", {
            "minSize": 2.0, "maxSize": 4.0, "vpcZoneIdentifiers": ["subnet-a", "subnet-b"], "healthCheckType": "ELB",
            "launchTemplate": {"id": "lt-1", "version": "$Latest"}, "targetGroupArns": [AWS_TARGET_GROUP["arn"]]},
                 {"launchTemplate": ["template"], "vpcZoneIdentifiers": ["private-0", "private-1"],
                  "targetGroupArns": ["target-group"]}, protect=True),
        Resource(AWS_TARGET_GROUPS[0], "target-group", AWS_TARGET_GROUP),
        Resource(AWS_LOAD_BALANCERS[0], "lb", {
            "arn": AWS_LB_ARN, "internal": False, "loadBalancerType": "application", "securityGroups": ["sg-lb"],
            "subnets": ["subnet-c", "subnet-d"], "idleTimeout": 600.0, "enableDeletionProtection": True},
                 {"securityGroups": ["lb-firewall"]}, protect=True),
        Resource(AWS_LISTENERS[0], "https", AWS_HTTPS_LISTENER,
                 {"loadBalancerArn": ["lb"], "defaultActions": ["target-group"]}),
        Resource(AWS_LISTENERS[0], "http", AWS_HTTP_LISTENER, {"loadBalancerArn": ["lb"]}),
    ]


#### Google Cloud: regional template and group, global Application Load Balancer ####

GCP_PROJECT = "projects/p"
GCP_TEMPLATE = {
    "machineType": "g2-standard-8", "tags": ["inv-server"],
    "networkInterfaces": [{"subnetwork": f"{GCP_PROJECT}/regions/us-central1/subnetworks/private"}],
    "serviceAccount": {"email": "inv@p.iam.gserviceaccount.com", "scopes": ["cloud-platform"]},
    "shieldedInstanceConfig": {"enableSecureBoot": True, "enableVtpm": True, "enableIntegrityMonitoring": True},
    "disks": [{"boot": True, "sourceImage": "projects/ubuntu-os-accelerator-images/global/images/family/x"}],
    "metadata": {"user-data": "#cloud-config\n"}}
GCP_HEALTH_CHECK = {"httpHealthCheck": {"port": SERVING_PORT, "requestPath": HEALTH_PATH}, "checkIntervalSec": 10.0,
                    "selfLink": f"{GCP_PROJECT}/global/healthChecks/inv"}
GCP_SSL_POLICY = {"minTlsVersion": "TLS_1_2", "profile": "MODERN", "selfLink": f"{GCP_PROJECT}/global/sslPolicies/inv"}
GCP_HTTPS_RULE = {"target": f"{GCP_PROJECT}/global/targetHttpsProxies/inv", "portRange": "443",
                  "ipAddress": "203.0.113.7", "loadBalancingScheme": "EXTERNAL_MANAGED"}
GCP_HTTP_RULE = {**GCP_HTTPS_RULE, "target": f"{GCP_PROJECT}/global/targetHttpProxies/inv", "portRange": "80"}
GCP_LB_RANGES = ["130.211.0.0/22", "35.191.0.0/16"]


def gcp() -> list[Resource]:
    group_url = f"{GCP_PROJECT}/regions/us-central1/instanceGroups/inv"
    return [
        Resource(GCP_REGION_INSTANCE_TEMPLATE, "template", GCP_TEMPLATE),
        Resource(GCP_REGION_GROUP_MANAGER, "group", {
            "region": "us-central1", "distributionPolicyZones": ["us-central1-a", "us-central1-b"],
            "versions": [{"instanceTemplate": f"{GCP_PROJECT}/regions/us-central1/instanceTemplates/inv"}],
            "namedPorts": [{"name": "http", "port": SERVING_PORT}], "instanceGroup": group_url,
            "autoHealingPolicies": {"healthCheck": GCP_HEALTH_CHECK["selfLink"], "initialDelaySec": 900.0}},
                 {"versions": ["template"], "autoHealingPolicies": ["health"]}, protect=True),
        Resource(GCP_AUTOSCALERS[0], "autoscaler", {
            "target": "group", "autoscalingPolicy": {"minReplicas": 2.0, "maxReplicas": 4.0}}, {"target": ["group"]}),
        Resource(GCP_FIREWALL, "servers-api", {
            "direction": "INGRESS", "allows": [{"protocol": "tcp", "ports": ["8000"]}], "sourceRanges": GCP_LB_RANGES,
            "targetTags": ["inv-server"], "network": f"{GCP_PROJECT}/global/networks/inv"}),
        Resource(GCP_HEALTH_CHECKS[0], "health", GCP_HEALTH_CHECK),
        Resource(GCP_BACKEND_SERVICES[0], "backend", {
            "healthChecks": [GCP_HEALTH_CHECK["selfLink"]], "backends": [{"group": group_url, "balancingMode": "RATE"}],
            "protocol": "HTTP", "portName": "http", "loadBalancingScheme": "EXTERNAL_MANAGED", "timeoutSec": 600.0},
                 {"healthChecks": ["health"], "backends": ["group"]}),
        Resource(GCP_URL_MAPS[0], "urls", {"defaultService": "backend"}, {"defaultService": ["backend"]}),
        Resource(GCP_URL_MAPS[0], "redirect", {"defaultUrlRedirect": {"httpsRedirect": True,
                                                                             "stripQuery": False}}),
        Resource(GCP_SSL_POLICIES[0], "tls", GCP_SSL_POLICY),
        Resource(GCP_HTTPS_PROXIES[0], "https-proxy", {"urlMap": "urls", "sslPolicy": GCP_SSL_POLICY["selfLink"],
                                                       "sslCertificates": ["certificate"]},
                 {"urlMap": ["urls"], "sslPolicy": ["tls"]}),
        Resource(GCP_HTTP_PROXIES[0], "http-proxy", {"urlMap": "redirect"}, {"urlMap": ["redirect"]}),
        Resource("gcp:compute/globalAddress:GlobalAddress", "address", {"address": "203.0.113.7"}, protect=True),
        Resource(GCP_FORWARDING_RULES[0], "https", GCP_HTTPS_RULE,
                 {"target": ["https-proxy"], "ipAddress": ["address"]}, protect=True),
        Resource(GCP_FORWARDING_RULES[0], "http", GCP_HTTP_RULE,
                 {"target": ["http-proxy"], "ipAddress": ["address"]}, protect=True),
    ]


#### Alibaba Cloud: ECS launch template, ESS scaling group, ALB ####

ALI_TEMPLATE = {
    "imageId": "ubuntu_22_04_x64", "instanceType": "ecs.gn7i-c8g1.2xlarge", "ramRoleName": "inv-identity",
    "httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1.0,
    "systemDisk": {"category": "cloud_essd", "size": 200.0, "encrypted": True}, "internetMaxBandwidthOut": 0.0,
    "securityGroupIds": ["sg-srv"], "userData": "H4sIAAAAAAAA/0vOz0ktyQcAAAD//w=="}
ALI_SERVER_GROUP = {"protocol": "HTTP", "serverGroupType": "Instance", "vpcId": "vpc-1", "healthCheckConfig": {
    "healthCheckEnabled": True, "healthCheckPath": HEALTH_PATH, "healthCheckProtocol": "HTTP",
    "healthCheckConnectPort": 0.0}}
ALI_FORWARD = [{"type": "ForwardGroup", "forwardGroupConfig": {"serverGroupTuples": [{"serverGroupId": "sgp-1"}]}}]
ALI_HTTPS_LISTENER = {"loadBalancerId": "alb-1", "listenerPort": 443.0, "listenerProtocol": "HTTPS",
                      "securityPolicyId": "tls_cipher_policy_1_2_strict_with_1_3",
                      "certificates": {"certificateId": "12345-ap-southeast-1"}, "defaultActions": ALI_FORWARD}
ALI_HTTP_LISTENER = {"loadBalancerId": "alb-1", "listenerPort": 80.0, "listenerProtocol": "HTTP",
                     "defaultActions": ALI_FORWARD}
ALI_REDIRECT_RULE = {
    "listenerId": "lsn-http", "priority": 1.0, "ruleName": "https",
    "ruleConditions": [{"type": "Path", "pathConfig": {"values": ["/*"]}}],
    "ruleActions": [{"type": "Redirect", "order": 1.0,
                     "redirectConfig": {"protocol": "HTTPS", "port": "443", "httpCode": "301"}}]}


def alibaba() -> list[Resource]:
    return [
        Resource(ALI_VSWITCH, "private-0", {"zoneId": "ap-southeast-1a", "cidrBlock": "10.64.16.0/20"}),
        Resource(ALI_VSWITCH, "private-1", {"zoneId": "ap-southeast-1b", "cidrBlock": "10.64.32.0/20"}),
        Resource(ALI_SECURITY_GROUP, "servers", {"vpcId": "vpc-1"}),
        Resource(ALI_SECURITY_GROUP_RULE, "servers-api", {
            "type": "ingress", "ipProtocol": "tcp", "portRange": "8000/8000", "cidrIp": NETWORK, "policy": "accept",
            "nicType": "intranet", "securityGroupId": "sg-srv"}, {"securityGroupId": ["servers"]}),
        Resource(ALI_LAUNCH_TEMPLATES[0], "template", ALI_TEMPLATE, {"securityGroupIds": ["servers"]},
                 protect=True),
        Resource(ALI_SCALING_GROUP, "group", {
            "minSize": 2.0, "maxSize": 4.0, "vswitchIds": ["vsw-a", "vsw-b"], "launchTemplateId": "lt-1",
            "healthCheckTypes": ["LOAD_BALANCER"], "groupDeletionProtection": True,
            "albServerGroups": [{"albServerGroupId": "sgp-1", "port": SERVING_PORT, "weight": 100.0}]},
                 {"launchTemplateId": ["template"], "vswitchIds": ["private-0", "private-1"],
                  "albServerGroups": ["server-group"]}, protect=True),
        Resource(resource_types.ALI_SERVER_GROUP, "server-group", ALI_SERVER_GROUP),
        Resource(ALI_LOAD_BALANCER, "lb", {"addressType": "Internet", "loadBalancerEdition": "Standard",
                                           "deletionProtectionEnabled": True}, protect=True),
        Resource(ALI_LISTENER, "https", ALI_HTTPS_LISTENER,
                 {"loadBalancerId": ["lb"], "defaultActions": ["server-group"]}),
        Resource(ALI_LISTENER, "http", ALI_HTTP_LISTENER,
                 {"loadBalancerId": ["lb"], "defaultActions": ["server-group"]}),
        Resource(ALI_LISTENER_RULE, "http-redirect", ALI_REDIRECT_RULE, {"listenerId": ["http"]}),
    ]


#### Huawei Cloud: AS configuration and group, dedicated ELB ####

HW_CONFIGURATION = {"scalingConfigurationName": "inv", "instanceConfig": {
    "flavor": "pi2.2xlarge.4", "image": "img-1", "securityGroupIds": ["sg-srv"], "userData": "I2Nsb3VkLWNvbmZpZw==",
    "disks": [{"diskType": "SYS", "size": 200.0, "volumeType": "GPSSD",
               "kmsId": "cbc7f3ab-fab2-8964-3b29-643cfeb93998"}]}}
HW_HTTPS_LISTENER = {"loadbalancerId": "elb-1", "protocol": "HTTPS", "protocolPort": 443.0,
                     "tlsCiphersPolicy": "tls-1-2-strict", "serverCertificate": "cert-1", "defaultPoolId": "pool-1"}
HW_HTTP_LISTENER = {"loadbalancerId": "elb-1", "protocol": "HTTP", "protocolPort": 80.0}
HW_MONITOR = {"poolId": "pool-1", "protocol": "HTTP", "urlPath": HEALTH_PATH, "interval": 10.0, "timeout": 5.0,
              "maxRetries": 3.0}


def huawei() -> list[Resource]:
    return [
        Resource(HW_SECURITY_GROUP, "servers", {"name": "servers"}),
        Resource(HW_SECURITY_GROUP_RULE, "servers-api", {
            "direction": "ingress", "ethertype": "IPv4", "protocol": "tcp", "portRangeMin": SERVING_PORT,
            "portRangeMax": SERVING_PORT, "remoteIpPrefix": NETWORK, "securityGroupId": "sg-srv"},
                 {"securityGroupId": ["servers"]}),
        Resource(HW_AS_CONFIGURATION, "template", HW_CONFIGURATION, {"instanceConfig": ["servers"]}),
        Resource(HW_AS_GROUP, "group", {
            "scalingConfigurationId": "conf-1", "minInstanceNumber": 2.0, "maxInstanceNumber": 4.0,
            "availabilityZones": ["ap-southeast-3a", "ap-southeast-3b"], "networks": [{"id": "subnet-1"}],
            "vpcId": "vpc-1", "healthPeriodicAuditMethod": "ELB_AUDIT",
            "lbaasListeners": [{"poolId": "pool-1", "protocolPort": SERVING_PORT}]},
                 {"scalingConfigurationId": ["template"], "lbaasListeners": ["pool"]}, protect=True),
        Resource(HW_LOAD_BALANCER, "lb", {"ipv4EipId": "eip-1", "availabilityZones": ["ap-southeast-3a"],
                                          "deletionProtectionEnable": True}, protect=True),
        Resource(HW_LISTENER, "https", HW_HTTPS_LISTENER, {"loadbalancerId": ["lb"], "defaultPoolId": ["pool"]}),
        Resource(HW_LISTENER, "http", HW_HTTP_LISTENER, {"loadbalancerId": ["lb"]}),
        Resource(HW_L7_POLICY, "http-redirect", {"listenerId": "lsn-http", "action": "REDIRECT_TO_LISTENER",
                                                 "redirectListenerId": "lsn-https"},
                 {"listenerId": ["http"], "redirectListenerId": ["https"]}),
        Resource(HW_POOL, "pool", {"protocol": "HTTP", "lbMethod": "ROUND_ROBIN", "loadbalancerId": "elb-1"},
                 {"loadbalancerId": ["lb"]}),
        Resource(resource_types.HW_MONITOR, "health", HW_MONITOR, {"poolId": ["pool"]}),
    ]


#### The API key: a secret of the stack that the servers' identity may read (each cloud's create_identity) ####


def policy_document(statements: list[dict[str, Any]], version: str = "2012-10-17") -> str:
    return json.dumps({"Version": version, "Statement": statements})


def trust_policy(service: str, version: str = "2012-10-17") -> str:
    return policy_document([{"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": [service]}}],
                           version)


AWS_KEY_ARN = "arn:aws:ssm:us-east-1:123456789012:parameter/inferstack/inv/prod/inv-secrets/api-key"
SECRETS_READ = policy_document([{"Effect": "Allow", "Action": ["ssm:GetParameter", "ssm:GetParameters"],
                                 "Resource": [AWS_KEY_ARN]}])


def aws_api_key() -> list[Resource]:
    return [
        Resource(AWS_ROLE, "identity-role", {"name": "inv-identity-role", "assumeRolePolicy": trust_policy(
            "ec2.amazonaws.com"), "arn": "arn:aws:iam::123456789012:role/inv-identity-role"}),
        Resource(AWS_PARAMETER, "secrets-api-key", {"name": "/inferstack/inv/prod/inv-secrets/api-key",
                                                    "type": "SecureString", "arn": AWS_KEY_ARN}),
        Resource(AWS_ROLE_POLICY, "identity-secrets-read", {"role": "inv-identity-role", "policy": SECRETS_READ},
                 {"role": ["identity-role"]}),
    ]


GCP_EMAIL = GCP_TEMPLATE["serviceAccount"]["email"]


def gcp_api_key() -> list[Resource]:
    return [
        Resource(GCP_SERVICE_ACCOUNT, "identity-account", {"email": GCP_EMAIL,
                                                           "member": f"serviceAccount:{GCP_EMAIL}"}),
        Resource(GCP_SECRET, "secrets-api-key", {"secretId": "inv-secrets-api-key",
                                                 "name": "projects/123/secrets/inv-secrets-api-key"}),
        Resource(GCP_SECRET_IAM_MEMBER, "identity-secret-read-0", {
            "secretId": "projects/p/secrets/inv-secrets-api-key", "member": f"serviceAccount:{GCP_EMAIL}",
            "role": "roles/secretmanager.secretAccessor"}, {"secretId": ["secrets-api-key"]}),
    ]


ALI_KEY_ARN = "acs:kms:ap-southeast-1:5123456789012345:secret/inferstack/inv/prod/inv-secrets/api-key"


def alibaba_api_key() -> list[Resource]:
    return [
        Resource(ALI_ROLE, "identity-role", {"roleName": "inv-identity",
                                             "assumeRolePolicyDocument": trust_policy("ecs.aliyuncs.com", "1")}),
        Resource(ALI_SECRET, "secrets-api-key", {"secretName": "inferstack/inv/prod/inv-secrets/api-key",
                                                 "arn": ALI_KEY_ARN}),
        Resource(ALI_POLICY, "identity-secrets-read", {"policyName": "inv-identity-secrets-read",
                                                       "policyDocument": policy_document([
                                                                 {"Effect": "Allow", "Action": "kms:GetSecretValue",
                                                                  "Resource": [ALI_KEY_ARN]}], "1")}),
        Resource(ALI_ROLE_POLICY_ATTACHMENT, "identity-secrets-read-attachment", {
            "roleName": "inv-identity", "policyName": "inv-identity-secrets-read", "policyType": "Custom"},
                 {"roleName": ["identity-role"], "policyName": ["identity-secrets-read"]}),
    ]


def huawei_api_key() -> list[Resource]:
    secrets_read = json.dumps({"Version": "1.1", "Statement": [
        {"Effect": "Allow", "Action": ["csms:secretVersion:get", "kms:dek:decrypt"]}]})
    return [
        Resource(HW_ROLE, "identity-secrets-read", {"name": "inv-secrets-read", "type": "XA",
                                                    "policy": secrets_read}),
        Resource(HW_AGENCY, "identity-agency", {"name": "inv-agency", "delegatedServiceName": "op_svc_ecs",
                                                "projectRoles": [{"project": "ap-southeast-3",
                                                                  "roles": ["inv-secrets-read"]}]}),
        Resource(HW_SECRET, "secrets-api-key", {"name": "inv-secrets-api-key"}),
    ]


FLEETS: dict[str, Callable[[], list[Resource]]] = {"aws": aws, "gcp": gcp, "alibaba": alibaba, "huawei": huawei}
API_KEYS: dict[str, Callable[[], list[Resource]]] = {"aws": aws_api_key, "gcp": gcp_api_key,
                                                     "alibaba": alibaba_api_key, "huawei": huawei_api_key}


def fleet(cloud: str, *, api_key: bool = True) -> list[Resource]:
    """The compliant fleet of a cloud; without its API key (and the identity that reads it) when `api_key` is False."""
    return [*FLEETS[cloud](), *(API_KEYS[cloud]() if api_key else [])]


def changed(resources: list[Resource], name: str, change: Callable[[dict[str, Any]], dict[str, Any]] | None,
            depends: dict[str, list[str]] | None = None) -> list[Resource]:
    """The stack with one resource's properties changed (None: the resource removed)."""
    result = []
    for resource in resources:
        if resource.name != name:
            result.append(resource)
        elif change is not None:
            props = change(copy.deepcopy(dict(resource.props)))
            result.append(dataclasses.replace(resource, props=props,
                                              depends=dict(resource.depends) if depends is None else depends))
    return result
