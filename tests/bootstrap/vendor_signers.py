"""The clouds' own SDK signers, as the reference the boot programs' signatures are checked against.

Each function recomputes, with the vendor's SDK, the signature a request must carry, from what is on the wire:
method, URL (path as sent, percent-encoded), headers as sent, body. The loopback fakes call them on every request
they receive (and answer 403 on a mismatch, as the cloud would); the signer tests call them on the requests
`cloud_access` builds.

| cloud   | request                  | reference                                                            |
|---------|--------------------------|----------------------------------------------------------------------|
| aws     | S3 GET, SSM POST         | botocore.auth.S3SigV4Auth / SigV4Auth                                |
| alibaba | OSS GET (V4)             | alibabacloud_oss_v2.signer.v4.SignerV4                               |
| alibaba | KMS GetSecretValue (RPC) | alibabacloud_tea_openapi.utils.Utils.get_rpcsignature                |
| alibaba | ESS lifecycle calls (RPC)| alibabacloud_tea_openapi.client.Client, as alibabacloud_ess20220222 calls it |
| huawei  | OBS GET                  | obs.auth.Authentication (esdk-obs-python, the OBS header signature)   |
| huawei  | CSMS GET (API Gateway)   | huaweicloudsdkcore.signer.signer.Signer (SDK-HMAC-SHA256)            |
| huawei  | Cloud Eye metric-data POST | huaweicloudsdkcore BasicCredentials.sign_request (token, project id) |
"""

from __future__ import annotations

import contextlib
import datetime
import urllib.parse
from collections.abc import Mapping
from typing import Any
from unittest import mock

from bootstrap_fakes import ACCESS_KEY, SECRET_KEY, SESSION_TOKEN


def without_authorization(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() != "authorization"}


def aws_authorization(method: str, url: str, headers: Mapping[str, str], body: bytes, service: str,
                      region: str) -> str:
    """botocore's Authorization for the request, signed at the request's own X-Amz-Date (add_auth, minus the clock)."""
    from botocore.auth import S3SigV4Auth, SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(method=method, url=url, headers=without_authorization(headers), data=body)
    request.context["timestamp"] = _header(headers, "X-Amz-Date")
    auth = (S3SigV4Auth if service == "s3" else SigV4Auth)(Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN),
                                                           service, region)
    auth._modify_request_before_signing(request)
    canonical_request = auth.canonical_request(request)
    signature = auth.signature(auth.string_to_sign(request, canonical_request), request)
    auth._inject_signature_to_request(request, signature)
    return str(request.headers["Authorization"])


def oss_v4_authorization(method: str, url: str, headers: Mapping[str, str], region: str, bucket: str,
                         key: str) -> str:
    """alibabacloud-oss-v2's SignerV4 Authorization (header form), signed at the request's x-oss-date."""
    from alibabacloud_oss_v2.signer.v4 import SignerV4
    from alibabacloud_oss_v2.types import Credentials, HttpRequest, SigningContext

    request = HttpRequest(method, url, without_authorization(headers))
    signed_at = datetime.datetime.strptime(_header(headers, "x-oss-date"), "%Y%m%dT%H%M%SZ")
    context = SigningContext(product="oss", region=region, bucket=bucket, key=key, request=request,
                             credentials=Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN),
                             signing_time=signed_at.replace(tzinfo=datetime.timezone.utc))
    SignerV4().sign(context)
    return str(request.headers["Authorization"])


def obs_authorization(method: str, headers: Mapping[str, str], bucket: str, key: str) -> str:
    """esdk-obs-python's OBS header signature for an object request (Authentication.doAuth, as ObsClient calls it)."""
    from obs.auth import Authentication
    from obs.convertor import Adapter

    auth = Authentication(ACCESS_KEY, SECRET_KEY, False, Adapter("obs"), f"{bucket}.obs.example", False)
    return str(auth.doAuth(method, bucket, key, {}, without_authorization(headers))["Authorization"])


