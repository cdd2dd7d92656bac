"""An existing Pulumi program with its own VPC: the inference server joins it, reusing the network.

Your program already owns a VPC and an application tier. Only the InferenceServer lines are new: it takes
the existing VPC and private subnets (so it creates no network), opens its API to the application's security
group range (the VPC, by default), and deploys the plan your team reviewed (`plan.json`, written by
`inferstack plan workload.yaml --cloud aws --json` and checked in), so `pulumi up` deploys exactly that.
"""

from pathlib import Path

import pulumi
import pulumi_aws as aws

from inferstack.components import InferenceServer
from inferstack.plan_file import load_plan

config = pulumi.Config()
vpc_id = config.require("vpcId")
private_subnet_ids = config.require_object("privateSubnetIds")

#### What the program already had (abridged): an application tier in the same VPC ####

app_security_group = aws.ec2.SecurityGroup(
    "app", vpc_id=vpc_id, description="application servers", tags={"team": "search"})

#### The addition ####

plan = load_plan(Path(__file__).parent / config.require("planFile"), "aws")

inference = InferenceServer(
    "inference",
    {
        "plan": plan,
        "network_id": vpc_id,
        "subnet_ids": private_subnet_ids,
        # Nothing outside the VPC may call the API: with no allowed_cidrs it answers the VPC's own range.
        "static_assets": False,
        "tags": {"team": "search"},
    },
    # Resources this program already protects stay protected; so does the inference tier.
    opts=pulumi.ResourceOptions(protect=plan.stage == "production"),
)

# The application reaches the model through the VPC; egress to the API port is all it needs.
aws.vpc.SecurityGroupEgressRule(
    "app-to-inference", security_group_id=app_security_group.id, ip_protocol="tcp",
    from_port=plan.serving.port, to_port=plan.serving.port,
    referenced_security_group_id=inference.firewall_ids.apply(lambda ids: ids[0]))

pulumi.export("inferenceUrls", inference.endpoint_urls)
pulumi.export("inferencePrivateIps", inference.private_ips)
pulumi.export("modelBucket", inference.model_bucket_name)
pulumi.export("plan", inference.plan_summary)
