"""The team's infrastructure: a VPC with private subnets behind a NAT gateway, the application tier, and (the
addition) an InferenceServer in those private subnets, deploying the plan the team reviewed (plan.json).

`pulumi up` runs this file; the unit tests in tests/ run it under Pulumi's mocks.
"""

from pathlib import Path

import pulumi
import pulumi_aws as aws

from inferstack.components import InferenceServer
from inferstack.plan_file import load_plan

config = pulumi.Config()
region = pulumi.Config("aws").require("region")
VPC_CIDR = "10.20.0.0/16"
TAGS = {"team": "support"}

#### What the program already had: its network and application tier ####

vpc = aws.ec2.Vpc("vpc", cidr_block=VPC_CIDR, enable_dns_hostnames=True, enable_dns_support=True,
                  tags={**TAGS, "Name": "support"})
gateway = aws.ec2.InternetGateway("internet", vpc_id=vpc.id, tags=TAGS)
public = aws.ec2.Subnet("public-a", vpc_id=vpc.id, cidr_block="10.20.0.0/24", availability_zone=f"{region}a",
                        map_public_ip_on_launch=True, tags={**TAGS, "Name": "support-public-a"})
public_routes = aws.ec2.RouteTable("public-routes", vpc_id=vpc.id, routes=[{"cidr_block": "0.0.0.0/0",
                                                                      "gateway_id": gateway.id}], tags=TAGS)
aws.ec2.RouteTableAssociation("public-a-routes", subnet_id=public.id, route_table_id=public_routes.id)
nat = aws.ec2.NatGateway("nat", allocation_id=aws.ec2.Eip("nat-ip", domain="vpc", tags=TAGS).id, subnet_id=public.id,
                         tags=TAGS, opts=pulumi.ResourceOptions(depends_on=[gateway]))
private_routes = aws.ec2.RouteTable("private-routes", vpc_id=vpc.id, routes=[{"cidr_block": "0.0.0.0/0",
                                                                        "nat_gateway_id": nat.id}], tags=TAGS)
private_subnets = []
for zone, cidr in (("a", "10.20.10.0/24"), ("b", "10.20.11.0/24")):
    subnet = aws.ec2.Subnet(f"private-{zone}", vpc_id=vpc.id, cidr_block=cidr, availability_zone=f"{region}{zone}",
                            tags={**TAGS, "Name": f"support-private-{zone}"})
    aws.ec2.RouteTableAssociation(f"private-{zone}-routes", subnet_id=subnet.id, route_table_id=private_routes.id)
    private_subnets.append(subnet)

app = aws.ec2.SecurityGroup("app", vpc_id=vpc.id, description="application servers", tags=TAGS)

#### The addition: the inference tier in the same private subnets ####

plan = load_plan(Path(__file__).parent / config.require("planFile"), "aws")
inference = InferenceServer("inference", {
    "plan": plan,
    # The program's own VPC and private subnets: no network is created. With no allowed_cidrs, the API answers the
    # VPC's own range (10.20.0.0/16), looked up from the VPC.
    "network_id": vpc.id,
    "subnet_ids": [subnet.id for subnet in private_subnets],
    "static_assets": False,
    "tags": TAGS,
})

# The application reaches the model through the VPC: egress to the API port is all it needs.
aws.vpc.SecurityGroupEgressRule(
    "app-to-inference", security_group_id=app.id, ip_protocol="tcp", from_port=plan.serving.port,
    to_port=plan.serving.port, referenced_security_group_id=inference.firewall_ids.apply(lambda ids: ids[0]))

pulumi.export("vpcId", vpc.id)
pulumi.export("inferenceUrl", inference.endpoint_url)
pulumi.export("inferencePrivateIps", inference.private_ips)
pulumi.export("modelBucket", inference.model_bucket_name)
pulumi.export("plan", inference.plan_summary)