def apig_authorization(method: str, url: str, headers: Mapping[str, str], body: bytes) -> str:
    """huaweicloudsdkcore's SDK-HMAC-SHA256 Authorization, signed at the request's X-Sdk-Date."""
    from huaweicloudsdkcore.auth.credentials import BasicCredentials
    from huaweicloudsdkcore.sdk_request import SdkRequest
    from huaweicloudsdkcore.signer.signer import Signer

    parts = urllib.parse.urlsplit(url)
    header_params = without_authorization(headers)
    if not any(k.lower() == "host" for k in header_params):
        header_params["Host"] = parts.netloc
    request = SdkRequest(method=method, schema=parts.scheme, host=parts.netloc, resource_path=parts.path,
                         query_params=urllib.parse.parse_qsl(parts.query, keep_blank_values=True),
                         header_params=header_params, body=body or None)
    Signer(BasicCredentials(ACCESS_KEY, SECRET_KEY)).sign(request)
    return str(request.header_params["Authorization"])


def apig_sdk_signed_headers(method: str, url: str, content_type: str, sdk_date: str, body: bytes,
                            project_id: str) -> dict[str, str]:
    """The headers huaweicloudsdkcore signs onto a regional service's request with an agency's temporary keys
    (BasicCredentials(ak, sk, project_id).with_security_token(token).sign_request: it adds X-Project-Id and
    X-Security-Token itself, then signs), given the request's Content-Type and its X-Sdk-Date; names lowercase."""
    from huaweicloudsdkcore.auth.credentials import BasicCredentials
    from huaweicloudsdkcore.sdk_request import SdkRequest

    parts = urllib.parse.urlsplit(url)
    request = SdkRequest(method=method, schema=parts.scheme, host=parts.netloc, resource_path=parts.path,
                         query_params=urllib.parse.parse_qsl(parts.query, keep_blank_values=True),
                         header_params={"Content-Type": content_type, "X-Sdk-Date": sdk_date}, body=body or None)
    credentials = BasicCredentials(ACCESS_KEY, SECRET_KEY, project_id).with_security_token(SESSION_TOKEN)
    signed = credentials.sign_request(request)
    return {k.lower(): str(v) for k, v in signed.header_params.items()}


def alibaba_rpc_signature(params: Mapping[str, str], method: str = "GET") -> str:
    """The Alibaba Cloud SDK's RPC signature (alibabacloud-tea-openapi) of the parameters, Signature excluded."""
    from alibabacloud_tea_openapi.utils import Utils

    unsigned = {k: v for k, v in params.items() if k != "Signature"}
    return str(Utils.get_rpcsignature(unsigned, method, SECRET_KEY))


class _Sent(Exception):
    """The request was captured: nothing leaves the machine."""


def alibaba_sdk_rpc_request(action: str, version: str, query: Mapping[str, object], region: str,
                            endpoint: str) -> Any:
    """The request Alibaba's SDK sends for an RPC action, captured before it leaves: alibabacloud-tea-openapi's client
    in its signature V1 mode (Config signature_algorithm "v2", do_rpcrequest), given the action as a product SDK gives
    it (alibabacloud_ess20220222 1.13.3 Client.*_with_options: Params protocol HTTPS, method POST, pathname /, style
    RPC, form body, JSON reply; the query flattened by Utils.query)."""
    from alibabacloud_tea_openapi import models
    from alibabacloud_tea_openapi.client import Client
    from alibabacloud_tea_openapi.utils import Utils
    from darabonba.core import DaraCore
    from darabonba.runtime import RuntimeOptions

    sent = []

    def capture(request: Any, *_: object, **__: object) -> None:
        sent.append(request)
        raise _Sent

    client = Client(models.Config(access_key_id=ACCESS_KEY, access_key_secret=SECRET_KEY,
                                  security_token=SESSION_TOKEN, region_id=region, endpoint=endpoint,
                                  signature_algorithm="v2"))
    params = models.Params(action=action, version=version, protocol="HTTPS", pathname="/", method="POST",
                           auth_type="AK", style="RPC", req_body_type="formData", body_type="json")
    # The client wraps the capture's exception in its retry error.
    with mock.patch.object(DaraCore, "do_action", capture), contextlib.suppress(Exception):
        client.call_api(params, models.OpenApiRequest(query=Utils.query(dict(query))), RuntimeOptions())
    return sent[0]


def _header(headers: Mapping[str, str], name: str) -> str:
    return next((v for k, v in headers.items() if k.lower() == name.lower()), "")
