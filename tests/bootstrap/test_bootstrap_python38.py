"""The boot programs run on any cloud image's Python 3, from 3.8 on: their shipped copies use 3.8 syntax, and
(where a Python 3.8 is installed) they sync a model and fetch a secret under it, against the signature-checking
stand-in of AWS's stores."""

from __future__ import annotations

import ast
import glob
import os
import subprocess
from pathlib import Path

import pytest
from bootstrap_fakes import cloud_store_server, make_model, metadata_server

from inferstack.bootstrap.render import shipped_copy

PROGRAMS = ("cloud_access.py", "model_sync.py", "fetch_secret.py", "fetch_bundle.py", "interruption_watch.py",
            "huawei_metrics.py")


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_shipped_programs_use_only_python_3_8_syntax(name: str) -> None:
    ast.parse(shipped_copy(name), feature_version=(3, 8))


def python_3_8() -> str | None:
    """A working Python 3.8 interpreter on this machine, if any (on PATH, or installed by pyenv)."""
    for candidate in ["python3.8", *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")))]:
        try:
            probe = subprocess.run([candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 8)"],
                                   capture_output=True, timeout=30)
        except OSError:
            continue
        if probe.returncode == 0:
            return candidate
    return None


PYTHON_3_8 = python_3_8()


@pytest.mark.skipif(PYTHON_3_8 is None, reason="no Python 3.8 interpreter on this machine")
def test_model_sync_and_fetch_secret_work_on_python_3_8(tmp_path: Path) -> None:
    assert PYTHON_3_8 is not None
    for name in PROGRAMS:
        (tmp_path / name).write_text(shipped_copy(name))
    with metadata_server() as metadata, cloud_store_server("aws", "us-east-1") as store:
        store.put_model("models-bucket", "m/", make_model(tmp_path / "model", {"a b.bin": 70_000}))
        store.secrets["api-key"] = "sk-test"
        common = ["--cloud", "aws", "--region", "us-east-1", "--endpoint", store.url, "--metadata-endpoint", metadata]
        sync = subprocess.run([PYTHON_3_8, str(tmp_path / "model_sync.py"), *common, "--bucket", "models-bucket",
                               "--prefix", "m/", "--root", str(tmp_path / "root"), "--name", "m"],
                              capture_output=True, text=True, timeout=120)
        secret = subprocess.run([PYTHON_3_8, str(tmp_path / "fetch_secret.py"), *common, "--secret", "KEY=api-key",
                                 "--out", str(tmp_path / "s.env")], capture_output=True, text=True, timeout=120)
    assert sync.returncode == 0, sync.stderr
    assert (tmp_path / "root/models/m/current/a b.bin").stat().st_size == 70_000
    assert secret.returncode == 0, secret.stderr
    assert (tmp_path / "s.env").read_text() == "KEY=sk-test\n"
