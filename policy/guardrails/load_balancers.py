"""Load balancers, resource by resource: they listen with HTTPS (TLS 1.2 or newer) and with plain HTTP only to
redirect, and they forward to a serving port and check its health there. How the parts hold up together is
`fleet`'s stack rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from guardrails.core import ReportViolation, ResourceInput, ResourceRule, integer, items, show
from guardrails.networks import (
    ALL_PORTS,
    HTTPS_PORT,
    LISTENER_PORTS,
    REDIRECT_PORT,
    SERVING_PORTS_SCHEMA,
    Span,
    port_texts,
    serving_ports,
)
from guardrails.resource_types import (
    ALI_GROUP_ATTACHMENT,
    ALI_LISTENER,
    ALI_SCALING_GROUP,
    ALI_SERVER_GROUP,
    ALI_TLS_POLICY,
    AWS_LISTENERS,
    AWS_TARGET_GROUPS,
    GCP_BACKEND_SERVICES,
    GCP_FORWARDING_RULES,
    GCP_HEALTH_CHECKS,
    GCP_LEGACY_HEALTH_CHECKS,
    GCP_REGION_GROUP_MANAGER,
    GCP_SSL_POLICIES,
    GCP_ZONE_GROUP_MANAGER,
    HW_AS_GROUP,
    HW_LISTENER,
    HW_MONITOR,
    HW_TLS_POLICY,
    UNREAD_LISTENER_TYPES,
)

#### Fleets: the load balancer listens with HTTPS (TLS 1.2 or newer) and redirects plain HTTP ####

# ELB security policies admitting TLS 1.2 or newer only, by AWS's naming (docs.aws.amazon.com, "Security policies
# for your Application Load Balancer"): ELBSecurityPolicy-TLS13-1-2-2021-06 (and its -Res, -Ext1, -Ext2, -FIPS,
# -PQ variants), -TLS13-1-3-*, -TLS-1-2-2017-01, -TLS-1-2-Ext-2018-06, -FS-1-2-*. ELBSecurityPolicy-2016-08 (the
# API's default), -TLS13-1-0-*, -TLS13-1-1-*, -TLS-1-1-*, -FS-2018-06 and -FS-1-1-* admit older TLS.
AWS_TLS12_POLICY = re.compile(r"ELBSecurityPolicy-(TLS13|TLS|FS)-1-[23](-[A-Za-z0-9]+)*")
AWS_DEFAULT_TLS_POLICY = "ELBSecurityPolicy-2016-08"
# Alibaba ALB's system TLS policies (alibabacloud.com, "TLS security policies"); the default is tls_cipher_policy_1_0.
ALI_TLS12_POLICIES = {"tls_cipher_policy_1_2", "tls_cipher_policy_1_2_strict", "tls_cipher_policy_1_2_strict_with_1_3"}
ALI_SYSTEM_POLICY_PREFIX = "tls_cipher_policy_"
# Huawei dedicated ELB's TLS policies (pulumi_huaweicloud DedicatedElb.Listener.tls_ciphers_policy, and
# support.huaweicloud.com "TLS Security Policy"); the default is tls-1-0.
HW_TLS12_POLICIES = {"tls-1-2", "tls-1-2-strict", "tls-1-2-fs", "tls-1-2-fs-with-1-3", "tls-1-2-strict-no-cbc"}
GCP_TLS12_VERSIONS = {"TLS_1_2", "TLS_1_3"}
TLS12_PROTOCOLS = {"TLSv1.2", "TLSv1.3"}
LISTENER_FIX = (f"a load balancer listens with HTTPS on {HTTPS_PORT} (TLS 1.2 or newer) and with HTTP on "
                f"{REDIRECT_PORT} only to redirect to HTTPS")


def _listener_port(protocol: str, port: Any, report_violation: ReportViolation) -> None:
    wanted = HTTPS_PORT if protocol == "HTTPS" else REDIRECT_PORT
    if integer(port) != wanted:
        report_violation(f"the {protocol} listener is on port {show(port) if port is not None else 'unset'}: "
                         f"{LISTENER_FIX}")


def _other_protocol(protocol: str, report_violation: ReportViolation) -> None:
    report_violation(f"the listener's protocol is {protocol or 'unset'}: {LISTENER_FIX}")


def aws_redirects_to_https(action: Any) -> bool:
    return (isinstance(action, Mapping) and str(action.get("type")).lower() == "redirect"
            and str((action.get("redirect") or {}).get("protocol")).upper() == "HTTPS")


def _aws_listener(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    protocol = str(props.get("protocol") or "HTTP").upper()  # an ALB listener's default protocol is HTTP
    if protocol not in ("HTTPS", "HTTP"):
        _other_protocol(protocol, report_violation)
        return
    _listener_port(protocol, props.get("port"), report_violation)
    if protocol == "HTTPS":
        policy = props.get("sslPolicy")
        if not AWS_TLS12_POLICY.fullmatch(str(policy or "")):
            shown = policy or f"unset (the API's default, {AWS_DEFAULT_TLS_POLICY})"
            report_violation(f"the HTTPS listener's TLS policy is {shown}, which the pack does not know to refuse "
                             "TLS before 1.2: set sslPolicy to ELBSecurityPolicy-TLS13-1-2-2021-06 (or another "
                             "ELBSecurityPolicy-TLS13-1-2-*, -TLS13-1-3-*, -TLS-1-2-* or -FS-1-2-* policy)")
        return
    actions = items(props.get("defaultActions"))
    if not actions or not all(aws_redirects_to_https(action) for action in actions):
        kinds = ", ".join(sorted({str((a or {}).get("type")) for a in actions})) or "none"
        report_violation(f"the HTTP listener's default actions ({kinds}) do not only redirect to HTTPS, so plain "
                         "HTTP reaches the servers: give it one redirect action with protocol HTTPS")


def _alibaba_listener(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    protocol = str(props.get("listenerProtocol") or "").upper()
    if protocol not in ("HTTPS", "HTTP"):
        _other_protocol(protocol, report_violation)
        return
    _listener_port(protocol, props.get("listenerPort"), report_violation)
    policy = str(props.get("securityPolicyId") or "")
    if protocol == "HTTPS" and (not policy or policy.startswith(ALI_SYSTEM_POLICY_PREFIX)) and (
            policy not in ALI_TLS12_POLICIES):
        shown = policy or "unset (ALB's default, tls_cipher_policy_1_0)"
        report_violation(f"the HTTPS listener's TLS policy is {shown}, which admits TLS before 1.2: set "
                         "securityPolicyId to tls_cipher_policy_1_2 (or _1_2_strict, _1_2_strict_with_1_3, or a "
                         "custom alb.SecurityPolicy of TLSv1.2 and TLSv1.3)")
    # A custom policy (an id) is read where it is defined: load-balancer-https-front-ends.


def _huawei_listener(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    protocol = str(props.get("protocol") or "").upper()
    if protocol not in ("HTTPS", "HTTP"):
        _other_protocol(protocol, report_violation)
        return
    _listener_port(protocol, props.get("protocolPort"), report_violation)
    if protocol == "HTTPS" and not props.get("securityPolicyId") and (
            props.get("tlsCiphersPolicy") not in HW_TLS12_POLICIES):
        shown = props.get("tlsCiphersPolicy") or "unset (ELB's default, tls-1-0)"
        report_violation(f"the HTTPS listener's TLS policy is {shown}, which admits TLS before 1.2: set "
                         "tlsCiphersPolicy to tls-1-2 (or tls-1-2-strict, tls-1-2-fs, tls-1-2-fs-with-1-3, "
                         "tls-1-2-strict-no-cbc, or a custom DedicatedElb.SecurityPolicy of TLSv1.2 and TLSv1.3)")
    if protocol == "HTTP" and props.get("defaultPoolId"):
        report_violation("the HTTP listener forwards plain HTTP to a backend server group (defaultPoolId): remove "
                         "it and redirect to the HTTPS listener (an l7policy REDIRECT_TO_LISTENER)")


def _gcp_forwarding_ports(props: Mapping[str, Any]) -> list[Span]:
    if props.get("allPorts") is True:
        return [Span(*ALL_PORTS)]
    texts = items(props.get("ports")) or ([props["portRange"]] if props.get("portRange") is not None else [])
    return port_texts(texts) if texts else [Span(*ALL_PORTS, unread="no portRange")]


def _gcp_forwarding_rule(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    if not props.get("target"):
        report_violation("the forwarding rule has no target proxy, so it passes traffic to its backends as it comes "
                         "(no HTTPS at the load balancer): forward to a target HTTPS proxy")
    for span in _gcp_forwarding_ports(props):
        if span.unread or span.low != span.high or span.low not in LISTENER_PORTS:
            shown = span.unread or (f"port {span.low}" if span.low == span.high else f"ports {span.low}-{span.high}")
            report_violation(f"the forwarding rule listens on {shown}: {LISTENER_FIX}")


def _gcp_ssl_policy(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    version = props.get("minTlsVersion")
    if version not in GCP_TLS12_VERSIONS:
        shown = version or "unset (Google's default, TLS_1_0)"
        report_violation(f"the SSL policy's minTlsVersion is {shown}: set it to TLS_1_2")


def _tls_versions(key: str) -> Callable[[Mapping[str, Any], ReportViolation], None]:
    def check(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
        versions = {str(v) for v in items(props.get(key))}
        if not versions or not versions <= TLS12_PROTOCOLS:
            report_violation(f"the TLS policy admits {', '.join(sorted(versions)) or 'unset versions'} ({key}): "
                             "admit TLSv1.2 and TLSv1.3 only")
    return check


def _unread_listener(props: Mapping[str, Any], report_violation: ReportViolation) -> None:
    report_violation("this load balancer's listeners are not read by the pack (it reads AWS ALB listeners, Google "
                     "Cloud forwarding rules and target proxies, Alibaba ALB listeners and Huawei dedicated ELB "
                     f"listeners), so they count as public listeners it cannot check: {LISTENER_FIX}, on one of those")


_LISTENERS: Mapping[str, Callable[[Mapping[str, Any], ReportViolation], None]] = {
    **dict.fromkeys(AWS_LISTENERS, _aws_listener),
    **dict.fromkeys(GCP_FORWARDING_RULES, _gcp_forwarding_rule),
    **dict.fromkeys(GCP_SSL_POLICIES, _gcp_ssl_policy),
    ALI_LISTENER: _alibaba_listener,
    ALI_TLS_POLICY: _tls_versions("tlsVersions"),
    HW_LISTENER: _huawei_listener,
    HW_TLS_POLICY: _tls_versions("protocols"),
    **dict.fromkeys(UNREAD_LISTENER_TYPES, _unread_listener),
}


def check_listeners(resource: ResourceInput, report_violation: ReportViolation) -> None:
    check = _LISTENERS.get(resource.resource_type)
    if check is not None:
        check(resource.props, report_violation)


LOAD_BALANCER_HTTPS_ONLY = ResourceRule(
    "load-balancer-https-only",
    "Load balancers listen with HTTPS on 443 under a TLS 1.2+ policy, and with HTTP on 80 only to "
    "redirect; no other listener.", check_listeners, lambda t: t in _LISTENERS)


#### Fleets: the load balancer forwards to a serving port and checks its health there ####

HEALTH_FIX = "check the serving health path (the plan's serving.health_path) over HTTP on the serving port"


def _serving(port: Any, ports: tuple[int, ...]) -> bool:
    return integer(port) in ports


def _http(protocol: Any, default: str = "HTTP") -> bool:
    return str(protocol or default).upper() in ("HTTP", "HTTPS", "HTTP2")


def _health_path(path: Any, setting: str, report_violation: ReportViolation) -> None:
    if not path or path == "/":
        report_violation(f"the health check asks for {path or 'the default path, /'} ({setting}), which answers "
                         f"before the model is loaded: {HEALTH_FIX}")


def _aws_target_group(props: Mapping[str, Any], ports: tuple[int, ...], report_violation: ReportViolation) -> None:
    if not _serving(props.get("port"), ports):
        report_violation(f"the target group forwards to port {show(props.get('port'))}, not a serving port "
                         f"({', '.join(map(str, ports))})")
    check = props.get("healthCheck") or {}
    if check.get("enabled") is False or not _http(check.get("protocol")):
        state = "off" if check.get("enabled") is False else "not HTTP"
        report_violation(f"the target group's health check is {state}: {HEALTH_FIX}")
        return
    _health_path(check.get("path"), "healthCheck.path", report_violation)
    port = check.get("port")
    if port not in (None, "traffic-port") and not _serving(port, ports):
        report_violation(f"the health check probes port {show(port)} (healthCheck.port): use traffic-port")


def _gcp_health_check(props: Mapping[str, Any], ports: tuple[int, ...], report_violation: ReportViolation) -> None:
    blocks = [(key, props[key]) for key in ("httpHealthCheck", "httpsHealthCheck", "http2HealthCheck")
              if props.get(key)]
    if not blocks:
        report_violation(f"the health check is not HTTP (no httpHealthCheck, httpsHealthCheck or http2HealthCheck): "
                         f"{HEALTH_FIX}")
        return
    for key, block in blocks:
        _health_path(block.get("requestPath"), f"{key}.requestPath", report_violation)
        specification = block.get("portSpecification")
        if specification in ("USE_SERVING_PORT", "USE_NAMED_PORT"):
            continue  # the backend's named port, which load-balancer-backends-on-serving-port reads on the group
        if not _serving(block.get("port", 80), ports):
            report_violation(f"the health check probes port {show(block.get('port', '80 (the default)'))} "
                             f"({key}.port): use the serving port, or portSpecification USE_SERVING_PORT")


def _gcp_legacy_health_check(props: Mapping[str, Any], ports: tuple[int, ...],
                             report_violation: ReportViolation) -> None:
    _health_path(props.get("requestPath"), "requestPath", report_violation)
    if not _serving(props.get("port", 80), ports):
        report_violation(f"the health check probes port {show(props.get('port', '80 (the default)'))}: use the "
                         "serving port")


def _gcp_backend_service(props: Mapping[str, Any], ports: tuple[int, ...], report_violation: ReportViolation) -> None:
    if not items(props.get("healthChecks")):
        report_violation(f"the backend service has no health check (healthChecks): {HEALTH_FIX}")


def _gcp_group_ports(props: Mapping[str, Any], ports: tuple[int, ...], report_violation: ReportViolation) -> None:
    for named in items(props.get("namedPorts")):
        if not _serving(named.get("port"), ports):
            report_violation(f"named port {named.get('name')} is {show(named.get('port'))}, not a serving port "
                             f"({', '.join(map(str, ports))}): the load balancer would send requests there")


def _alibaba_server_group(props: Mapping[str, Any], ports: tuple[int, ...], report_violation: ReportViolation) -> None:
    check = props.get("healthCheckConfig") or {}
    if check.get("healthCheckEnabled") is not True or not _http(check.get("healthCheckProtocol")):
        state = "not HTTP" if check.get("healthCheckEnabled") is True else "off"
        report_violation(f"the server group's health check is {state} (healthCheckConfig): {HEALTH_FIX}")
        return
    _health_path(check.get("healthCheckPath"), "healthCheckConfig.healthCheckPath", report_violation)
    port = check.get("healthCheckConnectPort")
    if port is not None and integer(port) != 0 and not _serving(port, ports):
        report_violation(f"the health check probes port {show(port)} (healthCheckConfig.healthCheckConnectPort): "
                         "use 0 (the backend's port)")


def _backend_port(port: Any, setting: str, ports: tuple[int, ...], report_violation: ReportViolation) -> None:
    if not _serving(port, ports):
        report_violation(f"the load balancer sends requests to port {show(port)} ({setting}), not a serving port "
                         f"({', '.join(map(str, ports))})")


def _backend_ports(key: str, port_key: str) -> Callable[[Mapping[str, Any], tuple[int, ...], ReportViolation], None]:
    """A group's registrations with a load balancer, each with the port its servers receive requests on."""
    def check(props: Mapping[str, Any], ports: tuple[int, ...], report_violation: ReportViolation) -> None:
        for entry in items(props.get(key)):
            _backend_port(entry.get(port_key), f"{key}.{port_key}", ports, report_violation)
    return check


