"""Cloud access for the programs that run on the server at boot: instance credentials, request signing, HTTP.

Standard library only (Python 3.8+), so it runs on any cloud image before anything is installed. Each cloud
reads its object storage and secret store with the instance's own identity, never with keys in user data:

| cloud   | identity (metadata server)                                  | object storage request signing      |
|---------|-------------------------------------------------------------|-------------------------------------|
| aws     | instance profile: IMDSv2 token, then iam/security-credentials | AWS Signature V4 (service s3)       |
| gcp     | service account: computeMetadata/v1/.../token (OAuth)        | OAuth bearer token (XML API)        |
| alibaba | RAM role: meta-data/ram/security-credentials (hardened mode) | OSS Signature V4 (OSS4-HMAC-SHA256) |
| huawei  | agency: openstack/latest/securitykey                          | OBS header signature (HMAC-SHA1)    |

Temporary credentials carry a session token, sent in the cloud's header (x-amz-security-token,
x-oss-security-token, x-obs-security-token). Every request goes through `send`, the one retry loop: transient
failures (connection error, a stream cut mid-way, HTTP 429/5xx) are retried with exponential backoff and jitter;
401/403 (and the metadata server's 404 for a role not attached yet) are retried only within `auth_grace_s`,
because a role or policy created with the server takes a minute or two to reach the cloud's authorisation
service; any other HTTP error fails at once with the server's message.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import hashlib
import hmac
import http.client
import json
import os
import random
import re
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

CLOUDS = ("aws", "gcp", "alibaba", "huawei")

# Link-local metadata servers, as each cloud documents them.
METADATA_ENDPOINTS = {
    "aws": "http://169.254.169.254",
    "gcp": "http://metadata.google.internal",
    "alibaba": "http://100.100.100.200",
    "huawei": "http://169.254.169.254",
}
REQUEST_TIMEOUT_S = 60
RETRYABLE_STATUS = (429, 500, 502, 503, 504)
AUTH_STATUS = (401, 403)
MAX_BACKOFF_S = 30.0

# Names that become part of a host name or URL, checked before any is built (the deploy side mirrors these;
# `re.fullmatch` them). Bucket rules as each cloud documents them: S3 general purpose buckets; Cloud Storage
# (up to 222 characters when dotted, never starting with "goog"); OSS; OBS. None may look like an IP address.
_NOT_IP = r"(?!\d{1,3}(\.\d{1,3}){3}$)"
BUCKET_NAME_PATTERNS = {
    "aws": rf"^{_NOT_IP}(?!.*\.\.)[a-z0-9][a-z0-9.-]{{1,61}}[a-z0-9]$",
    "gcp": rf"^{_NOT_IP}(?!goog)(?=[^.]{{3,63}}$|.*\.)[a-z0-9][a-z0-9_.-]{{1,220}}[a-z0-9]$",
    "alibaba": r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$",
    "huawei": rf"^{_NOT_IP}(?!.*(\.\.|\.-|-\.))[a-z0-9][a-z0-9.-]{{1,61}}[a-z0-9]$",
}
# Region ids of all four clouds: us-east-1, us-gov-west-1, europe-west4, cn-hangzhou, ap-southeast-3 …
REGION_PATTERN = r"^[a-z]{2,}(-[a-z0-9]+){1,4}$"

T = TypeVar("T")


class AccessError(Exception):
    """A request failed for good (after retries, or with a non-retryable status). The message says which; `status` is
    the HTTP status of a refusal (None for a failure without one)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Credentials:
    """Temporary credentials of the instance: an access key pair with a session token, or an OAuth token (GCP)."""

    access_key: str = ""
    secret_key: str = ""
    session_token: str | None = None
    bearer_token: str | None = None


@dataclass(frozen=True)
class Request:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes = b""


@dataclass(frozen=True)
class Retry:
    """How `send` retries: `attempts` tries on transient failures, the first `backoff_s` apart (doubling, at most
    MAX_BACKOFF_S); 401/403 for `auth_grace_s` after the first try (0: fail at once)."""

    attempts: int = 5
    backoff_s: float = 1.0
    auth_grace_s: float = 0.0


def log(message: str) -> None:
    print(f"inferstack {message}", file=sys.stderr, flush=True)


def checked_name(kind: str, value: str, pattern: str) -> str:
    """`value` when it matches `pattern` (a bucket or region name), else AccessError naming it."""
    if not re.fullmatch(pattern, value):
        raise AccessError(f"invalid {kind} name {value!r}: it must match {pattern}")
    return value


#### HTTP with retries ####


