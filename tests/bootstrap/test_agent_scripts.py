"""The agents' install scripts run for real (bash, gpg) against stand-ins for the network and the package tools: a
package signed by any key but Amazon's pinned one is refused (a key served beside the package proves nothing), and a
Google key file without the pinned fingerprints installs no repository. Neither reaches apt-get."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from inferstack.bootstrap.render import shipped_copy

CURL = """#!/bin/bash
# curl stand-in: serves $FIXTURES/<basename of the URL> to the -o path
out=""; url=""
while [ $# -gt 0 ]; do case $1 in -o) out=$2; shift 2 ;; *) url=$1; shift ;; esac; done
echo "$url" >>"$CALLS/curl"
cp "$FIXTURES/$(basename "$url")" "$out"
"""
RECORDER = """#!/bin/bash
echo "$*" >>"$CALLS/$(basename "$0")"
"""


def _tool(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def impostor(tmp_path: Path) -> dict[str, Path]:
    """A signing key that is not the vendor's, its public key file, and stand-in tools on PATH."""
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    subprocess.run(["gpg", "--batch", "--homedir", str(home), "--passphrase", "", "--quick-gen-key",
                    "Impostor <impostor@example.com>", "ed25519", "sign", "never"], check=True, capture_output=True)
    fixtures, calls, bin_dir = tmp_path / "fixtures", tmp_path / "calls", tmp_path / "bin"
    for folder in (fixtures, calls, bin_dir):
        folder.mkdir()
    _tool(bin_dir / "curl", CURL)
    _tool(bin_dir / "dpkg-query", "#!/bin/bash\nexit 1\n")  # nothing installed yet
    _tool(bin_dir / "dpkg", "#!/bin/bash\necho amd64\n")
    for name in ("apt-get", "apt-cache", "systemctl"):
        _tool(bin_dir / name, RECORDER)
    return {"home": home, "fixtures": fixtures, "calls": calls, "bin": bin_dir}


def _export(env: dict[str, Path], to: Path) -> None:
    with to.open("wb") as out:
        subprocess.run(["gpg", "--batch", "--homedir", str(env["home"]), "--armor", "--export"], check=True,
                       stdout=out)


def _run(script: str, env: dict[str, Path], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "agent.sh"
    path.write_text(shipped_copy(script))
    environment = {**os.environ, "PATH": f"{env['bin']}:{os.environ['PATH']}", "FIXTURES": str(env["fixtures"]),
                   "CALLS": str(env["calls"])}
    return subprocess.run(["bash", str(path)], env=environment, capture_output=True, text=True, timeout=120)


def test_a_cloudwatch_agent_package_signed_by_another_key_is_refused(impostor: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    package = impostor["fixtures"] / "amazon-cloudwatch-agent.deb"
    package.write_bytes(b"not the CloudWatch agent")
    subprocess.run(["gpg", "--batch", "--homedir", str(impostor["home"]), "--detach-sign", "-o",
                    str(package) + ".sig", str(package)], check=True, capture_output=True)
    _export(impostor, impostor["fixtures"] / "amazon-cloudwatch-agent.gpg")  # served as "Amazon's key"
    result = _run("agent_aws.sh", impostor, tmp_path)
    assert result.returncode != 0
    assert "signature is not Amazon's" in result.stdout
    downloads = (impostor["calls"] / "curl").read_text().split()
    assert "https://amazoncloudwatch-agent.s3.amazonaws.com/ubuntu/amd64/1.300071.0b1720/amazon-cloudwatch-agent.deb" \
        in downloads
    assert not (impostor["calls"] / "apt-get").exists()


def test_a_google_key_file_without_the_pinned_keys_adds_no_repository(impostor: dict[str, Path],
                                                                       tmp_path: Path) -> None:
    _export(impostor, impostor["fixtures"] / "apt-key.gpg")
    result = _run("agent_gcp.sh", impostor, tmp_path)
    assert result.returncode != 0
    assert "is not in https://packages.cloud.google.com/apt/doc/apt-key.gpg" in result.stdout
    assert not (impostor["calls"] / "apt-get").exists()
