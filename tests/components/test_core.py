"""The cloud-neutral core: capabilities, registry, names, CIDR checks."""

from __future__ import annotations

import ipaddress

import pytest

from inferstack.components import Capability, available_clouds, backend_for
from inferstack.components.core import is_private, parse_cidrs, slug, unique_name
from inferstack.errors import InputError
from inferstack.spec import CLOUDS


@pytest.mark.parametrize("cloud", available_clouds())
def test_every_backend_states_every_capability_with_a_reason(cloud: str) -> None:
    backend = backend_for(cloud)
    assert set(backend.capabilities) == set(Capability)
    assert all(len(support.note) > 10 for support in backend.capabilities.values())


def test_unknown_cloud_is_rejected_with_the_four_clouds() -> None:
    with pytest.raises(InputError, match="use one of aws, gcp, alibaba, huawei"):
        backend_for("azure")


def test_available_clouds_are_a_subset_of_the_four() -> None:
    assert "aws" in available_clouds() and set(available_clouds()) <= set(CLOUDS)


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
