"""The cloud-neutral core: capabilities, registry, names, CIDR checks."""

from __future__ import annotations

import base64
import gzip
import ipaddress
import secrets
from pathlib import Path

import pulumi
import pytest

from inferstack.clouds import CLOUD_FACTS
from inferstack.components import Capability, available_clouds, backend_for
from inferstack.components.argument_checks import is_private, parse_cidrs
from inferstack.components.backend import PreviewContext
from inferstack.components.shared import NETWORK_CIDR, checked_user_data, compressed_user_data, first_zones
from inferstack.errors import InputError
from inferstack.names import slug, unique_name
from inferstack.preview import record
from inferstack.spec import CLOUDS
from tests.sample_plans import sample_plan

DOCS = Path(__file__).resolve().parents[2] / "docs"
FOUR_CLOUDS = ("aws", "gcp", "alibaba", "huawei")
"""The clouds inferstack provisions: a fixed expectation, so that a missing backend fails here instead of shrinking
the matrix of every test parametrised over the clouds."""


@pytest.mark.parametrize("cloud", FOUR_CLOUDS)
def test_every_backend_states_every_capability_with_a_reason(cloud: str) -> None:
    backend = backend_for(cloud)
    assert set(backend.capabilities) == set(Capability)
    assert all(len(support.note) > 10 for support in backend.capabilities.values())


@pytest.mark.parametrize("cloud", FOUR_CLOUDS)
def test_the_deploy_guide_states_every_capability_as_the_code_does(cloud: str) -> None:
    guide = (DOCS / f"deploy-{cloud}.md").read_text()
    for capability, support in backend_for(cloud).capabilities.items():
        rows = [line for line in guide.splitlines() if line.startswith(f"| `{capability.value}` |")]
        assert len(rows) == 1, f"docs/deploy-{cloud}.md has {len(rows)} rows for {capability.value}"
        assert rows[0].split("|")[2].strip() == ("yes" if support.available else "**no**"), capability


@pytest.mark.parametrize("cloud", FOUR_CLOUDS)
def test_the_boot_script_guards_the_metadata_server_whatever_the_clouds_tokens(cloud: str) -> None:
    """Tokens stop an SSRF, not code on the server: every cloud's metadata addresses are firewalled
    (tests/bootstrap/test_bootstrap_metadata_firewall.py), and the capability names the mitigation."""
    hardened = backend_for(cloud).support(Capability.METADATA_HARDENING)
    assert CLOUD_FACTS[cloud].metadata_addresses
    assert "host firewall" in hardened.note and "IPAddressDeny=" in hardened.note


def test_unknown_cloud_is_rejected_with_the_four_clouds() -> None:
    with pytest.raises(InputError, match="use one of aws, gcp, alibaba, huawei"):
        backend_for("azure")


def test_all_four_backends_load_and_are_available() -> None:
    assert tuple(CLOUDS) == FOUR_CLOUDS
    assert available_clouds() == list(FOUR_CLOUDS)
    assert [backend_for(cloud).cloud for cloud in FOUR_CLOUDS] == list(FOUR_CLOUDS)


@pytest.mark.parametrize("cloud", FOUR_CLOUDS)
def test_each_backend_is_the_module_its_registry_entry_names_and_takes_its_names_from_there(cloud: str) -> None:
    facts, backend = CLOUD_FACTS[cloud], backend_for(cloud)
    assert type(backend).__module__ == facts.backend_module
    assert (backend.display_name, backend.region_config_key) == (facts.display_name, f"{facts.pulumi_package}:region")


def test_unique_names_are_deterministic_bounded_and_differ_per_account() -> None:
    parts = ["inferstack", "aws-prod", "chat-store", "models"]
    name = unique_name(parts, unique_by=["123456789012", "us-east-1"])
    assert name == unique_name(parts, unique_by=["123456789012", "us-east-1"])
    assert name != unique_name(parts, unique_by=["210987654321", "us-east-1"])
    assert name.startswith("inferstack-aws-prod-chat-store-models-") and len(name) <= 63
    long_name = unique_name(["x" * 80, "Prod_Stack", "models"], unique_by=["1"])
    assert len(long_name) == 63 and long_name == long_name.lower()


