"""A chat model on a Huawei Cloud GPU server: the workload is sized at `pulumi up`, then deployed.

Config (namespace `huawei-gpu-chat:`): `allowedCidrs` (list, optional; default: reachable inside the VPC only),
`apiKey` (secret; required once allowedCidrs opens the API beyond private networks), `assetsDomain` and
`assetsCertificate` (the static-assets domain and the id of its certificate in SCM); with `stage: production` in
workload.yaml (a fleet behind an HTTPS load balancer) also `apiDomain` and `apiCertificate` (the endpoint's domain
and the id of its certificate in ELB).
"""

from pathlib import Path

import pulumi

from inferstack.components import InferenceServer
from inferstack.spec import load_workload

config = pulumi.Config()
assets_domain = config.get("assetsDomain")
args = {
    "workload": load_workload(Path(__file__).parent / "workload.yaml"),
    "cloud": "huawei",
    "allowed_cidrs": config.get_object("allowedCidrs") or [],
    # Huawei CDN serves only a domain you own: without one, the example deploys the server alone.
    "static_assets": assets_domain is not None,
    "tags": {"example": "huawei-gpu-chat"},
}
if assets_domain is not None:
    args["assets_domain"] = assets_domain
assets_certificate = config.get("assetsCertificate")  # the domain's certificate in SCM, required with it
if assets_certificate is not None:
    args["assets_certificate"] = assets_certificate
for key, arg in (("apiDomain", "api_domain"), ("apiCertificate", "api_certificate")):  # a fleet's endpoint
    value = config.get(key)
    if value is not None:
        args[arg] = value
api_key = config.get_secret("apiKey")
if api_key is not None:
    args["api_key"] = api_key

chat = InferenceServer("chat", args)

pulumi.export("endpoint", chat.endpoint_url)
pulumi.export("instanceIds", chat.instance_ids)
pulumi.export("loadBalancerAddress", chat.load_balancer_address)  # a fleet's: where apiDomain must point
pulumi.export("modelBucket", chat.model_bucket_name)
pulumi.export("staticAssetsUrl", chat.static_assets_url)
pulumi.export("apiKeySecret", chat.api_key_ref)
pulumi.export("plan", chat.plan_summary)
