"""Cloud access for the programs that run on the server at boot: instance credentials, request signing, HTTP.

Standard library only (Python 3.8+), so it runs on any cloud image before anything is installed. Each cloud
reads its object storage and secret store with the instance's own identity, never with keys in user data:

| cloud   | identity (metadata server)                                  | object storage request signing      |
|---------|-------------------------------------------------------------|-------------------------------------|
| aws     | instance profile: IMDSv2 token, then iam/security-credentials | AWS Signature V4 (service s3)       |
| gcp     | service account: computeMetadata/v1/.../token (OAuth)        | OAuth bearer token (XML API)        |
| alibaba | RAM role: meta-data/ram/security-credentials (hardened mode) | OSS header signature (HMAC-SHA1)    |
| huawei  | agency: openstack/latest/securitykey                          | OBS header signature (HMAC-SHA1)    |

Temporary credentials carry a session token, sent in the cloud's header (x-amz-security-token,
x-oss-security-token, x-obs-security-token). Requests that fail for a transient reason (connection error,
HTTP 429/5xx) are retried with exponential backoff and jitter; other HTTP errors fail at once with the
server's message.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import http.client
import json
import random
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass

CLOUDS = ("aws", "gcp", "alibaba", "huawei")

# Bucket names as each cloud allows them. Storage hosts are built from a bucket that matches, never from text.
_NOT_AN_IP = r"(?![0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$)(?!.*\.\.)"
BUCKET_NAME_PATTERNS = {
    "aws": _NOT_AN_IP + r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
    "gcp": r"(?!goog)" + _NOT_AN_IP + r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$",
    "alibaba": r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$",
    "huawei": _NOT_AN_IP + r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
}

# Link-local metadata servers, as each cloud documents them.
METADATA_ENDPOINTS = {
    "aws": "http://169.254.169.254",
    "gcp": "http://metadata.google.internal",
    "alibaba": "http://100.100.100.200",
    "huawei": "http://169.254.169.254",
}
METADATA_TIMEOUT_S = 5
REQUEST_TIMEOUT_S = 60
RETRYABLE_STATUS = (429, 500, 502, 503, 504)


class AccessError(Exception):
    """A request failed for good (after retries, or with a non-retryable status). The message says which."""


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


def log(message: str) -> None:
    print(f"inferstack {message}", file=sys.stderr, flush=True)


#### HTTP with retries ####


def send(
    build: Callable[[], Request],
    *,
    attempts: int = 5,
    backoff_s: float = 1.0,
    what: str = "request",
) -> http.client.HTTPResponse:
    """Send the request `build()` makes (re-signed on every attempt) and return the open response.

    Transient failures are retried `attempts` times with exponential backoff (backoff_s, 2×, 4× … plus jitter).
    """
    last_error = ""
    for attempt in range(1, attempts + 1):
        request = build()
        try:
            raw = urllib.request.Request(request.url, data=request.body or None, headers=request.headers,
                                         method=request.method)
            response: http.client.HTTPResponse = urllib.request.urlopen(raw, timeout=REQUEST_TIMEOUT_S)
            return response
        except urllib.error.HTTPError as error:
            detail = _error_detail(error)
            if error.code not in RETRYABLE_STATUS:
                raise AccessError(f"{what} failed: HTTP {error.code} from {_host(request.url)}: {detail}") from None
            last_error = f"HTTP {error.code}: {detail}"
        except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
            reason = getattr(error, "reason", error)
            last_error = f"{type(error).__name__}: {reason}"
        if attempt < attempts:
            delay_s = backoff_s * 2 ** (attempt - 1) * (1 + random.random() / 2)
            log(f"retry {what}: attempt {attempt}/{attempts} failed ({last_error}); next in {delay_s:.1f}s")
            time.sleep(delay_s)
    raise AccessError(f"{what} failed after {attempts} attempts: {last_error} ({_host(build().url)})")


def _host(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc


def _error_detail(error: urllib.error.HTTPError) -> str:
    try:
        text = error.read(600).decode("utf-8", "replace")
    except OSError:
        text = ""
    return " ".join(text.split()) or str(error.reason)


def read_json(response: http.client.HTTPResponse) -> dict[str, object]:
    with response:
        data: dict[str, object] = json.loads(response.read().decode("utf-8"))
    return data


#### Instance credentials (metadata servers) ####


def instance_credentials(cloud: str, metadata_endpoint: str | None = None, attempts: int = 5) -> Credentials:
    """The instance identity's temporary credentials, read from the cloud's metadata server."""
    base = (metadata_endpoint or METADATA_ENDPOINTS[cloud]).rstrip("/")
    readers = {"aws": _aws_credentials, "gcp": _gcp_credentials, "alibaba": _alibaba_credentials,
               "huawei": _huawei_credentials}
    return readers[cloud](base, attempts)


def metadata_get(url: str, headers: Mapping[str, str], attempts: int, method: str = "GET") -> str:
    response = send(lambda: Request(method, url, dict(headers)), attempts=attempts, backoff_s=0.5,
                    what=f"metadata {method} {urllib.parse.urlsplit(url).path}")
    with response:
        return response.read().decode("utf-8").strip()


def _session_token_credentials(base: str, attempts: int, vendor: str, role_dir: str,
                               fields: tuple[str, str, str]) -> Credentials:
    # AWS IMDSv2 and Alibaba's hardened mode (which works whether or not the instance enforces it): a session
    # token, then the role's name, then its temporary keys under the fields named.
    token = metadata_get(f"{base}/latest/api/token", {f"X-{vendor}-metadata-token-ttl-seconds": "21600"},
                         attempts, method="PUT")
    headers = {f"X-{vendor}-metadata-token": token}
    roles_url = f"{base}/latest/meta-data/{role_dir}/security-credentials/"
    role = metadata_get(roles_url, headers, attempts).splitlines()[0]
    data = json.loads(metadata_get(roles_url + role, headers, attempts))
    key_id, secret, session_token = fields
    return Credentials(data[key_id], data[secret], data.get(session_token))


def _aws_credentials(base: str, attempts: int) -> Credentials:
    return _session_token_credentials(base, attempts, "aws-ec2", "iam", ("AccessKeyId", "SecretAccessKey", "Token"))


def _gcp_credentials(base: str, attempts: int) -> Credentials:
    url = f"{base}/computeMetadata/v1/instance/service-accounts/default/token"
    data = json.loads(metadata_get(url, {"Metadata-Flavor": "Google"}, attempts))
    return Credentials(bearer_token=data["access_token"])


def _alibaba_credentials(base: str, attempts: int) -> Credentials:
    return _session_token_credentials(base, attempts, "aliyun-ecs", "ram",
                                      ("AccessKeyId", "AccessKeySecret", "SecurityToken"))


def _huawei_credentials(base: str, attempts: int) -> Credentials:
    data = json.loads(metadata_get(f"{base}/openstack/latest/securitykey", {}, attempts))["credential"]
    return Credentials(data["access"], data["secret"], data.get("securitytoken"))


def gcp_project_id(metadata_endpoint: str | None = None, attempts: int = 5) -> str:
    base = (metadata_endpoint or METADATA_ENDPOINTS["gcp"]).rstrip("/")
    return metadata_get(f"{base}/computeMetadata/v1/project/project-id", {"Metadata-Flavor": "Google"}, attempts)


def huawei_project_id(metadata_endpoint: str | None = None, attempts: int = 5) -> str:
    base = (metadata_endpoint or METADATA_ENDPOINTS["huawei"]).rstrip("/")
    project: str = json.loads(metadata_get(f"{base}/openstack/latest/meta_data.json", {}, attempts))["project_id"]
    return project


#### Signing ####


def _quote(text: str, safe: str = "-_.~") -> str:
    return urllib.parse.quote(text, safe=safe)


def _sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hmac_sha256(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def _canonical_query(query: str) -> str:
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    return "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(pairs))


def _canonical_headers(headers: Mapping[str, str]) -> tuple[str, str]:
    lowered = {k.lower(): " ".join(v.strip().split()) for k, v in headers.items()}
    names = sorted(lowered)
    return "".join(f"{n}:{lowered[n]}\n" for n in names), ";".join(names)


def sign_aws_v4(request: Request, credentials: Credentials, region: str, service: str,
                now: datetime.datetime | None = None, payload_hash: str | None = None) -> Request:
    """AWS Signature Version 4 (header form), as documented in the AWS General Reference."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    parts = urllib.parse.urlsplit(request.url)
    payload_hash = payload_hash or _sha256_hex(request.body)
    headers = dict(request.headers)
    headers.update({"Host": parts.netloc, "X-Amz-Date": amz_date, "X-Amz-Content-SHA256": payload_hash})
    if credentials.session_token:
        headers["X-Amz-Security-Token"] = credentials.session_token
    canonical_headers, signed_headers = _canonical_headers(headers)
    canonical_request = "\n".join([
        request.method, _quote(parts.path or "/", safe="/-_.~"), _canonical_query(parts.query),
        canonical_headers, signed_headers, payload_hash])
    scope = f"{day}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, _sha256_hex(canonical_request.encode())])
    key = ("AWS4" + credentials.secret_key).encode()
    for part in (day, region, service, "aws4_request"):
        key = _hmac_sha256(key, part)
    signature = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
                                f"SignedHeaders={signed_headers}, Signature={signature}")
    headers.pop("Host")  # urllib sets Host itself, to the same value
    return Request(request.method, request.url, headers, request.body)


