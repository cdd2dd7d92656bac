"""What the pack knows of the four providers: their resource types (the type tokens, exactly), and the settings
a cloud cannot express (the reasons a rule gives when it does not apply there).

A type that one concern alone reads may be named beside its rule instead (the managed caches in `cache`, Huawei's
log groups in `log_retention`, Cloud Armor's policies in `fleet`).
"""

from __future__ import annotations

#### Resource types (the providers' type tokens, exactly) ####

PROVIDER_PACKAGES = {"aws": "aws", "gcp": "gcp", "alicloud": "alibaba", "huaweicloud": "huawei"}
"""The cloud of each provider package, the first part of its type tokens: inferstack.clouds' `pulumi_package`s,
restated because the pack imports nothing from inferstack (tests/policy checks that the two agree)."""


def cloud_of(resource_type: str) -> str:
    return PROVIDER_PACKAGES.get(resource_type.split(":", 1)[0], "")


# AWS, pulumi-aws 7.
AWS_INSTANCE = "aws:ec2/instance:Instance"
AWS_LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
AWS_LAUNCH_CONFIGURATION = "aws:ec2/launchConfiguration:LaunchConfiguration"
AWS_SPOT_INSTANCE_REQUEST = "aws:ec2/spotInstanceRequest:SpotInstanceRequest"
AWS_VOLUME = "aws:ebs/volume:Volume"
AWS_SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
AWS_DEFAULT_SECURITY_GROUP = "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup"
AWS_SECURITY_GROUP_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
AWS_INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
AWS_BUCKET = "aws:s3/bucket:Bucket"
AWS_BUCKET_ACL = "aws:s3/bucketAcl:BucketAcl"
AWS_BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
AWS_PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
AWS_BUCKET_ENCRYPTION = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
AWS_ROLE = "aws:iam/role:Role"
AWS_ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
AWS_LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
GCP_LOG_BUCKET = "gcp:logging/projectBucketConfig:ProjectBucketConfig"
AWS_MANAGED_POLICY = "aws:iam/policy:Policy"
AWS_IDENTITY_POLICIES = (AWS_ROLE_POLICY, "aws:iam/userPolicy:UserPolicy", "aws:iam/groupPolicy:GroupPolicy",
                         AWS_MANAGED_POLICY)
AWS_ROLE_POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
AWS_POLICY_ATTACHMENT = "aws:iam/policyAttachment:PolicyAttachment"
AWS_ROLE_ATTACHMENTS_EXCLUSIVE = "aws:iam/rolePolicyAttachmentsExclusive:RolePolicyAttachmentsExclusive"
AWS_INSTANCE_PROFILE = "aws:iam/instanceProfile:InstanceProfile"
AWS_IMAGE_BUILD_INFRASTRUCTURE = "aws:imagebuilder/infrastructureConfiguration:InfrastructureConfiguration"
AWS_IMAGE_BUILD_COMPONENT = "aws:imagebuilder/component:Component"
AWS_DISTRIBUTION = "aws:cloudfront/distribution:Distribution"
AWS_PARAMETER = "aws:ssm/parameter:Parameter"
AWS_SUBNET = "aws:ec2/subnet:Subnet"
AWS_AUTOSCALING_GROUP = "aws:autoscaling/group:Group"
AWS_GROUP_ATTACHMENTS = ("aws:autoscaling/attachment:Attachment",
                         "aws:autoscaling/trafficSourceAttachment:TrafficSourceAttachment")
# Elastic Load Balancing v2 is registered under two modules (`alb` is an alias of `lb`).
AWS_LOAD_BALANCERS = ("aws:lb/loadBalancer:LoadBalancer", "aws:alb/loadBalancer:LoadBalancer")
AWS_LISTENERS = ("aws:lb/listener:Listener", "aws:alb/listener:Listener")
AWS_LISTENER_RULES = ("aws:lb/listenerRule:ListenerRule", "aws:alb/listenerRule:ListenerRule")
AWS_TARGET_GROUPS = ("aws:lb/targetGroup:TargetGroup", "aws:alb/targetGroup:TargetGroup")
AWS_CLASSIC_LOAD_BALANCER = "aws:elb/loadBalancer:LoadBalancer"

# Google Cloud, pulumi-gcp 10.
GCP_INSTANCE = "gcp:compute/instance:Instance"
GCP_INSTANCE_TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
GCP_DISK = "gcp:compute/disk:Disk"
GCP_FIREWALL = "gcp:compute/firewall:Firewall"
GCP_FIREWALL_POLICY_RULE = "gcp:compute/firewallPolicyRule:FirewallPolicyRule"
GCP_NETWORK_FIREWALL_POLICY_RULE = "gcp:compute/networkFirewallPolicyRule:NetworkFirewallPolicyRule"
GCP_REGION_FIREWALL_POLICY_RULE = "gcp:compute/regionNetworkFirewallPolicyRule:RegionNetworkFirewallPolicyRule"
GCP_FIREWALL_POLICY_WITH_RULES = "gcp:compute/firewallPolicyWithRules:FirewallPolicyWithRules"
GCP_NETWORK_FIREWALL_POLICY_WITH_RULES = "gcp:compute/networkFirewallPolicyWithRules:NetworkFirewallPolicyWithRules"
GCP_REGION_FIREWALL_POLICY_WITH_RULES = (
    "gcp:compute/regionNetworkFirewallPolicyWithRules:RegionNetworkFirewallPolicyWithRules")
