"""What each optional extra brings, and the one-line error when a command needs one that is not installed.

`pip install inferstack` is the spec, the sizing and the CLI. Previewing or deploying on a cloud needs Pulumi and
that cloud's provider: one extra per cloud, named after it (`inferstack[aws]`), or `inferstack[all]`
(pyproject.toml's [project.optional-dependencies]; tests/test_extras.py checks the two agree).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass

from inferstack.clouds import CLOUD_FACTS
from inferstack.errors import MissingExtraError
from inferstack.spec import CLOUDS

PULUMI_MODULE = "pulumi"


@dataclass(frozen=True)
class CloudExtra:
    """The extra that deploys on one cloud: Pulumi and the cloud's provider package."""

    extra: str
    provider_module: str
    """The provider's Python module (its pip package is the same with `-` for `_`)."""
    provider_name: str


CLOUD_EXTRAS: Mapping[str, CloudExtra] = {  # named after its cloud; the provider is the cloud's registry entry's
    facts.id: CloudExtra(facts.id, facts.provider_module, f"the {facts.display_name} provider")
    for facts in CLOUD_FACTS.values()
}
ALL_CLOUDS_EXTRA = "all"


def require_pulumi(needed_by: str) -> None:
    """Raise MissingExtraError, naming the cloud extras, unless the Pulumi SDK imports."""
    if not _imports(PULUMI_MODULE):
        raise MissingExtraError(needed_by, "Pulumi and a cloud's provider", PULUMI_MODULE,
                                [CLOUD_EXTRAS[cloud].extra for cloud in CLOUDS] + [ALL_CLOUDS_EXTRA])


def require_cloud(cloud: str, needed_by: str) -> None:
    """Raise MissingExtraError, naming `cloud`'s extra, unless Pulumi and that cloud's provider import."""
    extra = CLOUD_EXTRAS[cloud]
    for module in (PULUMI_MODULE, extra.provider_module):
        if not _imports(module):
            raise MissingExtraError(needed_by, f"Pulumi and {extra.provider_name}", module, [extra.extra])


def _imports(module: str) -> bool:
    """True when `module` imports; False when it (not one of its own imports) is missing."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name != module:  # installed, but broken: that error is the one to show
            raise
        return False
    return True