def _huawei_monitor(props: Mapping[str, Any], ports: tuple[int, ...], report_violation: ReportViolation) -> None:
    if props.get("enabled") is False or not _http(props.get("protocol"), default=""):
        state = "off" if props.get("enabled") is False else "not HTTP"
        report_violation(f"the health check is {state}: {HEALTH_FIX}")
        return
    _health_path(props.get("urlPath"), "urlPath", report_violation)
    if props.get("port") is not None and not _serving(props.get("port"), ports):
        report_violation(f"the health check probes port {show(props.get('port'))}: leave port unset (the "
                         "backend's port)")


_BACKENDS: Mapping[str, Callable[[Mapping[str, Any], tuple[int, ...], ReportViolation], None]] = {
    **dict.fromkeys(AWS_TARGET_GROUPS, _aws_target_group),
    **dict.fromkeys(GCP_HEALTH_CHECKS, _gcp_health_check),
    **dict.fromkeys(GCP_LEGACY_HEALTH_CHECKS, _gcp_legacy_health_check),
    **dict.fromkeys(GCP_BACKEND_SERVICES, _gcp_backend_service),
    GCP_REGION_GROUP_MANAGER: _gcp_group_ports,
    GCP_ZONE_GROUP_MANAGER: _gcp_group_ports,
    ALI_SERVER_GROUP: _alibaba_server_group,
    ALI_SCALING_GROUP: _backend_ports("albServerGroups", "port"),
    ALI_GROUP_ATTACHMENT: lambda props, ports, report: _backend_port(props.get("port"), "port", ports, report),
    HW_MONITOR: _huawei_monitor,
    HW_AS_GROUP: _backend_ports("lbaasListeners", "protocolPort"),
}


def check_backends(resource: ResourceInput, report_violation: ReportViolation) -> None:
    check = _BACKENDS.get(resource.resource_type)
    if check is not None:
        check(resource.props, serving_ports(resource.config), report_violation)


LOAD_BALANCER_BACKENDS_ON_SERVING_PORT = ResourceRule(
    "load-balancer-backends-on-serving-port",
    "Load balancers forward to a serving port and health-check the serving health path there (target "
    "groups, backend services, server groups, pools).", check_backends, lambda t: t in _BACKENDS,
    config_schema=SERVING_PORTS_SCHEMA)
