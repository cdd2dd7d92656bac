"""Pulumi components for inference servers, the same on every cloud.

    from inferstack.components import InferenceServer
    server = InferenceServer("chat", {"plan": plan, "allowed_cidrs": ["203.0.113.0/24"], "api_key": key})

The components (`server.py`) are cloud-neutral; each cloud is one backend module named after it (`aws.py`,
`gcp.py`, `alibaba.py`, `huawei.py`) behind the `CloudBackend` interface in `core.py`, found through a registry
and imported only when a plan asks for that cloud. What a cloud cannot do is a `Capability` it states with a
reason; the components check them, and the guides (docs/deploy-<cloud>.md) list them.
"""

from inferstack.components.core import Capability, CloudBackend, Support, available_clouds, backend_for
from inferstack.components.server import (
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
