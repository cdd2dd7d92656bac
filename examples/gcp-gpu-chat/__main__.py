"""A chat model on a Google Cloud GPU server: the workload is sized at `pulumi up`, then deployed.

Config (namespace `gcp-gpu-chat:`): `allowedCidrs` (list, optional; default: reachable inside the VPC network
only), `apiKey` (secret; required once allowedCidrs opens the API beyond private networks), `assetsDomain` (the
static-assets domain; its DNS A record points at the address the deployment log names), `apiDomain` (the HTTPS
endpoint's domain, required once workload.yaml's stage is production: the plan is then a fleet behind a load
balancer).
"""

from pathlib import Path

import pulumi

from inferstack.components import InferenceServer
from inferstack.spec import load_workload

config = pulumi.Config()
assets_domain = config.get("assetsDomain")
args = {
    "workload": load_workload(Path(__file__).parent / "workload.yaml"),
    "cloud": "gcp",
    "allowed_cidrs": config.get_object("allowedCidrs") or [],
    # Cloud CDN serves only a domain you own: without one, the example deploys the server alone.
    "static_assets": assets_domain is not None,
    "tags": {"example": "gcp-gpu-chat"},
}
if assets_domain is not None:
    args["assets_domain"] = assets_domain
api_domain = config.get("apiDomain")  # a production workload runs as a fleet behind https://<apiDomain>
if api_domain is not None:
    args["api_domain"] = api_domain
api_key = config.get_secret("apiKey")
if api_key is not None:
    args["api_key"] = api_key

chat = InferenceServer("chat", args)

pulumi.export("endpoint", chat.endpoint_url)
pulumi.export("loadBalancerAddress", chat.load_balancer_address)  # a fleet: where apiDomain points
pulumi.export("instanceIds", chat.instance_ids)
pulumi.export("modelBucket", chat.model_bucket_name)
pulumi.export("staticAssetsUrl", chat.static_assets_url)
pulumi.export("apiKeySecret", chat.api_key_ref)
pulumi.export("serviceAccount", chat.identity_id)
pulumi.export("plan", chat.plan_summary)
