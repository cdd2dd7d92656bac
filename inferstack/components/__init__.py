"""Pulumi components for inference servers, the same on every cloud.

    from inferstack.components import InferenceServer
    server = InferenceServer("chat", {"plan": plan, "allowed_cidrs": ["203.0.113.0/24"], "api_key": key})

The components (`server.py`) are cloud-neutral; each cloud is one backend module named after it (`aws.py`,
`gcp.py`, `alibaba.py`, `huawei.py`) behind the `CloudBackend` interface in `core.py`, found through a registry
and imported only when a plan asks for that cloud. What a cloud cannot do is a `Capability` it states with a
reason; the components check them, and the guides (docs/deploy-<cloud>.md) list them.

They need Pulumi and the cloud's provider (`pip install 'inferstack[aws]'`, or gcp, alibaba, huawei, all): without
them, importing this package or asking for a cloud's backend raises MissingExtraError naming the extra.
"""

from inferstack.extras import require_pulumi

require_pulumi("inferstack.components")

# After the check: without Pulumi, the error names the extra to install instead of the missing module.
from inferstack.components.core import Capability, CloudBackend, Support, available_clouds, backend_for  # noqa: E402
from inferstack.components.server import (  # noqa: E402
    Firewall,
    FirewallArgs,
    InferenceServer,
    InferenceServerArgs,
    ModelStore,
    ModelStoreArgs,
    Network,
    NetworkArgs,
    ServerIdentity,
    ServerIdentityArgs,
    ServerSecrets,
    ServerSecretsArgs,
    StaticAssets,
    StaticAssetsArgs,
)

__all__ = [
    "Capability",
    "CloudBackend",
    "Firewall",
    "FirewallArgs",
    "InferenceServer",
    "InferenceServerArgs",
    "ModelStore",
    "ModelStoreArgs",
    "Network",
    "NetworkArgs",
    "ServerIdentity",
    "ServerIdentityArgs",
    "ServerSecrets",
    "ServerSecretsArgs",
    "StaticAssets",
    "StaticAssetsArgs",
    "Support",
    "available_clouds",
    "backend_for",
]
