"""The settings of Alibaba's own stack-config namespace (`inferstack-alibaba:`), for values with no cloud-neutral
meaning: `kmsInstanceId` + `kmsKeyId`, because KMS 3.0 keeps secrets in a KMS instance you buy, and
`assetsDnsReady`, because Alibaba issues the CDN's free certificate only once the domain's CNAME points at the CDN.

The backend checks them with the component arguments, before anything is created (`AlibabaBackend.settings_problem`,
in __init__.py); the build steps read them as checked. Each is read at each call: each program run has its own config.
"""

from __future__ import annotations

import re
from typing import cast

import pulumi

from inferstack.errors import Problem

CONFIG_NAMESPACE = "inferstack-alibaba"
KMS_INSTANCE_KEY = "kmsInstanceId"
KMS_KEY_KEY = "kmsKeyId"
DNS_READY_KEY = "assetsDnsReady"
# KMS ids, as the KMS API writes them: kst-bjj62f5ba3dnpb6v8****, key-bjj62f5ba3dnpb6v8****.
KMS_ID_PATTERNS = {KMS_INSTANCE_KEY: r"kst-[a-z0-9]+", KMS_KEY_KEY: r"key-[a-z0-9]+"}

#### KMS: where the secrets are kept ####


def kms_settings() -> dict[str, str | None]:
    """The `inferstack-alibaba:` KMS settings by key (read at each call: each program run has its own config)."""
    config = pulumi.Config(CONFIG_NAMESPACE)
    return {key: (config.get(key) or "").strip() or None for key in KMS_ID_PATTERNS}


def kms_problem(field: str) -> Problem | None:
    """What keeps the secrets from the KMS instance: a missing or malformed id (`field` asked for the secrets)."""
    settings = kms_settings()
    missing = [f"{CONFIG_NAMESPACE}:{key}" for key, value in settings.items() if not value]
    if missing:
        return Problem(field, f"needs {' and '.join(missing)}: KMS 3.0 keeps secrets in a KMS instance you buy, "
                       "encrypted with a symmetric key of that instance",
                       fix=f"pulumi config set {CONFIG_NAMESPACE}:{KMS_INSTANCE_KEY} kst-... and "
                       f"pulumi config set {CONFIG_NAMESPACE}:{KMS_KEY_KEY} key-... (KMS console), or leave the "
                       "secrets out")
    for key, pattern in KMS_ID_PATTERNS.items():
        value = settings[key]
        if value is not None and not re.fullmatch(pattern, value):
            return Problem(f"{CONFIG_NAMESPACE}:{key}", "is not a KMS id", value=value,
                           fix=f"copy the id from the KMS console ({pattern.split('-')[0]}-...)")
    return None


def kms_instance() -> tuple[str, str]:
    """The KMS instance and key, as `kms_problem` found them before anything was created."""
    settings = kms_settings()
    return cast(str, settings[KMS_INSTANCE_KEY]), cast(str, settings[KMS_KEY_KEY])


#### The CDN's certificate ####


def assets_dns_ready() -> bool:
    """`inferstack-alibaba:assetsDnsReady`: the assets domain's CNAME points at the CDN (default false)."""
    value = (pulumi.Config(CONFIG_NAMESPACE).get(DNS_READY_KEY) or "false").strip().lower()
    return value == "true"


def dns_ready_problem() -> Problem | None:
    value = pulumi.Config(CONFIG_NAMESPACE).get(DNS_READY_KEY)
    if value is None or value.strip().lower() in ("true", "false"):
        return None
    return Problem(f"{CONFIG_NAMESPACE}:{DNS_READY_KEY}", "is not true or false", value=value,
                   fix=f"pulumi config set {CONFIG_NAMESPACE}:{DNS_READY_KEY} true, once the assets domain's CNAME "
                   "points at the CDN")
