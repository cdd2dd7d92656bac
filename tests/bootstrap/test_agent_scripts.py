"""The agents' install scripts run for real (bash, gpg) against stand-ins for the network and the package tools: a
package signed by any key but Amazon's pinned one is refused (a key served beside the package proves nothing), and a
Google key file without the pinned fingerprints installs no repository. Neither reaches apt-get."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
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
def impostor(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """A signing key that is not the vendor's, its public key file, and stand-in tools on PATH."""
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    subprocess.run(["gpg", "--batch", "--homedir", str(home), "--passphrase", "", "--quick-gen-key",
                    "Impostor <impostor@example.com>", "ed25519", "sign", "never"], check=True, capture_output=True)
    fixtures, calls, bin_dir = tmp_path / "fixtures", tmp_path / "calls", tmp_path / "bin"
    # The scripts' scratch directories (TMPDIR) hold a gpg home: a short path, as gpg-agent's socket path is limited.
    scratch = Path(tempfile.mkdtemp(prefix="agent-", dir="/tmp"))
    for folder in (fixtures, calls, bin_dir):
        folder.mkdir()
    _tool(bin_dir / "curl", CURL)
    _tool(bin_dir / "dpkg-query", "#!/bin/bash\nexit 1\n")  # nothing installed yet
    _tool(bin_dir / "dpkg", "#!/bin/bash\necho amd64\n")
    for name in ("apt-get", "apt-cache", "systemctl"):
        _tool(bin_dir / name, RECORDER)
    yield {"home": home, "fixtures": fixtures, "calls": calls, "bin": bin_dir, "scratch": scratch}
    shutil.rmtree(scratch, ignore_errors=True)


def _export(env: dict[str, Path], to: Path) -> None:
    with to.open("wb") as out:
        subprocess.run(["gpg", "--batch", "--homedir", str(env["home"]), "--armor", "--export"], check=True,
                       stdout=out)


def _run(script: str, env: dict[str, Path], tmp_path: Path,
         replace: tuple[tuple[str, str], ...] = ()) -> subprocess.CompletedProcess[str]:
    """Runs a copy of the shipped `script` (with `replace`'s (old, new) substitutions) against the stand-ins; its
    scratch directories go to TMPDIR = env["scratch"]."""
    text = shipped_copy(script)
    for old, new in replace:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "agent.sh"
    path.write_text(text)
    environment = {**os.environ, "PATH": f"{env['bin']}:{os.environ['PATH']}", "FIXTURES": str(env["fixtures"]),
                   "CALLS": str(env["calls"]), "TMPDIR": str(env["scratch"])}
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


def test_a_cloudwatch_agent_package_signed_by_the_pinned_key_installs_and_leaves_no_scratch(
        impostor: dict[str, Path], tmp_path: Path) -> None:
    """The success path, with the test key pinned in the copy in place of Amazon's (and the agent's control tool a
    stand-in): the package is installed, the configuration loaded, the run ends 0 and its downloads are gone."""
    listing = subprocess.run(["gpg", "--batch", "--homedir", str(impostor["home"]), "--with-colons",
                              "--list-secret-keys"], check=True, capture_output=True, text=True).stdout
    fingerprint = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
    package = impostor["fixtures"] / "amazon-cloudwatch-agent.deb"
    package.write_bytes(b"the CloudWatch agent")
    subprocess.run(["gpg", "--batch", "--homedir", str(impostor["home"]), "--detach-sign", "-o",
                    str(package) + ".sig", str(package)], check=True, capture_output=True)
    _export(impostor, impostor["fixtures"] / "amazon-cloudwatch-agent.gpg")
    ctl = impostor["bin"] / "amazon-cloudwatch-agent-ctl"
    _tool(ctl, RECORDER)
    result = _run("agent_aws.sh", impostor, tmp_path, replace=(
        ("KEY_FINGERPRINT=937616F3450B7D806CBD9725D58167303B789C72", f"KEY_FINGERPRINT={fingerprint}"),
        ("CTL=/opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl", f"CTL={ctl}")))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "installed the CloudWatch agent 1.300071.0b1720" in result.stdout
    assert (impostor["calls"] / "apt-get").read_text().split()[-1].endswith("/amazon-cloudwatch-agent.deb")
    assert (impostor["calls"] / "amazon-cloudwatch-agent-ctl").read_text().split()[:2] == ["-a", "fetch-config"]
    assert list(impostor["scratch"].iterdir()) == []  # the package, its signature and the keyring removed


def test_a_cloudwatch_agent_package_signed_by_the_pinned_key_once_revoked_is_refused(
        impostor: dict[str, Path], tmp_path: Path) -> None:
    """gpg still reports VALIDSIG for a signature by a revoked key (beside REVKEYSIG): the script also wants GOODSIG."""
    home = impostor["home"]
    listing = subprocess.run(["gpg", "--batch", "--homedir", str(home), "--with-colons", "--list-secret-keys"],
                             check=True, capture_output=True, text=True).stdout
    fingerprint = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
    package = impostor["fixtures"] / "amazon-cloudwatch-agent.deb"
    package.write_bytes(b"the CloudWatch agent")
    subprocess.run(["gpg", "--batch", "--homedir", str(home), "--detach-sign", "-o", str(package) + ".sig",
                    str(package)], check=True, capture_output=True)
    # gpg writes a revocation certificate for every key it makes; its first line is guarded by a colon.
    certificate = (home / "openpgp-revocs.d" / f"{fingerprint}.rev").read_text()
    revocation = tmp_path / "revocation.asc"
    revocation.write_text(certificate.replace(":-----BEGIN PGP PUBLIC KEY BLOCK-----",
                                              "-----BEGIN PGP PUBLIC KEY BLOCK-----"))
    subprocess.run(["gpg", "--batch", "--homedir", str(home), "--import", str(revocation)], check=True,
                   capture_output=True)
    _export(impostor, impostor["fixtures"] / "amazon-cloudwatch-agent.gpg")  # the key, revoked
    result = _run("agent_aws.sh", impostor, tmp_path, replace=(
        ("KEY_FINGERPRINT=937616F3450B7D806CBD9725D58167303B789C72", f"KEY_FINGERPRINT={fingerprint}"),))
    assert result.returncode != 0
    assert "signature is not Amazon's" in result.stdout
    assert not (impostor["calls"] / "apt-get").exists()
