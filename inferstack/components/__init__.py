"""Pulumi components for inference servers, the same on every cloud.

    from inferstack.components import InferenceServer
    server = InferenceServer("chat", {"plan": plan, "allowed_cidrs": ["203.0.113.0/24"], "api_key": key})

The components are cloud-neutral, one module per concern: `InferenceServer` (inference_server.py, its arguments
checked once, up front, into one `ServerSettings` in server_settings.py, its plan from plan_source.py) and the
children it composes, each also usable alone: `Network` and `Firewall` (network.py), `ModelStore` and
`StaticAssets` (storage.py), `ServerSecrets` and `ServerIdentity` (identity.py).

Each cloud is one backend package named after it (`aws/`, `gcp/`, `alibaba/`, `huawei/`: the backend class in its
`__init__.py`, one module per concern beside it) behind the `CloudBackend` interface (backend.py), found through a
registry and imported only when a plan asks for that cloud.
Components and backends speak through the request and result records of contract.py; what every cloud does the
same way is in shared.py, names and resource options in naming.py, argument checks in argument_checks.py. What a
cloud cannot do is a `Capability` it states with a reason (capabilities.py); the components check them, and the
guides (docs/deploy-<cloud>.md) list them.

They need Pulumi and the cloud's provider (`pip install 'inferstack[aws]'`, or gcp, alibaba, huawei, all): without
them, importing this package or asking for a cloud's backend raises MissingExtraError naming the extra.
"""

from inferstack.extras import require_pulumi

require_pulumi("inferstack.components")

# After the check: without Pulumi, the error names the extra to install instead of the missing module.
from inferstack.components.backend import CloudBackend, available_clouds, backend_for  # noqa: E402
from inferstack.components.capabilities import Capability, Support  # noqa: E402
from inferstack.components.identity import (  # noqa: E402
    ServerIdentity,
    ServerIdentityArgs,
    ServerSecrets,
    ServerSecretsArgs,
)
from inferstack.components.inference_server import InferenceServer  # noqa: E402
from inferstack.components.network import Firewall, FirewallArgs, Network, NetworkArgs  # noqa: E402
from inferstack.components.server_settings import InferenceServerArgs  # noqa: E402
from inferstack.components.storage import ModelStore, ModelStoreArgs, StaticAssets, StaticAssetsArgs  # noqa: E402

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
