"""Embeddings on an AWS CPU server: no GPU, no CDN, the model store and a private API.

Config (namespace `aws-cpu-embeddings:`): `allowedCidrs` (list, optional), `apiKey` (secret, optional;
required when allowedCidrs reaches beyond private networks), `apiDomain` and `apiCertificate` (optional:
a fleet's HTTPS endpoint, docs/deploy-aws.md "Production fleet").
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
    "static_assets": False,  # an API only: no bucket + CDN for static files
    "tags": {"example": "aws-cpu-embeddings"},
}
api_key = config.get_secret("apiKey")
if api_key is not None:
    args["api_key"] = api_key
# A workload that plans a fleet (stage: production) runs behind one HTTPS load balancer for this domain.
for key, arg in (("apiDomain", "api_domain"), ("apiCertificate", "api_certificate")):
    if config.get(key):
        args[arg] = config.get(key)

embeddings = InferenceServer("embeddings", args)

pulumi.export("endpoint", embeddings.endpoint_url)
pulumi.export("loadBalancerAddress", embeddings.load_balancer_address)  # a fleet's: point apiDomain at it
pulumi.export("privateIps", embeddings.private_ips)
pulumi.export("modelBucket", embeddings.model_bucket_name)
pulumi.export("plan", embeddings.plan_summary)
