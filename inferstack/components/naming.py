"""How every resource is named, tagged and registered, the same on every cloud.

Every child of a component is named `f"{name}-<role>"` after it and parented to it (`child_options`); a globally
unique resource (a bucket) gets a readable name with a short hash (`inferstack.names.unique_name`); servers and
fleets get the protection and replacement order of `server_options` and `fleet_options`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

MANAGED_BY = "inferstack"


def resource_tags(given: Mapping[str, str], workload: str | None = None) -> dict[str, str]:
    """Tags every resource carries (project, stack, managed-by, and the workload where there is one), with a
    component's `tags` argument (`given`) merged over them."""
    tags = {"project": pulumi.get_project(), "stack": pulumi.get_stack(), "managed-by": MANAGED_BY}
    if workload:
        tags["workload"] = workload
    return {**tags, **given}


def child_options(parent: pulumi.Resource, **options: Any) -> pulumi.ResourceOptions:
    """Options for a child: parented, so it inherits providers and protection from the component."""
    return pulumi.ResourceOptions(parent=parent, **options)


def server_options(parent: pulumi.Resource, protected: bool, **options: Any) -> pulumi.ResourceOptions:
    """Options for a server, the same on every cloud.

    A protected server carries Pulumi's `protect`: the engine refuses to replace or delete it while it plans the
    steps, before anything is created. The cloud's deletion flag alone fails only at the delete, which a replacement
    runs after creating the successor: both servers would keep running and billing. Unprotected, `protect` is left
    unset, so protection given to the component still reaches the server.

    Servers are replaced delete-first. A server whose cloud flag is still on (protection lifted in the same
    `pulumi up` as the change) then fails its delete before a successor exists, and a replaced server's GPU quota
    is free for the new one. Each server is down until its successor has booted, as it would be anyway: the
    successor has new addresses, and it serves only once its model is loaded.
    """
    return child_options(parent, protect=True if protected else None, delete_before_replace=True, **options)


def fleet_options(parent: pulumi.Resource, protected: bool, **options: Any) -> pulumi.ResourceOptions:
    """Options for a fleet's group and what it cannot serve without (template, load balancer, listeners): Pulumi's
    `protect` as `server_options` gives it, but replaced create-first, so the fleet keeps serving meanwhile."""
    return child_options(parent, protect=True if protected else None, **options)


def invoke_options(parent: pulumi.Resource) -> pulumi.InvokeOutputOptions:
    """Lookups run with the component's provider (a region or account chosen by the caller)."""
    return pulumi.InvokeOutputOptions(parent=parent)
