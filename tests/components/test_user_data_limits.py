"""User data within each cloud's own limit: the boundary, and the limit each backend holds the boot script to.

Pulumi's mocks accept user data of any size; the cloud's API refuses one over its limit at create, after the
stack's other resources exist. So the limits are the vendors' documented ones, each with its source, and the check is
exact at the boundary.
"""

from __future__ import annotations

import gzip
import os

import pytest

from inferstack.bootstrap.render import user_data_gzip
from inferstack.components.alibaba import servers as alibaba_servers
from inferstack.components.aws import servers as aws_servers
from inferstack.components.gcp import servers as gcp_servers
from inferstack.components.huawei import servers as huawei_servers
from inferstack.components.shared import compressed_user_data
from inferstack.errors import InputError

DOCUMENTED_LIMITS = {
    # EC2 API Reference, RunInstances UserData: "limited to 16 KB" of raw data, before Base64 encoding.
    "aws": (aws_servers.USER_DATA_LIMIT_BYTES, 16 * 1024),
    # ECS API, CreateInstance / RunInstances UserData: "cannot exceed 32 KB" of Base64 text: 3/4 of it in bytes.
    "alibaba": (alibaba_servers.USER_DATA_LIMIT_BYTES, 32 * 1024 * 3 // 4),
    # ECS API, "Creating an ECS" user_data: at most 32 KB before Base64 encoding.
    "huawei": (huawei_servers.USER_DATA_LIMIT_BYTES, 32 * 1024),
    # Compute Engine, "About VM metadata": a metadata value holds at most 256 KB.
    "gcp": (gcp_servers.METADATA_VALUE_LIMIT_BYTES, 256 * 1024),
}


@pytest.mark.parametrize("cloud", sorted(DOCUMENTED_LIMITS))
def test_each_backend_holds_the_boot_script_to_its_clouds_documented_limit(cloud: str) -> None:
    held, documented = DOCUMENTED_LIMITS[cloud]
    assert held == documented


def _incompressible(size: int) -> str:
    """Text whose gzip is about `size` bytes (random hex barely compresses, 2 characters per byte of entropy)."""
    return os.urandom(size).hex()


def test_user_data_of_exactly_the_limit_passes_and_one_byte_more_is_refused() -> None:
    text = _incompressible(8000)
    packed = len(user_data_gzip(text))
    assert gzip.decompress(user_data_gzip(text)).decode() == text
    assert compressed_user_data(text, limit_bytes=packed, service="EC2")
    with pytest.raises(InputError, match=f"compresses to {packed} bytes of user data; EC2 accepts {packed - 1}"):
        compressed_user_data(text, limit_bytes=packed - 1, service="EC2")