def send(build: Callable[[], Request], read: Callable[[http.client.HTTPResponse], T], *, retry: Retry = Retry(),
         what: str = "request", grace_status: tuple[int, ...] = AUTH_STATUS) -> T:
    """Send the request `build()` makes (re-signed on every try) and return `read(response)`.

    `read` runs inside the retry loop, so a response body cut short is fetched again like a refused connection.
    """
    started = time.monotonic()
    tries = failures = 0
    while True:
        tries += 1
        request = build()
        host = urllib.parse.urlsplit(request.url).netloc
        waiting = False
        try:
            with urllib.request.urlopen(urllib.request.Request(request.url, request.body or None, request.headers,
                                                               method=request.method), timeout=REQUEST_TIMEOUT_S) as r:
                result = read(r)
                if r.length:  # bytes short of Content-Length: http.client returns short when the connection drops
                    raise http.client.IncompleteRead(b"")
                return result
        except urllib.error.HTTPError as error:
            last_error = f"HTTP {error.code} from {host}: {_error_detail(error)}"
            waiting = error.code in grace_status and time.monotonic() - started < retry.auth_grace_s
            if not waiting and error.code not in RETRYABLE_STATUS:
                raise AccessError(f"{what} failed: {last_error}", status=error.code) from None
        except (OSError, http.client.HTTPException) as error:  # URLError is an OSError
            last_error = f"{error!r} ({host})"
        delay_s = min(retry.backoff_s * 2 ** (tries - 1), MAX_BACKOFF_S) * (1 + random.random() / 2)
        if waiting:  # no later than the end of the grace period, so that the last try falls inside it
            delay_s = min(delay_s, max(started + retry.auth_grace_s - time.monotonic(), 0.0))
        else:
            failures += 1
            if failures >= retry.attempts:
                raise AccessError(f"{what} failed after {failures} attempts: {last_error}")
        log(f"retry {what}: attempt {tries} failed ({last_error}); next in {delay_s:.1f}s")
        time.sleep(delay_s)


def _error_detail(error: urllib.error.HTTPError) -> str:
    try:
        text = error.read(600).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException):
        text = ""
    return " ".join(text.split()) or str(error.reason)


def read_text(response: http.client.HTTPResponse) -> str:
    return response.read().decode("utf-8").strip()


def read_json(response: http.client.HTTPResponse) -> object:
    try:
        return json.loads(response.read().decode("utf-8"))
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise AccessError(f"reply from {response.geturl()} is not JSON: {error}") from None


def field(document: object, *path: str) -> str:
    """The string at document[path[0]][path[1]]…; a reply of another shape is an AccessError, not a traceback."""
    for name in path:
        document = document.get(name) if isinstance(document, dict) else None
    if not isinstance(document, str):
        raise AccessError(f"unexpected reply: no string at {'.'.join(path)}")
    return document


#### Instance credentials (metadata servers) ####


def metadata_get(cloud: str, path: str, metadata_endpoint: str | None, retry: Retry,
                 read: Callable[[http.client.HTTPResponse], T], headers: Mapping[str, str] = {},
                 method: str = "GET") -> T:
    url = (metadata_endpoint or METADATA_ENDPOINTS[cloud]).rstrip("/") + path
    headers = {"Metadata-Flavor": "Google"} if cloud == "gcp" else headers
    # 404 joins the grace statuses: a role attached at launch appears in the metadata a little later.
    return send(lambda: Request(method, url, dict(headers)), read, retry=retry, what=f"metadata {method} {path}",
                grace_status=(*AUTH_STATUS, 404))


# Session tokens, as AWS IMDSv2 and Alibaba's hardened mode (which works whether or not the instance enforces it) take
# them: PUT /latest/api/token with the TTL header, then the token in a header of every read.
SESSION_VENDORS = {"aws": "aws-ec2", "alibaba": "aliyun-ecs"}
SESSION_TTL_S = 21600  # the longest both allow: six hours


def metadata_session(cloud: str, metadata_endpoint: str | None, retry: Retry,
                     ttl_s: int = SESSION_TTL_S) -> dict[str, str]:
    """The headers that carry a new metadata session token on `cloud` (AWS, Alibaba); none on GCP and Huawei."""
    vendor = SESSION_VENDORS.get(cloud)
    if vendor is None:
        return {}
    token = metadata_get(cloud, "/latest/api/token", metadata_endpoint, retry, read_text,
                         headers={f"X-{vendor}-metadata-token-ttl-seconds": str(ttl_s)}, method="PUT")
    return {f"X-{vendor}-metadata-token": token}


def instance_credentials(cloud: str, metadata_endpoint: str | None = None, retry: Retry = Retry()) -> Credentials:
    """The instance identity's temporary credentials, read from the cloud's metadata server."""

    def get(path: str, read: Callable[[http.client.HTTPResponse], T], **options: object) -> T:
        return metadata_get(cloud, path, metadata_endpoint, retry, read, **options)  # type: ignore[arg-type]

    if cloud == "gcp":
        token = get("/computeMetadata/v1/instance/service-accounts/default/token", read_json)
        return Credentials(bearer_token=field(token, "access_token"))
    if cloud == "huawei":
        data = get("/openstack/latest/securitykey", read_json)
        return Credentials(*(field(data, "credential", name) for name in ("access", "secret", "securitytoken")))
    # AWS IMDSv2 and Alibaba's hardened mode: a session token, then the role's name, then its temporary keys.
    role_dir, secret, token_field = (("iam", "SecretAccessKey", "Token") if cloud == "aws" else
                                     ("ram", "AccessKeySecret", "SecurityToken"))
    headers = metadata_session(cloud, metadata_endpoint, retry)
    roles = f"/latest/meta-data/{role_dir}/security-credentials/"
    role = (get(roles, read_text, headers=headers).splitlines() or [""])[0]
    data = get(roles + urllib.parse.quote(role, safe=""), read_json, headers=headers)
    return Credentials(field(data, "AccessKeyId"), field(data, secret), field(data, token_field))


