"""A chat model on an Alibaba Cloud GPU server: the workload is sized at `pulumi up`, then deployed.

Config (namespace `alibaba-gpu-chat:`): `allowedCidrs` (list, optional; default: reachable inside the VPC only),
`apiKey` (secret; required once allowedCidrs opens the API beyond private networks), `assetsDomain` (the static-assets
domain; its CNAME points at the CDN), and for a plan that is a fleet (stage production in workload.yaml) `apiDomain`
and `apiCertificate` (its HTTPS endpoint and that domain's CAS certificate, docs/deploy-alibaba.md "Production
fleet"). The KMS instance that holds the key is `inferstack-alibaba:kmsInstanceId` and `kmsKeyId` (Pulumi.dev.yaml).
"""

from pathlib import Path

import pulumi

from inferstack.components import InferenceServer
from inferstack.spec import load_workload

config = pulumi.Config()
assets_domain = config.get("assetsDomain")
args = {
    "workload": load_workload(Path(__file__).parent / "workload.yaml"),
    "cloud": "alibaba",
    "allowed_cidrs": config.get_object("allowedCidrs") or [],
    # Alibaba CDN serves only a domain you own: without one, the example deploys the server alone.
    "static_assets": assets_domain is not None,
    "tags": {"example": "alibaba-gpu-chat"},
}
if assets_domain is not None:
    args["assets_domain"] = assets_domain
api_key = config.get_secret("apiKey")
if api_key is not None:
    args["api_key"] = api_key
for key, arg in (("apiDomain", "api_domain"), ("apiCertificate", "api_certificate")):
    value = config.get(key)
    if value is not None:
        args[arg] = value

chat = InferenceServer("chat", args)

pulumi.export("endpoint", chat.endpoint_url)
pulumi.export("loadBalancerAddress", chat.load_balancer_address)  # a fleet's: point apiDomain at it
pulumi.export("instanceIds", chat.instance_ids)
pulumi.export("modelBucket", chat.model_bucket_name)
pulumi.export("staticAssetsUrl", chat.static_assets_url)
pulumi.export("apiKeySecret", chat.api_key_ref)
pulumi.export("plan", chat.plan_summary)
