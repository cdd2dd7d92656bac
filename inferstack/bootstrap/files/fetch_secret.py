#!/usr/bin/env python3
"""Fetch secrets (the endpoint API key, a model-hub token) from the cloud's secret store into a root-only env file.

Runs as the inference service's ExecStartPre, so each secret is read at every start (a rotated key takes effect
on restart) and never appears in user data, in the unit, on a command line or in a log. Secret stores:

| cloud   | store                         | call                                                        |
|---------|-------------------------------|-------------------------------------------------------------|
| aws     | SSM Parameter Store           | AmazonSSM.GetParameter, WithDecryption (SecureString)       |
| gcp     | Secret Manager                | projects/<project>/secrets/<id>/versions/latest:access      |
| alibaba | KMS Secrets Manager           | GetSecretValue (RPC API 2016-01-20)                         |
| huawei  | DEW / CSMS                    | GET /v1/<project_id>/secrets/<name>/versions/latest         |

Exit status: 0 written, 2 usage (an invalid region or secret name) or unusable value, 4 the store could not be
read or answered in another shape.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import sys
import urllib.parse
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cloud_access import (  # type: ignore[import-not-found,unused-ignore]  # the sibling file
    REGION_PATTERN,
    AccessError,
    Request,
    Retry,
    checked_name,
    field,
    gcp_project_id,
    huawei_project_id,
    instance_credentials,
    log,
    read_json,
    send,
    sign_alibaba_rpc,
    sign_aws_v4,
    sign_huawei_apig,
)

# A value written unquoted must mean the same to systemd, to `docker --env-file` and to a POSIX shell.
SAFE_VALUE = re.compile(r"^[A-Za-z0-9._~+/=:@-]+$")


def default_endpoint(cloud: str, region: str) -> str:
    return {
        "aws": f"https://ssm.{region}.amazonaws.com",
        "gcp": "https://secretmanager.googleapis.com",
        "alibaba": f"https://kms.{region}.aliyuncs.com",
        "huawei": f"https://kms.{region}.myhuaweicloud.com",
    }[cloud]


def read_aws(name: str, store: argparse.Namespace) -> str:
    body = json.dumps({"Name": name, "WithDecryption": True}).encode()
    headers = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "AmazonSSM.GetParameter"}
    reply = send(lambda: sign_aws_v4(Request("POST", store.endpoint + "/", dict(headers), body), store.credentials,
                                     store.region, "ssm"), read_json, retry=store.retry,
                 what=f"SSM GetParameter {name}")
    return str(field(reply, "Parameter", "Value"))


def read_gcp(name: str, store: argparse.Namespace) -> str:
    resource = name
    if not name.startswith("projects/"):
        resource = f"projects/{gcp_project_id(store.metadata_endpoint, store.retry)}/secrets/{name}"
    if "/versions/" not in resource:
        resource += "/versions/latest"
    url = f"{store.endpoint}/v1/{urllib.parse.quote(resource)}:access"  # "/" kept: a full name may be given
    headers = {"Authorization": f"Bearer {store.credentials.bearer_token}"}
    reply = send(lambda: Request("GET", url, dict(headers)), read_json, retry=store.retry,
                 what=f"Secret Manager access {resource}")
    return base64.b64decode(field(reply, "payload", "data"), validate=True).decode("utf-8")


def read_alibaba(name: str, store: argparse.Namespace) -> str:
    def build() -> Request:
        params = {"Action": "GetSecretValue", "SecretName": name, "Version": "2016-01-20", "Format": "JSON"}
        query = urllib.parse.urlencode(sign_alibaba_rpc(params, store.credentials), quote_via=urllib.parse.quote)
        return Request("GET", f"{store.endpoint}/?{query}", {})

    return str(field(send(build, read_json, retry=store.retry, what=f"KMS GetSecretValue {name}"), "SecretData"))


def read_huawei(name: str, store: argparse.Namespace) -> str:
    project_id = urllib.parse.quote(huawei_project_id(store.metadata_endpoint, store.retry), safe="")
    url = f"{store.endpoint}/v1/{project_id}/secrets/{urllib.parse.quote(name, safe='')}/versions/latest"
    reply = send(lambda: sign_huawei_apig(Request("GET", url, {"Content-Type": "application/json"}),
                                          store.credentials), read_json, retry=store.retry,
                 what=f"CSMS ShowSecretVersion {name}")
    return str(field(reply, "version", "secret_string"))


# Each reader gets the secret's name and the parsed arguments (endpoint, region, metadata_endpoint), to which main
# adds the instance's `credentials` and the `retry` policy.
READERS: dict[str, Callable[[str, argparse.Namespace], str]] = {
    "aws": read_aws, "gcp": read_gcp, "alibaba": read_alibaba, "huawei": read_huawei,
}


# How each --format writes the values: an environment file (systemd EnvironmentFile=), or the nginx `map` entries
# of the gateway, which lets a request through when its Authorization header is exactly "Bearer <key>" (a
# case-sensitive regular expression: nginx compares plain map strings ignoring case).
FORMATS = {
    "env": lambda name, value: f"{name}={value}\n",
    "nginx-bearer-map": lambda name, value: f'"~^Bearer {re.escape(value)}$" 1;\n',
}


def write_secret_file(path: str, values: dict[str, str], file_format: str = "env") -> None:
    """Write one line per entry, readable by root only, atomically (a reader never sees half a file)."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    temporary = f"{path}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.writelines(FORMATS[file_format](name, value) for name, value in values.items())
    os.chmod(temporary, 0o600)
    os.replace(temporary, path)


