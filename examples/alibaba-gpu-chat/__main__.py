"""A chat model on an Alibaba Cloud GPU server: the workload is sized at `pulumi up`, then deployed.

Config (namespace `alibaba-gpu-chat:`): `allowedCidrs` (list, optional; default: reachable inside the VPC only),
`apiKey` (secret; required once allowedCidrs opens the API beyond private networks). The CDN domain and the KMS
instance are read by the Alibaba backend from `inferstack-alibaba:` (see Pulumi.dev.yaml).
"""

from pathlib import Path

import pulumi

from inferstack.components import InferenceServer
from inferstack.spec import load_workload

config = pulumi.Config()
args = {
    "workload": load_workload(Path(__file__).parent / "workload.yaml"),
    "cloud": "alibaba",
    "allowed_cidrs": config.get_object("allowedCidrs") or [],
    "tags": {"example": "alibaba-gpu-chat"},
}
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
