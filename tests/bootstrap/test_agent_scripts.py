"""The agents' install scripts run for real (bash, gpg) against stand-ins for the network and the package tools.

The CloudWatch agent is installed only when its .sig holds exactly one good signature by Amazon's pinned key (or one
of its subkeys): a key file without that key, a package signed by another key, a second signature beside the
pinned key's (whatever key files the server downloads) and a revoked or expired pinned key are refused. The tests
that need a passing check pin a key made here in place of Amazon's, in a copy of the shipped script. A Google key
file without the pinned fingerprints installs no repository. No refusal reaches apt-get."""

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
AMAZON_KEY = "937616F3450B7D806CBD9725D58167303B789C72"  # agent_aws.sh KEY_FINGERPRINT
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


def _export(env: dict[str, Path], to: Path, *fingerprints: str) -> None:
    """Writes the public keys named (every key of the test's keyring when none is) to `to`, as one key file."""
    with to.open("wb") as out:
        subprocess.run(["gpg", "--batch", "--homedir", str(env["home"]), "--armor", "--export", *fingerprints],
                       check=True, stdout=out)


def _new_key(env: dict[str, Path], name: str, usage: str = "sign", expires: str = "never",
             *at: str) -> str:
    """A new key in the test's keyring (`at`: gpg's --faked-system-time, to make it in the past); its fingerprint."""
    subprocess.run(["gpg", "--batch", "--homedir", str(env["home"]), "--passphrase", "", *at, "--quick-gen-key",
                    f"{name} <{name.lower()}@example.com>", "ed25519", usage, expires], check=True, capture_output=True)
    return _fingerprints(env, f"{name.lower()}@example.com")[0]