def sign_header_hmac_sha1(request: Request, credentials: Credentials, scheme: str, bucket: str, key: str,
                          now: datetime.datetime | None = None) -> Request:
    """OSS / OBS header signature: base64(HMAC-SHA1(SK, VERB\\nMD5\\nType\\nDate\\nx-<scheme>-headers/bucket/key)).

    `scheme` is "OSS" or "OBS"; both clouds document this same algorithm with their own header prefix.
    """
    now = now or datetime.datetime.now(datetime.timezone.utc)
    prefix = f"x-{scheme.lower()}-"
    headers = dict(request.headers)
    headers["Date"] = now.strftime("%a, %d %b %Y %H:%M:%S GMT")
    if credentials.session_token:
        headers[f"{prefix}security-token"] = credentials.session_token
    cloud_headers = sorted((k.lower(), v.strip()) for k, v in headers.items() if k.lower().startswith(prefix))
    canonical_headers = "".join(f"{k}:{v}\n" for k, v in cloud_headers)
    string_to_sign = "\n".join([
        request.method, headers.get("Content-MD5", ""), headers.get("Content-Type", ""), headers["Date"],
        canonical_headers + f"/{bucket}/{key}"])
    digest = hmac.new(credentials.secret_key.encode(), string_to_sign.encode(), hashlib.sha1).digest()
    headers["Authorization"] = f"{scheme} {credentials.access_key}:{base64.b64encode(digest).decode()}"
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
    parts = urllib.parse.urlsplit(request.url)
    headers = dict(request.headers)
    headers.update({"Host": parts.netloc, "X-Sdk-Date": now.strftime("%Y%m%dT%H%M%SZ")})
    if credentials.session_token:
        headers["X-Security-Token"] = credentials.session_token
    path = _quote(parts.path or "/", safe="/-_.~")
    canonical_headers, signed_headers = _canonical_headers(headers)
    canonical_request = "\n".join([
        request.method, path if path.endswith("/") else path + "/", _canonical_query(parts.query),
        canonical_headers, signed_headers, _sha256_hex(request.body)])
    string_to_sign = huawei_string_to_sign(headers["X-Sdk-Date"], canonical_request)
    signature = hmac.new(credentials.secret_key.encode(), string_to_sign.encode(), hashlib.sha256).hexdigest()
    headers["Authorization"] = (f"SDK-HMAC-SHA256 Access={credentials.access_key}, "
                                f"SignedHeaders={signed_headers}, Signature={signature}")
    headers.pop("Host")
    return Request(request.method, request.url, headers, request.body)