GCP_BUCKET = "gcp:storage/bucket:Bucket"
GCP_BUCKET_IAM_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
GCP_BUCKET_IAM_BINDING = "gcp:storage/bucketIAMBinding:BucketIAMBinding"
GCP_BUCKET_IAM_POLICY = "gcp:storage/bucketIAMPolicy:BucketIAMPolicy"
GCP_PROJECT_IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"
GCP_PROJECT_IAM_BINDING = "gcp:projects/iAMBinding:IAMBinding"
GCP_PROJECT_IAM_POLICY = "gcp:projects/iAMPolicy:IAMPolicy"
GCP_SECRET_IAM_MEMBER = "gcp:secretmanager/secretIamMember:SecretIamMember"
GCP_SECRET_IAM_BINDING = "gcp:secretmanager/secretIamBinding:SecretIamBinding"
GCP_SERVICE_ACCOUNT = "gcp:serviceaccount/account:Account"
GCP_BACKEND_BUCKET = "gcp:compute/backendBucket:BackendBucket"
GCP_URL_MAP = "gcp:compute/uRLMap:URLMap"
GCP_HTTP_PROXY = "gcp:compute/targetHttpProxy:TargetHttpProxy"
GCP_SECRET = "gcp:secretmanager/secret:Secret"
GCP_REGION_INSTANCE_TEMPLATE = "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate"
GCP_INSTANCE_TEMPLATES = (GCP_INSTANCE_TEMPLATE, GCP_REGION_INSTANCE_TEMPLATE)
GCP_REGION_GROUP_MANAGER = "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager"
GCP_ZONE_GROUP_MANAGER = "gcp:compute/instanceGroupManager:InstanceGroupManager"
GCP_AUTOSCALERS = ("gcp:compute/regionAutoscaler:RegionAutoscaler", "gcp:compute/autoscaler:Autoscaler")
GCP_FORWARDING_RULES = ("gcp:compute/globalForwardingRule:GlobalForwardingRule",
                        "gcp:compute/forwardingRule:ForwardingRule")
GCP_HTTPS_PROXIES = ("gcp:compute/targetHttpsProxy:TargetHttpsProxy",
                     "gcp:compute/regionTargetHttpsProxy:RegionTargetHttpsProxy")
GCP_HTTP_PROXIES = (GCP_HTTP_PROXY, "gcp:compute/regionTargetHttpProxy:RegionTargetHttpProxy")
GCP_URL_MAPS = (GCP_URL_MAP, "gcp:compute/regionUrlMap:RegionUrlMap")
GCP_SSL_POLICIES = ("gcp:compute/sSLPolicy:SSLPolicy", "gcp:compute/regionSslPolicy:RegionSslPolicy")
GCP_BACKEND_SERVICES = ("gcp:compute/backendService:BackendService",
                        "gcp:compute/regionBackendService:RegionBackendService")
GCP_HEALTH_CHECKS = ("gcp:compute/healthCheck:HealthCheck", "gcp:compute/regionHealthCheck:RegionHealthCheck")
GCP_LEGACY_HEALTH_CHECKS = ("gcp:compute/httpHealthCheck:HttpHealthCheck",
                            "gcp:compute/httpsHealthCheck:HttpsHealthCheck")

# Alibaba Cloud, pulumi-alicloud 4.
ALI_INSTANCE = "alicloud:ecs/instance:Instance"
ALI_DISK = "alicloud:ecs/ecsDisk:EcsDisk"
ALI_SECURITY_GROUP_RULE = "alicloud:ecs/securityGroupRule:SecurityGroupRule"
ALI_BUCKET = "alicloud:oss/bucket:Bucket"
ALI_LOG_PROJECT = "alicloud:log/project:Project"
"""An SLS project (a load balancer's access logs): private unless its `policy` admits others."""
ALI_LOG_STORE = "alicloud:log/store:Store"
ALI_BUCKET_ACL = "alicloud:oss/bucketAcl:BucketAcl"
ALI_BUCKET_POLICY = "alicloud:oss/bucketPolicy:BucketPolicy"
ALI_PUBLIC_ACCESS_BLOCK = "alicloud:oss/bucketPublicAccessBlock:BucketPublicAccessBlock"
ALI_BUCKET_ENCRYPTION = "alicloud:oss/bucketServerSideEncryption:BucketServerSideEncryption"
ALI_ROLE = "alicloud:ram/role:Role"
ALI_POLICY = "alicloud:ram/policy:Policy"
ALI_ROLE_POLICY_ATTACHMENT = "alicloud:ram/rolePolicyAttachment:RolePolicyAttachment"
ALI_CDN_DOMAIN = "alicloud:cdn/domainNew:DomainNew"
ALI_CDN_CONFIG = "alicloud:cdn/domainConfig:DomainConfig"
ALI_SECRET = "alicloud:kms/secret:Secret"
ALI_SECURITY_GROUP = "alicloud:ecs/securityGroup:SecurityGroup"
ALI_VSWITCH = "alicloud:vpc/switch:Switch"
ALI_SCALING_CONFIGURATION = "alicloud:ess/scalingConfiguration:ScalingConfiguration"
ALI_LAUNCH_TEMPLATES = ("alicloud:ecs/ecsLaunchTemplate:EcsLaunchTemplate",
                        "alicloud:ecs/launchTemplate:LaunchTemplate")
