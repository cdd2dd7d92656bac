"""Fixtures of the bootstrap tests: loopback metadata and object-storage servers, and a small model on disk."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from bootstrap_fakes import metadata_server, s3_server

from inferstack.bootstrap.manifest import write_manifest

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


def make_model(model_dir: Path, sizes_bytes: dict[str, int], seed: int = 0) -> Path:
    """Files of pseudo-random bytes (incompressible, like weights) plus their manifest."""
    model_dir.mkdir(parents=True, exist_ok=True)
    for index, (name, size) in enumerate(sorted(sizes_bytes.items())):
        path = model_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_pseudo_random_bytes(size, seed * 1000 + index))
    write_manifest(model_dir)
    return model_dir


def _pseudo_random_bytes(size: int, seed: int) -> bytes:
    import random

    return random.Random(seed).randbytes(size)