def _fingerprints(env: dict[str, Path], who: str) -> list[str]:
    """The fingerprints of `who`'s key: the primary key's first, then its subkeys'."""
    listing = subprocess.run(["gpg", "--batch", "--homedir", str(env["home"]), "--with-colons", "--list-keys", who],
                             check=True, capture_output=True, text=True).stdout
    return [line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:")]


def _add_signing_subkey(env: dict[str, Path], primary: str) -> tuple[str, str]:
    """Adds a signing subkey to the primary key; both fingerprints."""
    subprocess.run(["gpg", "--batch", "--homedir", str(env["home"]), "--passphrase", "", "--quick-add-key", primary,
                    "ed25519", "sign", "never"], check=True, capture_output=True)
    _, subkey = _fingerprints(env, primary)
    return primary, subkey


def _package_signed_by(env: dict[str, Path], *signers: str, at: tuple[str, ...] = ()) -> Path:
    """The served package, and one detached .sig beside it holding one signature per signer (gpg -u, in order)."""
    package = env["fixtures"] / "amazon-cloudwatch-agent.deb"
    package.write_bytes(b"the CloudWatch agent")
    users = [word for signer in signers for word in ("-u", f"{signer}!")]  # "!": that very (sub)key
    subprocess.run(["gpg", "--batch", "--homedir", str(env["home"]), *at, *users, "--detach-sign", "-o",
                    f"{package}.sig", str(package)], check=True, capture_output=True)
    return package


def _run_aws_agent(env: dict[str, Path], tmp_path: Path, pinned: str) -> subprocess.CompletedProcess[str]:
    """agent_aws.sh with `pinned` in place of Amazon's fingerprint and a stand-in for the agent's control tool."""
    ctl = env["bin"] / "amazon-cloudwatch-agent-ctl"
    _tool(ctl, RECORDER)
    return _run("agent_aws.sh", env, tmp_path, replace=(
        (f"KEY_FINGERPRINT={AMAZON_KEY}", f"KEY_FINGERPRINT={pinned}"),
        ("CTL=/opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl", f"CTL={ctl}")))


def _refused(result: subprocess.CompletedProcess[str], env: dict[str, Path], found: str) -> None:
    """The run failed before apt-get, saying what gpg found in the .sig (one result per signature)."""
    assert result.returncode != 0, result.stdout + result.stderr
    assert "signature is not Amazon's: one good signature by key" in result.stdout, result.stdout
    assert f"gpg found {found} (exit" in result.stdout, result.stdout
    assert not (env["calls"] / "apt-get").exists()


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


def test_a_key_file_without_amazons_key_installs_nothing(impostor: dict[str, Path], tmp_path: Path) -> None:
    impostor_key = _fingerprints(impostor, "impostor@example.com")[0]
    _package_signed_by(impostor, impostor_key)
    _export(impostor, impostor["fixtures"] / "amazon-cloudwatch-agent.gpg")  # served as "Amazon's key"
    result = _run("agent_aws.sh", impostor, tmp_path)
    assert result.returncode != 0
    assert (f"https://amazoncloudwatch-agent.s3.amazonaws.com/assets/amazon-cloudwatch-agent.gpg does not hold "
            f"Amazon's key {AMAZON_KEY}: not installed") in result.stdout
    downloads = (impostor["calls"] / "curl").read_text().split()
    assert "https://amazoncloudwatch-agent.s3.amazonaws.com/ubuntu/amd64/1.300071.0b1720/amazon-cloudwatch-agent.deb" \
        in downloads
    assert not (impostor["calls"] / "apt-get").exists()


def test_a_package_signed_by_another_key_of_the_key_file_is_refused(impostor: dict[str, Path],
                                                                    tmp_path: Path) -> None:
    pinned = _new_key(impostor, "Pinned")
    _package_signed_by(impostor, _fingerprints(impostor, "impostor@example.com")[0])
    _export(impostor, impostor["fixtures"] / "amazon-cloudwatch-agent.gpg")  # the pinned key and the impostor's
    _refused(_run_aws_agent(impostor, tmp_path, pinned), impostor, "ERRSIG")  # the impostor's key is never trusted


def test_a_second_signature_beside_the_pinned_keys_is_refused_and_its_key_never_trusted(
        impostor: dict[str, Path], tmp_path: Path) -> None:
    """The .sig holds the pinned key's good signature and the impostor's, whose key the key file also carries: the
    impostor's signature cannot even be checked (ERRSIG), as only the pinned key is imported."""
    pinned = _new_key(impostor, "Pinned")
    _package_signed_by(impostor, pinned, _fingerprints(impostor, "impostor@example.com")[0])
    _export(impostor, impostor["fixtures"] / "amazon-cloudwatch-agent.gpg")
    _refused(_run_aws_agent(impostor, tmp_path, pinned), impostor, "GOODSIG ERRSIG")


def test_two_signatures_by_the_pinned_key_itself_are_refused(impostor: dict[str, Path], tmp_path: Path) -> None:
    """One by the primary key, one by its signing subkey: both good, both the pinned key's; still two."""
    pinned = _new_key(impostor, "Pinned")
    _, subkey = _add_signing_subkey(impostor, pinned)
    _package_signed_by(impostor, pinned, subkey)
    _export(impostor, impostor["fixtures"] / "amazon-cloudwatch-agent.gpg", pinned)
    _refused(_run_aws_agent(impostor, tmp_path, pinned), impostor, "GOODSIG GOODSIG")


def test_a_good_signature_followed_by_other_data_is_refused(impostor: dict[str, Path], tmp_path: Path) -> None:
    """gpg reports the one good signature, then fails on what follows it (exit 2): the script wants both."""
    pinned = _new_key(impostor, "Pinned")
    package = _package_signed_by(impostor, pinned)
    with open(f"{package}.sig", "ab") as signature:
        signature.write(b"trailing bytes")
    _export(impostor, impostor["fixtures"] / "amazon-cloudwatch-agent.gpg", pinned)
    _refused(_run_aws_agent(impostor, tmp_path, pinned), impostor, "GOODSIG")


def test_a_signature_by_an_expired_pinned_key_is_refused(impostor: dict[str, Path], tmp_path: Path) -> None:
    """A key made in 2020 that expired a day later, and a signature made while it was valid: gpg reports EXPKEYSIG
    with VALIDSIG and exit 0; the script wants GOODSIG."""
    pinned = _new_key(impostor, "Expired", "sign", "1d", "--faked-system-time", "20200101T000000!")
    _package_signed_by(impostor, pinned, at=("--faked-system-time", "20200101T010000!"))
    _export(impostor, impostor["fixtures"] / "amazon-cloudwatch-agent.gpg", pinned)
    _refused(_run_aws_agent(impostor, tmp_path, pinned), impostor, "EXPKEYSIG")


def test_a_signature_by_a_signing_subkey_of_the_pinned_key_installs(impostor: dict[str, Path],
                                                                      tmp_path: Path) -> None:
    """The pinned fingerprint is the primary key's; the package is signed by its signing subkey, which VALIDSIG
    names first (the primary key's fingerprint is its last field)."""
    primary, subkey = _add_signing_subkey(impostor, _new_key(impostor, "Primary", "cert"))
    _package_signed_by(impostor, subkey)
    _export(impostor, impostor["fixtures"] / "amazon-cloudwatch-agent.gpg")
    result = _run_aws_agent(impostor, tmp_path, primary)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (impostor["calls"] / "apt-get").read_text().split()[-1].endswith("/amazon-cloudwatch-agent.deb")


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
    stand-in): the package is installed, the configuration loaded, the run ends 0 and its downloads are gone. The
    key file carries another key too, which changes nothing."""
    pinned = _new_key(impostor, "Pinned")
    _package_signed_by(impostor, pinned)
    _export(impostor, impostor["fixtures"] / "amazon-cloudwatch-agent.gpg")  # the pinned key and the impostor's
    result = _run_aws_agent(impostor, tmp_path, pinned)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "installed the CloudWatch agent 1.300071.0b1720" in result.stdout
    assert (impostor["calls"] / "apt-get").read_text().split()[-1].endswith("/amazon-cloudwatch-agent.deb")
    assert (impostor["calls"] / "amazon-cloudwatch-agent-ctl").read_text().split()[:2] == ["-a", "fetch-config"]
    assert list(impostor["scratch"].iterdir()) == []  # the package, its signature and the keyrings removed


def test_a_cloudwatch_agent_package_signed_by_the_pinned_key_once_revoked_is_refused(
        impostor: dict[str, Path], tmp_path: Path) -> None:
    """gpg still reports VALIDSIG for a signature by a revoked key (beside REVKEYSIG): the script wants GOODSIG."""
    home = impostor["home"]
    pinned = _new_key(impostor, "Pinned")
    _package_signed_by(impostor, pinned)
    # gpg writes a revocation certificate for every key it makes; its first line is guarded by a colon.
    certificate = (home / "openpgp-revocs.d" / f"{pinned}.rev").read_text()
    revocation = tmp_path / "revocation.asc"
    revocation.write_text(certificate.replace(":-----BEGIN PGP PUBLIC KEY BLOCK-----",
                                              "-----BEGIN PGP PUBLIC KEY BLOCK-----"))
    subprocess.run(["gpg", "--batch", "--homedir", str(home), "--import", str(revocation)], check=True,
                   capture_output=True)
    _export(impostor, impostor["fixtures"] / "amazon-cloudwatch-agent.gpg", pinned)  # the key, revoked
    _refused(_run_aws_agent(impostor, tmp_path, pinned), impostor, "REVKEYSIG")
