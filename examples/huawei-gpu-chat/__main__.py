"""A chat model on a Huawei Cloud GPU server: the workload is sized at `pulumi up`, then deployed.

Config (namespace `huawei-gpu-chat:`): `allowedCidrs` (list, optional; default: reachable inside the VPC only),
`apiKey` (secret; required once allowedCidrs opens the API beyond private networks). Static assets behind Huawei
CDN are added when `inferstack-huawei:cdnDomain` and `inferstack-huawei:cdnCertificateId` are set.
"""

from pathlib import Path

import pulumi

from inferstack.components import InferenceServer
from inferstack.spec import load_workload

config = pulumi.Config()
cdn = pulumi.Config("inferstack-huawei")
args = {
    "workload": load_workload(Path(__file__).parent / "workload.yaml"),
    "cloud": "huawei",
    "allowed_cidrs": config.get_object("allowedCidrs") or [],
    # Huawei CDN serves only a domain you own: without one, the example deploys the server alone.
    "static_assets": bool(cdn.get("cdnDomain") and cdn.get("cdnCertificateId")),
    "tags": {"example": "huawei-gpu-chat"},
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