ALI_SCALING_GROUP = "alicloud:ess/scalingGroup:ScalingGroup"
ALI_GROUP_ATTACHMENT = "alicloud:ess/albServerGroupAttachment:AlbServerGroupAttachment"
ALI_LOAD_BALANCER = "alicloud:alb/loadBalancer:LoadBalancer"
ALI_LB_SECURITY_GROUP = "alicloud:alb/loadBalancerSecurityGroupAttachment:LoadBalancerSecurityGroupAttachment"
ALI_LISTENER = "alicloud:alb/listener:Listener"
ALI_LISTENER_RULE = "alicloud:alb/rule:Rule"
ALI_SERVER_GROUP = "alicloud:alb/serverGroup:ServerGroup"
ALI_TLS_POLICY = "alicloud:alb/securityPolicy:SecurityPolicy"

# Huawei Cloud, pulumi-huaweicloud 0.0.12 (its modules are capitalised; it has no Networking module).
HW_INSTANCE = "huaweicloud:Ecs/instance:Instance"
HW_VOLUME = "huaweicloud:Evs/volume:Volume"
HW_SECURITY_GROUP_RULE = "huaweicloud:Vpc/secgroupRule:SecgroupRule"
HW_BUCKET = "huaweicloud:Obs/bucket:Bucket"
HW_BUCKET_POLICY = "huaweicloud:Obs/bucketPolicy:BucketPolicy"
HW_ROLE = "huaweicloud:Iam/role:Role"
HW_AGENCY = "huaweicloud:Iam/agency:Agency"
HW_CDN_DOMAIN = "huaweicloud:Cdn/domain:Domain"
HW_SECRET = "huaweicloud:Dew/secret:Secret"
HW_SECURITY_GROUP = "huaweicloud:Vpc/secgroup:Secgroup"
HW_AS_CONFIGURATION = "huaweicloud:As/configuration:Configuration"
HW_AS_GROUP = "huaweicloud:As/group:Group"
HW_LOAD_BALANCER = "huaweicloud:DedicatedElb/loadbalancer:Loadbalancer"
HW_EIP_ASSOCIATE = "huaweicloud:Vpc/eipAssociate:EipAssociate"
HW_LISTENER = "huaweicloud:DedicatedElb/listener:Listener"
HW_L7_POLICY = "huaweicloud:DedicatedElb/l7policy:L7policy"
HW_POOL = "huaweicloud:DedicatedElb/pool:Pool"
HW_MONITOR = "huaweicloud:DedicatedElb/monitor:Monitor"
HW_TLS_POLICY = "huaweicloud:DedicatedElb/securityPolicy:SecurityPolicy"

# Listeners of load balancers that a fleet does not use and the pack does not read (classic and network load
# balancers, Huawei's shared ELB): each counts as a public listener the pack cannot check.
UNREAD_LISTENER_TYPES = (AWS_CLASSIC_LOAD_BALANCER, "alicloud:slb/listener:Listener",
                         "alicloud:nlb/listener:Listener", "huaweicloud:Elb/listener:Listener")

#### What a cloud cannot express (the reasons match the capabilities in inferstack/components/<cloud>.py) ####

GCP_NO_METADATA_TOKENS = (
    "Google Cloud's metadata server has no session-token mode to require: it demands only the Metadata-Flavor "
    "header (inferstack turns the header-free legacy endpoints off with disable-legacy-endpoints)")
HUAWEI_NO_METADATA_TOKENS = (
    "Huawei Cloud's ECS metadata token mode is offered in one region only, by ticket, and pulumi_huaweicloud has no "
    "metadata option "
    "(inferstack's boot script lets only root reach it, with a host firewall rule)")
GCP_ALWAYS_ENCRYPTED = (
    "Google Cloud encrypts every Cloud Storage object and persistent disk at rest and no setting turns it off (a "
    "customer-managed key only changes whose key it is)")
HUAWEI_NO_PUBLIC_ACCESS_BLOCK = (
    "Huawei OBS has no public-access-block setting in pulumi_huaweicloud and its ACLs cannot be turned off; "
    "buckets-not-public checks the bucket's ACL and policy instead")
GCP_PUBLIC_ACCESS_ON_BUCKET = (
    "Cloud Storage keeps public access prevention on the bucket itself, which buckets-not-public checks")
NO_SERVER_IDENTITY = (
    "the stack holds no server identity (an AWS or Alibaba role that the compute service assumes, a Huawei agency "
    "for ECS, a Google service account on an instance)")
