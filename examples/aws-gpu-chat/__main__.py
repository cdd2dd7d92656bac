"""A chat model on an AWS GPU server: the workload is sized at `pulumi up`, then deployed.

Config (namespace `aws-gpu-chat:`): `allowedCidrs` (list, optional; default: reachable inside the VPC only),
`apiKey` (secret; required once allowedCidrs opens the API beyond private networks), `apiDomain` and
`apiCertificate` (a fleet's HTTPS endpoint, required with `stage: production`; docs/deploy-aws.md,
"Production fleet").
"""

from pathlib import Path

import pulumi

from inferstack.components import InferenceServer
from inferstack.spec import load_workload

config = pulumi.Config()
args = {
    "workload": load_workload(Path(__file__).parent / "workload.yaml"),
    "cloud": "aws",
    "allowed_cidrs": config.get_object("allowedCidrs") or [],
    "tags": {"example": "aws-gpu-chat"},
}
api_key = config.get_secret("apiKey")
if api_key is not None:
    args["api_key"] = api_key
# A workload that plans a fleet (stage: production) runs behind one HTTPS load balancer for this domain.
for key, arg in (("apiDomain", "api_domain"), ("apiCertificate", "api_certificate")):
    if config.get(key):
        args[arg] = config.get(key)

chat = InferenceServer("chat", args)

pulumi.export("endpoint", chat.endpoint_url)
pulumi.export("loadBalancerAddress", chat.load_balancer_address)  # a fleet's: point apiDomain at it
pulumi.export("instanceIds", chat.instance_ids)
pulumi.export("modelBucket", chat.model_bucket_name)
pulumi.export("staticAssetsUrl", chat.static_assets_url)
pulumi.export("apiKeyParameter", chat.api_key_ref)
pulumi.export("plan", chat.plan_summary)
