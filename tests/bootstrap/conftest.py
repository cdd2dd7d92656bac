"""Fixtures of the bootstrap tests: loopback metadata and object-storage servers."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from bootstrap_fakes import metadata_server, s3_server

FILES_DIR = Path(__file__).resolve().parents[2] / "inferstack" / "bootstrap" / "files"
# The programs that run on the server are plain scripts (not a package): tests import them by file name.
sys.path.insert(0, str(FILES_DIR))
# tests/sample_plans.py, the plans every bootstrap and component test starts from.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: runs the rendered bootstrap in a Debian 12 chroot (slow, needs root)")


@pytest.fixture(scope="session")
def metadata_url() -> Iterator[str]:
    with metadata_server() as url:
        yield url


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    with s3_server() as endpoint:
        yield endpoint
