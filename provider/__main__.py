"""The inferstack components as a Pulumi package for other languages (see PulumiPlugin.yaml, docs/existing-repo.md).

Pulumi runs this file in the plugin's virtual environment. `component_provider_host` reads the components' type
annotations and docstrings (the `*Args` TypedDicts, the output annotations) into a package schema, which
`pulumi package add` turns into an SDK in the consumer's language, and then serves `construct` for each component
a consumer's program creates: its arguments arrive as a plain dict with the schema's (camelCase) names mapped back
to the Python ones.
"""

from importlib.metadata import version

from pulumi.provider.experimental import component_provider_host

from inferstack.components import (
    Firewall,
    InferenceServer,
    ModelStore,
    Network,
    ServerIdentity,
    ServerSecrets,
    StaticAssets,
)

PACKAGE_NAME = "inferstack"
"""Matches the components' type tokens: `inferstack:index:<class name>`."""
COMPONENTS = [InferenceServer, Network, Firewall, ModelStore, StaticAssets, ServerSecrets, ServerIdentity]
"""Every public component of inferstack.components."""

if __name__ == "__main__":
    # The package's own version, so that the generated SDK carries it (the host would say 0.0.0).
    component_provider_host(components=COMPONENTS, name=PACKAGE_NAME, version=version("inferstack"))
