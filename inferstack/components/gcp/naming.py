"""Google Cloud's names and labels: resource names unique to the project, stack and component, and tags as labels."""

from __future__ import annotations

import re
from collections.abc import Mapping

import pulumi

from inferstack.names import unique_name


def gcp_name(*parts: str, max_length: int = 63) -> str:
    """A name unique to this project, stack and component, valid where GCP wants `[a-z]([-a-z0-9]*[a-z0-9])?`.

    Firewall rules, service accounts, secrets and load-balancer parts are named in the GCP project's global
    namespace, so the name carries the Pulumi project and stack (and a hash that keeps truncation unique).
    """
    every_part = [pulumi.get_project(), pulumi.get_stack(), *parts]
    name = unique_name(every_part, max_length=max_length)
    return name if name[0].isalpha() else "n-" + unique_name(every_part, max_length=max_length - 2)


def gcp_labels(tags: Mapping[str, str]) -> dict[str, str]:
    """Tags as GCP labels: lowercase letters, digits, '_' and '-', at most 63 characters, keys start with a letter."""
    def clean(text: str) -> str:
        return re.sub(r"[^a-z0-9_-]", "_", text.lower())[:63]

    labels = {}
    for key, value in tags.items():
        label = clean(key)
        labels[label if label[:1].isalpha() else clean(f"t_{label}")] = clean(value)
    return labels
