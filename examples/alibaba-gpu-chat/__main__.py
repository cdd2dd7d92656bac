"""A chat model on an Alibaba Cloud GPU server: the workload is sized at `pulumi up`, then deployed.

Config (namespace `alibaba-gpu-chat:`): `allowedCidrs` (list, optional; default: reachable inside the VPC only),
`apiKey` (secret; required once allowedCidrs opens the API beyond private networks), `assetsDomain` (the static-assets
domain; its CNAME points at the CDN). The KMS instance that holds the key is `inferstack-alibaba:kmsInstanceId` and
`kmsKeyId` (Pulumi.dev.yaml).
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

chat = InferenceServer("chat", args)

pulumi.export("endpoint", chat.endpoint_url)
pulumi.export("instanceIds", chat.instance_ids)
pulumi.export("modelBucket", chat.model_bucket_name)
pulumi.export("staticAssetsUrl", chat.static_assets_url)
pulumi.export("apiKeySecret", chat.api_key_ref)
pulumi.export("plan", chat.plan_summary)