def huawei_string_to_sign(sdk_date: str, canonical_request: str) -> str:
    return "\n".join(["SDK-HMAC-SHA256", sdk_date, _sha256_hex(canonical_request.encode())])


class CredentialSource:
    """Instance credentials, re-read from the metadata server every few minutes (they expire; Huawei's in 15)."""

    REFRESH_S = 300

    def __init__(self, cloud: str, metadata_endpoint: str | None = None, attempts: int = 5) -> None:
        self.cloud, self.metadata_endpoint, self.attempts = cloud, metadata_endpoint, attempts
        self._lock = threading.Lock()
        self._cached: Credentials | None = None
        self._read_at = 0.0

    def get(self) -> Credentials:
        with self._lock:
            if self._cached is None or time.monotonic() - self._read_at > self.REFRESH_S:
                self._cached = instance_credentials(self.cloud, self.metadata_endpoint, self.attempts)
                self._read_at = time.monotonic()
            return self._cached


#### Object storage ####


@dataclass(frozen=True)
class ObjectStore:
    """Reads objects from one bucket with the instance identity (or the given credentials)."""

    cloud: str
    region: str
    bucket: str
    endpoint: str | None = None
    """Override, e.g. a private endpoint or a local S3-compatible server; addressed path-style."""
    metadata_endpoint: str | None = None
    attempts: int = 5
    backoff_s: float = 1.0

    def url(self, key: str) -> str:
        path = _quote(key, safe="/-_.~")
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
        if self.cloud == "gcp":
            request.headers["Authorization"] = f"Bearer {credentials.bearer_token}"
            return request
        scheme = {"alibaba": "OSS", "huawei": "OBS"}[self.cloud]
        return sign_header_hmac_sha1(request, credentials, scheme, self.bucket, key)

    def get(self, key: str, credentials: CredentialSource,
            byte_range: tuple[int, int] | None = None) -> http.client.HTTPResponse:
        where = f"{self.bucket}/{key}" + (f" bytes {byte_range[0]}-{byte_range[1]}" if byte_range else "")
        return send(lambda: self.signed_get(key, credentials.get(), byte_range), attempts=self.attempts,
                    backoff_s=self.backoff_s, what=f"GET {where}")


def split_ranges(size: int, part_size: int) -> list[tuple[int, int]]:
    """Inclusive byte ranges of at most `part_size` bytes covering `size` bytes."""
    return [(start, min(start + part_size, size) - 1) for start in range(0, size, part_size)]