def gcp_project_id(metadata_endpoint: str | None = None, retry: Retry = Retry()) -> str:
    return metadata_get("gcp", "/computeMetadata/v1/project/project-id", metadata_endpoint, retry, read_text)


def huawei_project_id(metadata_endpoint: str | None = None, retry: Retry = Retry()) -> str:
    return field(metadata_get("huawei", "/openstack/latest/meta_data.json", metadata_endpoint, retry, read_json),
                 "project_id")


#### Signing ####


def _quote(text: str, safe: str = "") -> str:
    return urllib.parse.quote(text, safe=safe)  # letters, digits and -_.~ are never quoted


def _sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hmac_sha256(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def _canonical_query(query: str) -> str:
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    return "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(pairs))


def _canonical_request(request: Request, added: dict[str, str], path: str, payload_hash: str
                       ) -> tuple[dict[str, str], str, str]:
    """What AWS SigV4 and Huawei's SDK-HMAC-SHA256 share: (the headers with `added`, canonical request, the signed
    header names). Every header is signed, Host included (urllib sets it itself, to the same value)."""
    parts = urllib.parse.urlsplit(request.url)
    headers = {**request.headers, "Host": parts.netloc, **added}
    lowered = {k.lower(): " ".join(v.strip().split()) for k, v in headers.items()}
    names = sorted(lowered)
    headers.pop("Host")
    signed = ";".join(names)
    return headers, "\n".join([request.method, path, _canonical_query(parts.query),
                               "".join(f"{n}:{lowered[n]}\n" for n in names), signed, payload_hash]), signed


def _v4_signature(algorithm: str, key: str, timestamp: str, scope: str, canonical_request: str) -> str:
    """AWS SigV4 and OSS V4 alike: the key is an HMAC chain over the scope's parts; it signs the request's hash."""
    string_to_sign = "\n".join([algorithm, timestamp, scope, _sha256_hex(canonical_request.encode())])
    derived = key.encode()
    for part in scope.split("/"):
        derived = _hmac_sha256(derived, part)
    return hmac.new(derived, string_to_sign.encode(), hashlib.sha256).hexdigest()


def sign_aws_v4(request: Request, credentials: Credentials, region: str, service: str,
                now: datetime.datetime | None = None) -> Request:
    """AWS Signature Version 4 (header form), as documented in the AWS General Reference."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    payload_hash = _sha256_hex(request.body)
    added = {"X-Amz-Date": amz_date, "X-Amz-Content-SHA256": payload_hash}
    if credentials.session_token:
        added["X-Amz-Security-Token"] = credentials.session_token
    # The URL's path is already URI-encoded once, which is S3's canonical URI; other services encode it again.
    path = urllib.parse.urlsplit(request.url).path or "/"
    headers, canonical_request, signed_headers = _canonical_request(
        request, added, path if service == "s3" else _quote(path, "/~"), payload_hash)
    scope = f"{amz_date[:8]}/{region}/{service}/aws4_request"
    signature = _v4_signature("AWS4-HMAC-SHA256", "AWS4" + credentials.secret_key, amz_date, scope, canonical_request)
    headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
                                f"SignedHeaders={signed_headers}, Signature={signature}")
    return Request(request.method, request.url, headers, request.body)


def sign_oss_v4(request: Request, credentials: Credentials, region: str, bucket: str, key: str,
                now: datetime.datetime | None = None) -> Request:
    """OSS Signature V4 (OSS4-HMAC-SHA256, header form; new buckets refuse V1 since 2025-09), for an object request.

    The canonical URI is /bucket/key whether the request goes to the bucket's host or path-style; `region` is the
    region id (cn-hangzhou, not oss-cn-hangzhou). Signed: the x-oss-* headers, Content-Type and Content-MD5.
    """
    now = now or datetime.datetime.now(datetime.timezone.utc)
    oss_date = now.strftime("%Y%m%dT%H%M%SZ")
    headers = dict(request.headers)
    headers.update({"x-oss-date": oss_date, "x-oss-content-sha256": "UNSIGNED-PAYLOAD"})
    if credentials.session_token:
        headers["x-oss-security-token"] = credentials.session_token
    signed = sorted((k.lower(), v) for k, v in headers.items()
                    if k.lower().startswith("x-oss-") or k.lower() in ("content-type", "content-md5"))
    canonical_request = "\n".join([
        request.method, _quote(f"/{bucket}/{key}", "/"), "", "".join(f"{k}:{v}\n" for k, v in signed), "",
        "UNSIGNED-PAYLOAD"])
    scope = f"{oss_date[:8]}/{region}/oss/aliyun_v4_request"
    signature = _v4_signature("OSS4-HMAC-SHA256", "aliyun_v4" + credentials.secret_key, oss_date, scope,
                              canonical_request)
    headers["Authorization"] = f"OSS4-HMAC-SHA256 Credential={credentials.access_key}/{scope},Signature={signature}"
    return Request(request.method, request.url, headers, request.body)


def sign_obs(request: Request, credentials: Credentials, bucket: str, key: str,
             now: datetime.datetime | None = None) -> Request:
    """OBS header signature: base64(HMAC-SHA1(SK, VERB\\nMD5\\nType\\nDate\\nx-obs-headers/bucket/encoded-key))."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    headers = dict(request.headers)
    headers["Date"] = now.strftime("%a, %d %b %Y %H:%M:%S GMT")
    if credentials.session_token:
        headers["x-obs-security-token"] = credentials.session_token
    obs_headers = sorted((k.lower(), v) for k, v in headers.items() if k.lower().startswith("x-obs-"))
    string_to_sign = "\n".join([
        request.method, headers.get("Content-MD5", ""), headers.get("Content-Type", ""), headers["Date"],
        "".join(f"{k}:{v}\n" for k, v in obs_headers) + f"/{bucket}/{_quote(key, '/~')}"])
    digest = hmac.new(credentials.secret_key.encode(), string_to_sign.encode(), hashlib.sha1).digest()
    headers["Authorization"] = f"OBS {credentials.access_key}:{base64.b64encode(digest).decode()}"
    return Request(request.method, request.url, headers, request.body)


def sign_alibaba_rpc(params: Mapping[str, str], credentials: Credentials, method: str = "GET",
                     nonce: str | None = None, now: datetime.datetime | None = None) -> dict[str, str]:
    """Alibaba Cloud RPC-style API signature (SignatureVersion 1.0, HMAC-SHA1); returns the signed parameters."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    signed = dict(params)
    signed.update({
        "AccessKeyId": credentials.access_key, "SignatureMethod": "HMAC-SHA1", "SignatureVersion": "1.0",
        "SignatureNonce": nonce or f"{random.getrandbits(64):016x}", "Timestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    })
    if credentials.session_token:
        signed["SecurityToken"] = credentials.session_token
    query = "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(signed.items()))
    string_to_sign = f"{method}&{_quote('/')}&{_quote(query)}"
    digest = hmac.new((credentials.secret_key + "&").encode(), string_to_sign.encode(), hashlib.sha1).digest()
    signed["Signature"] = base64.b64encode(digest).decode()
    return signed


def sign_huawei_apig(request: Request, credentials: Credentials,
                     now: datetime.datetime | None = None) -> Request:
    """Huawei Cloud API Gateway AK/SK signature (SDK-HMAC-SHA256), as in the Huawei API Request Signing Guide."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    added = {"X-Sdk-Date": now.strftime("%Y%m%dT%H%M%SZ")}
    if credentials.session_token:
        added["X-Security-Token"] = credentials.session_token
    # Each path segment URI-encoded once (the URL's path may be encoded already), and a trailing slash.
    path = _quote(urllib.parse.unquote(urllib.parse.urlsplit(request.url).path or "/"), "/~")
    path += "" if path.endswith("/") else "/"
    headers, canonical_request, signed_headers = _canonical_request(request, added, path, _sha256_hex(request.body))
    string_to_sign = huawei_string_to_sign(added["X-Sdk-Date"], canonical_request)
    signature = hmac.new(credentials.secret_key.encode(), string_to_sign.encode(), hashlib.sha256).hexdigest()
    headers["Authorization"] = (f"SDK-HMAC-SHA256 Access={credentials.access_key}, "
                                f"SignedHeaders={signed_headers}, Signature={signature}")
    return Request(request.method, request.url, headers, request.body)


def huawei_string_to_sign(sdk_date: str, canonical_request: str) -> str:
    return "\n".join(["SDK-HMAC-SHA256", sdk_date, _sha256_hex(canonical_request.encode())])


class CredentialSource:
    """Instance credentials, re-read from the metadata server every few minutes (they expire; Huawei's in 15)."""

    REFRESH_S = 300

    def __init__(self, cloud: str, metadata_endpoint: str | None = None, retry: Retry = Retry()) -> None:
        self.cloud, self.metadata_endpoint, self.retry = cloud, metadata_endpoint, retry
        self._lock = threading.Lock()
        self._cached: Credentials | None = None
        self._read_at = 0.0

    def get(self) -> Credentials:
        with self._lock:
            if self._cached is None or time.monotonic() - self._read_at > self.REFRESH_S:
                self._cached = instance_credentials(self.cloud, self.metadata_endpoint, self.retry)
                self._read_at = time.monotonic()
            return self._cached


#### Object storage ####


@dataclass(frozen=True)
class ObjectStore:
    """Reads objects from one bucket with the instance identity. Bucket and region are checked against the
    cloud's naming rules on creation (AccessError otherwise), so no other host can ever be addressed."""

    cloud: str
    region: str
    bucket: str
    endpoint: str | None = None
    """Override, e.g. a private endpoint or a local server; addressed path-style, signed as the cloud expects."""
    metadata_endpoint: str | None = None
    retry: Retry = Retry()

    def __post_init__(self) -> None:
        checked_name("bucket", self.bucket, BUCKET_NAME_PATTERNS[self.cloud])
        checked_name("region", self.region, REGION_PATTERN)

    def url(self, key: str) -> str:
        path = _quote(key, "/")  # the key URI-encoded once, "/" kept
        if self.endpoint:
            return f"{self.endpoint.rstrip('/')}/{self.bucket}/{path}"
        hosts = {
            "aws": f"{self.bucket}.s3.{self.region}.amazonaws.com",
            "gcp": f"storage.googleapis.com/{self.bucket}",
            # Internal (VPC) endpoints: no public traffic, no egress charge.
            "alibaba": f"{self.bucket}.oss-{self.region}-internal.aliyuncs.com",
            "huawei": f"{self.bucket}.obs.{self.region}.myhuaweicloud.com",
        }
        return f"https://{hosts[self.cloud]}/{path}"

    def signed_get(self, key: str, credentials: Credentials, byte_range: tuple[int, int] | None = None) -> Request:
        headers = {"Range": f"bytes={byte_range[0]}-{byte_range[1]}"} if byte_range else {}
        request = Request("GET", self.url(key), headers)
        if self.cloud == "aws":
            return sign_aws_v4(request, credentials, self.region, "s3")
        if self.cloud == "alibaba":
            return sign_oss_v4(request, credentials, self.region, self.bucket, key)
        if self.cloud == "huawei":
            return sign_obs(request, credentials, self.bucket, key)
        request.headers["Authorization"] = f"Bearer {credentials.bearer_token}"
        return request

    def get(self, key: str, credentials: CredentialSource, read: Callable[[http.client.HTTPResponse], T],
            byte_range: tuple[int, int] | None = None) -> T:
        """`read(response)` of the object (or of its inclusive byte range), retried as a whole by `send`."""
        return send(lambda: self.signed_get(key, credentials.get(), byte_range), read, retry=self.retry,
                    what=f"GET {self.bucket}/{key}{byte_range or ''}")


#### Alibaba Auto Scaling: a new server says it is ready ####

# A fleet's scaling group holds each server it starts in a lifecycle hook (Pending:Wait: out of the load balancer, not
# health-checked) until the server completes the hook's action, or the hook times out and releases it (components/
# alibaba.py). The boot's last step completes it with CONTINUE once the model answers (boot.sh). The requests are the
# ESS SDK's in its RPC mode (alibabacloud_ess20220222 1.13.3 Client.*_with_options over alibabacloud-tea-openapi's
# do_rpcrequest, read 2026-12-07): POST to /, every parameter, Format json and the signature (SignatureVersion 1.0)
# in the query string.
ESS_API_VERSION = "2022-02-22"
ESS_CENTRAL_REGIONS = frozenset({
    "cn-qingdao", "cn-beijing", "cn-hangzhou", "cn-shanghai", "cn-shenzhen", "cn-hongkong", "ap-southeast-1",
    "us-east-1", "us-west-1", "cn-shanghai-finance-1", "cn-shenzhen-finance-1", "cn-north-2-gov-1",
    "ap-northeast-2-pop", "cn-beijing-finance-pop", "cn-beijing-gov-1", "cn-beijing-nu16-b01", "cn-edge-1",
    "cn-fujian", "cn-haidian-cm12-c01", "cn-hangzhou-bj-b01", "cn-hangzhou-finance", "cn-hangzhou-internal-prod-1",
    "cn-hangzhou-internal-test-1", "cn-hangzhou-internal-test-2", "cn-hangzhou-internal-test-3",
    "cn-hangzhou-test-306", "cn-hongkong-finance-pop", "cn-huhehaote-nebula-1", "cn-qingdao-nebula",
    "cn-shanghai-et15-b01", "cn-shanghai-et2-b01", "cn-shanghai-inner", "cn-shanghai-internal-test-1",
    "cn-shenzhen-inner", "cn-shenzhen-st4-d01", "cn-shenzhen-su18-b01", "cn-wuhan", "cn-yushanfang", "cn-zhangbei",
    "cn-zhangbei-na61-b01", "cn-zhangjiakou-na62-a01", "cn-zhengzhou-nebula-1", "eu-west-1-oxs", "rus-west-1-pop",
    "cn-nanjing", "cn-beijing-finance-1"})
"""The regions whose ESS endpoint is the central ess.aliyuncs.com (the SDK's `_endpoint_map`); every other region's is
ess.<region>.aliyuncs.com (its "regional" endpoint rule)."""
PENDING_WAIT = "Pending:Wait"


def ess_endpoint(region: str) -> str:
    checked_name("region", region, REGION_PATTERN)
    return "https://ess.aliyuncs.com" if region in ESS_CENTRAL_REGIONS else f"https://ess.{region}.aliyuncs.com"


def ess_request(action: str, params: Mapping[str, str], credentials: Credentials, region: str,
                endpoint: str | None = None, nonce: str | None = None,
                now: datetime.datetime | None = None) -> Request:
    """One ESS API call as the SDK sends it; `params` flattened as the SDK flattens lists (InstanceIds.1, ...)."""
    signed = sign_alibaba_rpc({"Action": action, "Format": "json", "Version": ESS_API_VERSION, "RegionId": region,
                               **params}, credentials, method="POST", nonce=nonce, now=now)
    query = urllib.parse.urlencode(signed, quote_via=urllib.parse.quote)
    return Request("POST", f"{(endpoint or ess_endpoint(region)).rstrip('/')}/?{query}", {})


def alibaba_instance_id(metadata_endpoint: str | None = None, retry: Retry = Retry()) -> str:
    """This server's instance id, from the metadata server in hardened mode (a session token first)."""
    return metadata_get("alibaba", "/latest/meta-data/instance-id", metadata_endpoint, retry, read_text,
                        headers=metadata_session("alibaba", metadata_endpoint, retry, ttl_s=300))


def complete_lifecycle_action(region: str, instance_id: str, credentials: CredentialSource,
                              endpoint: str | None = None, retry: Retry = Retry()) -> str:
    """CONTINUE on this server's pending scale-out, if a lifecycle hook holds it: its scaling activity
    (DescribeScalingInstances), that activity's pending action of this instance, with the action's token and hook
    (DescribeLifecycleActions), then CompleteLifecycleAction. Returns what was done, in a sentence."""

    def call(action: str, params: Mapping[str, str]) -> object:
        return send(lambda: ess_request(action, params, credentials.get(), region, endpoint), read_json,
                    retry=retry, what=f"ESS {action}")

    try:
        found = call("DescribeScalingInstances", {"InstanceIds.1": instance_id})
    except AccessError as error:
        if error.status != 403:
            raise
        # Only a fleet's servers have the grant (components/alibaba/fleet.py): a single server is in no scaling group.
        return f"{instance_id} has no ESS grant (a server outside a scaling group): no lifecycle action to complete"
    instances = found.get("ScalingInstances") if isinstance(found, dict) else None
    mine = [i for i in instances or [] if isinstance(i, dict) and i.get("InstanceId") == instance_id]
    if not mine or mine[0].get("LifecycleState") != PENDING_WAIT:
        state = mine[0].get("LifecycleState") if mine else "in no scaling group"
        return f"{instance_id} is {state}: no lifecycle action to complete"
    activity = field(mine[0], "ScalingActivityId")
    listed = call("DescribeLifecycleActions", {"ScalingActivityId": activity, "LifecycleActionStatus": "Pending"})
    actions = listed.get("LifecycleActions") if isinstance(listed, dict) else None
    pending = [a for a in actions or [] if isinstance(a, dict) and instance_id in (a.get("InstanceIds") or [])]
    if not pending:
        raise AccessError(f"{instance_id} waits in a lifecycle hook, but activity {activity} lists no pending "
                          "action of it")
    for action in pending:  # one per hook of the group that holds the scale-out
        call("CompleteLifecycleAction", {"LifecycleHookId": field(action, "LifecycleHookId"),
                                         "LifecycleActionToken": field(action, "LifecycleActionToken"),
                                         "LifecycleActionResult": "CONTINUE"})
    hooks = ", ".join(field(action, "LifecycleHookId") for action in pending)
    return f"{instance_id} completed its scale-out (CONTINUE, hook {hooks})"


#### AWS Auto Scaling: a server of a group with a warm pool says it is prepared, or ready ####

# A group with a warm pool holds each new server in its launch hook (Warmed:Pending:Wait for the pool, Pending:Wait for
# service) until the server completes the hook's action (components/aws/fleet.py); boot.sh asks the target state
# first (prepare only for the pool), and completes the action once prepared or once the model answers
# (aws_query_request).
AWS_QUERY_API_VERSIONS = {"autoscaling": "2011-01-01", "sts": "2011-06-15"}
"""The Query-protocol APIs the server calls, by endpoint prefix and signing name, and their versions (botocore's
service models autoscaling 2011-01-01 and sts 2011-06-15)."""
AWS_WAIT_STATES = ("Pending:Wait", "Warmed:Pending:Wait")
"""The lifecycle states in which a launch hook holds a server (DescribeAutoScalingInstances LifecycleState)."""
HOOK_NAME_PATTERN = r"^[A-Za-z0-9_./-]{1,255}$"  # LifecycleHookName: [A-Za-z0-9\-_\/]+, at most 255
LIFECYCLE_AUTH_GRACE_S = 600.0
"""How long a refused call is retried: the grant names the group, so it is created just after the group, while its
first servers boot (components/aws/fleet.py _lifecycle_grant), and IAM takes a while to apply it everywhere."""


def aws_query_request(service: str, action: str, params: Mapping[str, str], credentials: Credentials, region: str,
                      endpoint: str | None = None, now: datetime.datetime | None = None) -> Request:
    """One call of an AWS Query-protocol API (Auto Scaling, STS) as botocore sends it: POST / to the service's endpoint
    in the region, Action, Version (AWS_QUERY_API_VERSIONS) and the parameters form-encoded in the body, SigV4 for
    the service."""
    url = endpoint or f"https://{service}.{checked_name('region', region, REGION_PATTERN)}.amazonaws.com"
    body = urllib.parse.urlencode({"Action": action, "Version": AWS_QUERY_API_VERSIONS[service], **params},
                                  quote_via=urllib.parse.quote).encode()
    request = Request("POST", f"{url.rstrip('/')}/",
                      {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}, body)
    return sign_aws_v4(request, credentials, region, service, now=now)


def read_xml(response: http.client.HTTPResponse) -> dict[str, str]:
    """The text of each element of a Query API reply, by its local name (the last one of a name wins)."""
    try:
        root = ElementTree.fromstring(response.read())
    except ElementTree.ParseError as error:
        raise AccessError(f"reply from {response.geturl()} is not XML: {error}") from None
    return {element.tag.rpartition("}")[2]: (element.text or "").strip() for element in root.iter()}


def aws_instance_metadata(name: str, metadata_endpoint: str | None = None, retry: Retry = Retry()) -> str:
    """An item of this server's IMDSv2 metadata (a session token first), e.g. instance-id."""
    return metadata_get("aws", f"/latest/meta-data/{name}", metadata_endpoint, retry, read_text,
                        headers=metadata_session("aws", metadata_endpoint, retry, ttl_s=300))


def aws_target_lifecycle_state(metadata_endpoint: str | None = None, retry: Retry = Retry()) -> str:
    """Where Auto Scaling is taking this server: InService, or Warmed:Stopped (Warmed:Running, Warmed:Hibernated) for
    one prepared for the warm pool (IMDS autoscaling/target-lifecycle-state); "" outside an Auto Scaling group (404)."""
    try:
        return aws_instance_metadata("autoscaling/target-lifecycle-state", metadata_endpoint, retry)
    except AccessError as error:
        if error.status == 404:
            return ""
        raise


def complete_aws_lifecycle_action(region: str, instance_id: str, hook: str, credentials: CredentialSource,
                                  endpoint: str | None = None, retry: Retry = Retry()) -> str:
    """CONTINUE on this server's launch hook `hook`, if the hook holds it: its group and state
    (DescribeAutoScalingInstances), then CompleteLifecycleAction by instance id. Returns what was done, in a
    sentence."""
    checked_name("lifecycle hook", hook, HOOK_NAME_PATTERN)

    def call(action: str, params: Mapping[str, str]) -> dict[str, str]:
        return send(lambda: aws_query_request("autoscaling", action, params, credentials.get(), region, endpoint),
                    read_xml,
                    retry=retry, what=f"Auto Scaling {action}")

    found = call("DescribeAutoScalingInstances", {"InstanceIds.member.1": instance_id})
    if found.get("InstanceId") != instance_id:
        return f"{instance_id} is in no Auto Scaling group: no lifecycle action to complete"
    group, state = found.get("AutoScalingGroupName", ""), found.get("LifecycleState", "")
    if state not in AWS_WAIT_STATES:
        return f"{instance_id} is {state}: no lifecycle action to complete"
    call("CompleteLifecycleAction", {"AutoScalingGroupName": group, "LifecycleHookName": hook,
                                     "InstanceId": instance_id, "LifecycleActionResult": "CONTINUE"})
    return f"{instance_id} completed its launch in {group} from {state} (CONTINUE, hook {hook})"


#### AWS STS: credentials of the runtime's own, for a runtime that streams the weights ####

# A runtime that streams the weights from S3 (vLLM's Run:ai Model Streamer) needs credentials, and never gets the
# instance's: the server assumes a role that may only read the model's prefix (components/aws/identity.py
# model_reader_statements) and hands its temporary credentials to the runtime's container in a root-only file, at
# each start of the runtime (render.py server_unit), asked of the region's own STS endpoint (aws_query_request).
# An IAM role's ARN: partition, 12-digit account, an optional path and the role's name (IAM User Guide, "IAM
# identifiers": names of up to 64 of [A-Za-z0-9+=,.@_-], paths of the same characters between slashes). Also checked
# by BootstrapOptions.model_reader_role, which imports it.
ROLE_ARN_PATTERN = r"^arn:aws(-cn|-us-gov)?:iam::[0-9]{12}:role/([A-Za-z0-9+=,.@_-]+/)*[A-Za-z0-9+=,.@_-]{1,64}$"
ROLE_SESSION_PATTERN = r"^[A-Za-z0-9+=,.@_-]{2,64}$"  # RoleSessionName: [\w+=,.@-]*, 2 to 64 characters
RUNTIME_SESSION_S = 3600
"""The runtime's credentials last an hour: the longest AWS allows a role assumed with a role's credentials (role
chaining), and longer than a load; each start of the runtime gets new ones."""
RUNTIME_AUTH_GRACE_S = 300.0
"""How long a refused AssumeRole is retried: the reader role and the grant to assume it are created with the stack,
and IAM takes a while to apply them everywhere."""
_CREDENTIAL_VALUE = re.compile(r"[A-Za-z0-9/+=]+")
"""Access key ids, secret keys and session tokens are base64 text: anything else (a line break above all) would add a
variable to the env file."""


def assume_role(region: str, role_arn: str, session_name: str, credentials: CredentialSource,
                endpoint: str | None = None, retry: Retry = Retry()) -> Credentials:
    """Temporary credentials of `role_arn` (RUNTIME_SESSION_S long), asked with the instance's own."""
    params = {"RoleArn": checked_name("role ARN", role_arn, ROLE_ARN_PATTERN),
              "RoleSessionName": checked_name("role session", session_name, ROLE_SESSION_PATTERN),
              "DurationSeconds": str(RUNTIME_SESSION_S)}
    answer = send(lambda: aws_query_request("sts", "AssumeRole", params, credentials.get(), region, endpoint),
                  read_xml, retry=retry, what="STS AssumeRole")
    assumed = Credentials(answer.get("AccessKeyId", ""), answer.get("SecretAccessKey", ""),
                          answer.get("SessionToken", ""))
    if not env_file_safe(assumed):
        raise AccessError(f"STS AssumeRole of {role_arn} answered without usable credentials")
    return assumed


def env_file_safe(credentials: Credentials) -> bool:
    """Whether each value fits one line of an env file (it could otherwise add a setting of its own)."""
    return all(_CREDENTIAL_VALUE.fullmatch(value) for value in (credentials.access_key, credentials.secret_key,
                                                                credentials.session_token or ""))


def write_runtime_env(path: str, credentials: Credentials, region: str) -> None:
    """The runtime's credentials as a `docker run --env-file` file: root's only (0600, in a 0700 directory under
    /run, a tmpfs), written whole under a new name and moved over the old one (a container that starts reads either
    the old file or the new one, never half of one)."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    values = {"AWS_ACCESS_KEY_ID": credentials.access_key, "AWS_SECRET_ACCESS_KEY": credentials.secret_key,
              "AWS_SESSION_TOKEN": credentials.session_token or "", "AWS_REGION": region,
              "AWS_DEFAULT_REGION": region}
    text = "".join(f"{name}={value}\n" for name, value in values.items())
    partial = f"{path}.{os.getpid()}.tmp"
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(text)
        os.replace(partial, path)
    except BaseException:
        if os.path.exists(partial):
            os.unlink(partial)
        raise


def runtime_credentials(region: str, role_arn: str, out: str, metadata_endpoint: str | None = None,
                        endpoint: str | None = None, retry: Retry = Retry()) -> str:
    """Assumes the model's reader role with the instance's credentials (IMDSv2) and writes the runtime's env file.
    Returns what was done, in a sentence (no credential in it)."""
    instance_id = aws_instance_metadata("instance-id", metadata_endpoint, retry)
    assumed = assume_role(region, role_arn, f"inferstack-runtime-{instance_id}",
                          CredentialSource("aws", metadata_endpoint, retry), endpoint, retry)
    write_runtime_env(out, assumed, region)
    return f"wrote credentials of {role_arn} for the runtime to {out} ({RUNTIME_SESSION_S} s)"


def main(argv: list[str] | None = None) -> int:
    """`cloud_access.py complete-lifecycle-action --region R [--cloud aws --hook H]`: the boot's last step on a server
    of an Alibaba fleet or of an AWS group with a warm pool; `cloud_access.py target-lifecycle-state`: where Auto
    Scaling takes this AWS server (boot.sh prepares only, for the warm pool, on Warmed:*); `cloud_access.py
    runtime-credentials --region R --role-arn ARN --out FILE`: a streaming runtime's own credentials (render.py, the
    runtime unit's ExecStartPre, as root; an image build's runtime start, with the build's own reader role)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("command", choices=["complete-lifecycle-action", "target-lifecycle-state",
                                            "runtime-credentials"])
    parser.add_argument("--cloud", choices=["alibaba", "aws"], default="alibaba")
    parser.add_argument("--region")
    parser.add_argument("--hook", help="the AWS launch hook's name")
    parser.add_argument("--role-arn", help="the role whose credentials the runtime gets")
    parser.add_argument("--out", help="where the runtime's credentials go (a docker --env-file)")
    parser.add_argument("--endpoint", help="ESS, Auto Scaling or STS endpoint override (a local server in tests)")
    parser.add_argument("--metadata-endpoint")
    args = parser.parse_args(argv)
    retry = Retry()
    try:
        if args.command == "target-lifecycle-state":
            print(aws_target_lifecycle_state(args.metadata_endpoint, retry))
        elif args.command == "runtime-credentials":
            if not args.region or not args.role_arn or not args.out:
                parser.error("runtime-credentials needs --region, --role-arn and --out")
            print(runtime_credentials(args.region, args.role_arn, args.out, args.metadata_endpoint, args.endpoint,
                                      Retry(auth_grace_s=RUNTIME_AUTH_GRACE_S)))
        elif args.cloud == "aws":
            if not args.region or not args.hook:
                parser.error("complete-lifecycle-action --cloud aws needs --region and --hook")
            instance_id = aws_instance_metadata("instance-id", args.metadata_endpoint, retry)
            credentials = CredentialSource("aws", args.metadata_endpoint, retry)
            print(complete_aws_lifecycle_action(args.region, instance_id, args.hook, credentials, args.endpoint,
                                                Retry(auth_grace_s=LIFECYCLE_AUTH_GRACE_S)))
        else:
            if not args.region:
                parser.error("complete-lifecycle-action needs --region")
            instance_id = alibaba_instance_id(args.metadata_endpoint, retry)
            credentials = CredentialSource("alibaba", args.metadata_endpoint, retry)
            print(complete_lifecycle_action(args.region, instance_id, credentials, args.endpoint, retry))
    except (AccessError, OSError) as error:
        print(f"inferstack {args.command}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