def test_slug_keeps_letters_digits_and_single_dashes() -> None:
    assert slug("My_Project", "aws--dev", "10.0.0.0/8") == "my-project-aws-dev-10-0-0-0-8"


def test_cidrs_parse_strictly_and_report_each_bad_entry() -> None:
    networks, problems = parse_cidrs(["10.0.0.0/8", " 2001:db8::/32", "10.1.2.3/16", "nope"], "cidrs")
    assert [str(n) for n in networks] == ["10.0.0.0/8", "2001:db8::/32"]
    assert [p.field for p in problems] == ["cidrs[2]", "cidrs[3]"]
    assert problems[0].fix == "use 10.1.0.0/16"


@pytest.mark.parametrize(("cidr", "private"), [
    ("10.20.0.0/16", True), ("172.16.0.0/12", True), ("192.168.1.0/24", True), ("100.64.0.0/10", True),
    ("fd00::/8", True), ("0.0.0.0/0", False), ("203.0.113.0/24", False), ("8.8.8.8/32", False),
    ("172.0.0.0/8", False), ("::/0", False),
])
def test_private_means_rfc1918_cgnat_or_ipv6_unique_local(cidr: str, private: bool) -> None:
    assert is_private(ipaddress.ip_network(cidr)) is private


#### Helpers every backend uses ####


def test_first_zones_keep_the_given_order_and_say_which_zones_offer_the_machine() -> None:
    assert first_zones(["us-east-1b", "us-east-1a", "us-east-1c"], 2, "g6.xlarge") == ["us-east-1b", "us-east-1a"]
    with pytest.raises(InputError, match=r"plan.zones: p5.48xlarge is offered in 1 zone\(s\) of this region "
                                         r"\(us-east-1a\) \(got 2\)"):
        first_zones(["us-east-1a"], 2, "p5.48xlarge")


def test_compressed_user_data_is_deterministic_base64_of_gzip() -> None:
    encoded = compressed_user_data("#cloud-config\n", limit_bytes=16 * 1024, service="EC2")
    assert encoded == compressed_user_data("#cloud-config\n", limit_bytes=16 * 1024, service="EC2")
    assert gzip.decompress(base64.b64decode(encoded)) == b"#cloud-config\n"


def test_user_data_over_the_limit_fails_with_its_size() -> None:
    with pytest.raises(InputError, match=r"bootstrap: compresses to \d+ bytes of user data; EC2 accepts 16384"):
        compressed_user_data(secrets.token_hex(24 * 1024), limit_bytes=16 * 1024, service="EC2")


def test_user_data_for_a_provider_in_another_region_than_the_plan_is_refused() -> None:
    plan = sample_plan("aws")

    def encoded(region: str) -> pulumi.Output[str]:
        return checked_user_data(plan, pulumi.Output.from_input("#cloud-config\n"), region, provider="AWS",
                                 encode=str.upper)

    assert record(lambda: encoded("us-east-1")).value == "#CLOUD-CONFIG\n"
    with pytest.raises(InputError, match=r"plan: was made for region us-east-1 but the AWS provider deploys to "
                                         r"eu-west-1.*give the component a provider for us-east-1"):
        record(lambda: encoded("eu-west-1"))


@pytest.mark.parametrize("cloud", FOUR_CLOUDS)
def test_preview_addresses_are_documentation_and_network_addresses(cloud: str) -> None:
    _, outputs = backend_for(cloud).preview_outputs("pulumi:test:Unlisted", "server", {})
    assert outputs == {}  # a type the backend does not list gets an id and nothing else
    context = PreviewContext.of(backend_for(cloud).preview_answers(), "t", "server-0", {})
    assert ipaddress.ip_address(context.public_ip) in ipaddress.ip_network("203.0.113.0/24")
    assert ipaddress.ip_address(context.private_ip) in ipaddress.ip_network(NETWORK_CIDR)
