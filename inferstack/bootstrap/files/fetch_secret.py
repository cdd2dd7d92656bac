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

Exit status: 0 written, 2 usage or unusable value, 4 the store could not be read.
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
    AccessError,
    Credentials,
    Request,
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


def read_aws(name: str, endpoint: str, region: str, credentials: Credentials, metadata: str | None) -> str:
    body = json.dumps({"Name": name, "WithDecryption": True}).encode()
    headers = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "AmazonSSM.GetParameter"}
    response = send(lambda: sign_aws_v4(Request("POST", endpoint + "/", dict(headers), body), credentials, region,
                                        "ssm"), what=f"SSM GetParameter {name}")
    parameter = read_json(response)["Parameter"]
    assert isinstance(parameter, dict)
    return str(parameter["Value"])


def read_gcp(name: str, endpoint: str, region: str, credentials: Credentials, metadata: str | None) -> str:
    resource = name if name.startswith("projects/") else f"projects/{gcp_project_id(metadata)}/secrets/{name}"
    if "/versions/" not in resource:
        resource += "/versions/latest"
    url = f"{endpoint}/v1/{resource}:access"
    headers = {"Authorization": f"Bearer {credentials.bearer_token}"}
    payload = read_json(send(lambda: Request("GET", url, dict(headers)), what=f"Secret Manager access {resource}"))
    data = payload["payload"]
    assert isinstance(data, dict)
    return base64.b64decode(str(data["data"])).decode("utf-8")


def read_alibaba(name: str, endpoint: str, region: str, credentials: Credentials, metadata: str | None) -> str:
    def build() -> Request:
        params = {"Action": "GetSecretValue", "SecretName": name, "Version": "2016-01-20", "Format": "JSON"}
        query = urllib.parse.urlencode(sign_alibaba_rpc(params, credentials), quote_via=urllib.parse.quote)
        return Request("GET", f"{endpoint}/?{query}", {})

    return str(read_json(send(build, what=f"KMS GetSecretValue {name}"))["SecretData"])


def read_huawei(name: str, endpoint: str, region: str, credentials: Credentials, metadata: str | None) -> str:
    project_id = huawei_project_id(metadata)
    url = f"{endpoint}/v1/{project_id}/secrets/{urllib.parse.quote(name, safe='')}/versions/latest"
    response = send(lambda: sign_huawei_apig(Request("GET", url, {"Content-Type": "application/json"}), credentials),
                    what=f"CSMS ShowSecretVersion {name}")
    version = read_json(response)["version"]
    assert isinstance(version, dict)
    return str(version["secret_string"])


READERS: dict[str, Callable[[str, str, str, Credentials, str | None], str]] = {
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
    parser.add_argument("--secret", required=True, action="append", type=env_and_secret, metavar="ENV_NAME=SECRET",
                        help="environment variable the runtime reads, and the secret's name/id in the cloud's store "
                             "(repeatable)")
    parser.add_argument("--out", required=True, help="file to write (mode 0600, in a root-only directory)")
    parser.add_argument("--format", default="env", choices=sorted(FORMATS), help="env (NAME=value lines) or "
                        "nginx-bearer-map (the gateway's API-key map entries)")
    parser.add_argument("--endpoint", default=None, help="secret-store endpoint override")
    parser.add_argument("--metadata-endpoint", default=None, help="metadata-server override")
    args = parser.parse_args(argv)
    values: dict[str, str] = {}
    secret = args.secret[0][1]  # named in the error when even the instance credentials cannot be read
    try:
        credentials = instance_credentials(args.cloud, args.metadata_endpoint)
        endpoint = (args.endpoint or default_endpoint(args.cloud, args.region)).rstrip("/")
        for env_name, secret in args.secret:
            value = READERS[args.cloud](secret, endpoint, args.region, credentials, args.metadata_endpoint).strip()
            if not SAFE_VALUE.match(value):
                log(f"secret: {secret!r} is empty or holds characters other than [A-Za-z0-9._~+/=:@-]; "
                    "store it as a single-line token")
                return 2
            values[env_name] = value
    except (AccessError, KeyError, ValueError) as error:
        log(f"secret: cannot read {secret!r} from the {args.cloud} secret store: {error}")
        return 4
    write_secret_file(args.out, values, args.format)
    for env_name, secret in args.secret:
        log(f"secret: {secret!r} fetched ({len(values[env_name])} characters) into {args.out} as {env_name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