def env_and_secret(text: str) -> tuple[str, str]:
    """`ENV_NAME=secret-name` → (ENV_NAME, secret-name)."""
    name, _, secret = text.partition("=")
    if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name) or not secret:
        raise argparse.ArgumentTypeError(f"expected ENV_NAME=secret-name, got {text!r}")
    return name, secret


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fetch secrets into a root-only env file.")
    parser.add_argument("--cloud", required=True, choices=sorted(READERS))
    parser.add_argument("--region", required=True)
    parser.add_argument("--secret", required=True, action="append", type=env_and_secret, metavar="ENV_NAME=SECRET")
    parser.add_argument("--out", required=True)
    parser.add_argument("--format", default="env", choices=sorted(FORMATS))
    parser.add_argument("--endpoint")
    parser.add_argument("--metadata-endpoint")
    parser.add_argument("--auth-grace-s", type=float, default=300.0)
    args = parser.parse_args(argv)
    try:  # the region becomes part of the host name: checked before any request
        endpoint = args.endpoint or default_endpoint(args.cloud, checked_name("region", args.region, REGION_PATTERN))
    except AccessError as error:
        log(f"secret: {error}")
        return 2
    values: dict[str, str] = {}
    secret = args.secret[0][1]  # named in the error when even the instance credentials cannot be read
    args.endpoint, args.retry = endpoint.rstrip("/"), Retry(auth_grace_s=args.auth_grace_s)
    try:
        args.credentials = instance_credentials(args.cloud, args.metadata_endpoint, args.retry)
        for env_name, secret in args.secret:
            value = READERS[args.cloud](secret, args).strip()  # the arguments, with credentials and retry added
            if not SAFE_VALUE.match(value):
                log(f"secret: {secret!r} is empty or not a single-line token of [A-Za-z0-9._~+/=:@-]")
                return 2
            values[env_name] = value
    except (AccessError, ValueError) as error:  # base64 and UTF-8 decoding errors are ValueErrors
        log(f"secret: cannot read {secret!r} from the {args.cloud} secret store: {error}")
        return 4
    write_secret_file(args.out, values, args.format)
    for env_name, secret in args.secret:
        log(f"secret: {secret!r} fetched ({len(values[env_name])} characters) into {args.out} as {env_name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
