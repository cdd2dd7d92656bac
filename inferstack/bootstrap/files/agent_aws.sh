#!/bin/bash
# inferstack: install and configure the Amazon CloudWatch agent (inferstack-agent.service runs this as root).
#
# A pinned agent version, the .deb from Amazon's download bucket, checked against its detached signature made by
# Amazon's CloudWatch agent key, whose fingerprint is pinned here ("Verifying the signature of the CloudWatch agent
# package", CloudWatch User Guide): the .sig must hold exactly one signature, good, by that key (or one of its
# subkeys), and the key file downloaded beside the package trusts nothing else. Then the configuration the bundle
# wrote (bootstrap/agents/aws.py) is loaded.
# Idempotent: an installed pinned version is not downloaded again; loading the same configuration again only
# restarts the agent. Runs beside boot.sh's phases, which use apt too: apt waits for their lock.
set -euo pipefail

AGENT_VERSION=1.300071.0b1720 # 2026-07-22 release (RELEASE_NOTES); journald collection needs 1.300070.0 or later
DOWNLOAD=https://amazoncloudwatch-agent.s3.amazonaws.com
KEY_URL=$DOWNLOAD/assets/amazon-cloudwatch-agent.gpg
KEY_FINGERPRINT=937616F3450B7D806CBD9725D58167303B789C72 # "Amazon CloudWatch Agent", AWS docs (link above)
CONFIG=/etc/inferstack/cloudwatch-agent.json # bootstrap/agents/aws.py CONFIG_PATH
CTL=/opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl

log() { echo "inferstack-agent: $*"; }
fetch() { # url, path; a stalled transfer ends (and is retried) rather than holding the unit forever
    curl --proto '=https' --tlsv1.2 -fsSL --connect-timeout 20 --max-time 600 --retry 5 --retry-delay 5 -o "$2" "$1"
}

# pinned_keyring WORK: makes WORK/gnupg a keyring holding the pinned key alone (with its subkeys). The downloaded key
# file is read into a keyring of its own and only the pinned key is carried over: another key the file carries (or a
# .sig signed by it) is never trusted. Fails when the file does not hold the pinned key.
pinned_keyring() {
    local work=$1 primaries
    mkdir -m 0700 "$work/downloaded" "$work/gnupg"
    gpg --batch --quiet --homedir "$work/downloaded" --import "$work/key.gpg" 2>/dev/null || true
    gpg --batch --quiet --homedir "$work/downloaded" --export "$KEY_FINGERPRINT" >"$work/pinned.gpg" 2>/dev/null || true
    gpg --batch --quiet --homedir "$work/gnupg" --import "$work/pinned.gpg" 2>/dev/null || true
    primaries=$(gpg --batch --homedir "$work/gnupg" --with-colons --list-keys 2>/dev/null |
        awk -F: '$1 == "pub" { primary = 1; next } primary && $1 == "fpr" { print $10; primary = 0 }' || true)
    [ "$primaries" = "$KEY_FINGERPRINT" ]
}

# signature_results STATUS: the outcome of each signature gpg checked, in order, from its status lines (GnuPG
# doc/DETAILS, gnupg 2.2.40, read 2026-12-07: "For each signature only one of the codes GOODSIG, BADSIG, EXPSIG,
# EXPKEYSIG, REVKEYSIG or ERRSIG will be emitted"). "GOODSIG" alone is one signature, good, by a key neither expired
# nor revoked; a signature by a key the keyring lacks is ERRSIG.
signature_results() {
    grep -oE '^\[GNUPG:\] (GOODSIG|BADSIG|EXPSIG|EXPKEYSIG|REVKEYSIG|ERRSIG) ' <<<"$1" | cut -d' ' -f2 | paste -sd' ' ||
        true
}

# verify_package WORK PACKAGE: whether WORK/package.sig is exactly one good signature of PACKAGE by the pinned key or
# one of its subkeys (VALIDSIG's tenth field is the signing key's primary fingerprint, DETAILS: "PRIMARY-KEY-FPR is
# the fingerprint of the primary key"), and gpg exits 0 (it does not for data after the signature, or beside it).
verify_package() {
    local work=$1 package=$2 status code=0 results
    status=$(gpg --batch --homedir "$work/gnupg" --status-fd 1 --verify "$work/package.sig" "$package" 2>/dev/null) ||
        code=$?
    results=$(signature_results "$status")
    if [ "$code" -ne 0 ] || [ "$results" != GOODSIG ] ||
        ! grep -Eq "^\[GNUPG:\] VALIDSIG ([^ ]+ ){9}$KEY_FINGERPRINT\$" <<<"$status"; then
        log "the CloudWatch agent package's signature is not Amazon's: one good signature by key $KEY_FINGERPRINT is" \
            "required, gpg found ${results:-none} (exit $code): not installed"
        return 1
    fi
}

installed() {
    local version
    version=$(dpkg-query -W -f='${Version}' amazon-cloudwatch-agent 2>/dev/null) || return 1
    case $version in "$AGENT_VERSION" | "$AGENT_VERSION"-*) return 0 ;; *) return 1 ;; esac
}

install_agent() { # work: an empty scratch directory
    local work=$1 arch package
    arch=$(dpkg --print-architecture) # amd64 or arm64 (Graviton): Amazon publishes both for Ubuntu
    package=$work/amazon-cloudwatch-agent.deb
    fetch "$KEY_URL" "$work/key.gpg"
    fetch "$DOWNLOAD/ubuntu/$arch/$AGENT_VERSION/amazon-cloudwatch-agent.deb" "$package"
    fetch "$DOWNLOAD/ubuntu/$arch/$AGENT_VERSION/amazon-cloudwatch-agent.deb.sig" "$work/package.sig"
    if ! pinned_keyring "$work"; then
        log "$KEY_URL does not hold Amazon's key $KEY_FINGERPRINT: not installed"
        return 1
    fi
    verify_package "$work" "$package" || return 1
    apt-get install -y -q -o DPkg::Lock::Timeout=600 "$package"
    log "installed the CloudWatch agent $AGENT_VERSION ($arch)"
}

WORK="" # the install's scratch directory, removed on exit (a global: the EXIT trap runs after main returns)
trap 'rm -rf "$WORK"' EXIT

main() {
    if ! installed; then
        WORK=$(mktemp -d)
        install_agent "$WORK"
    fi
    "$CTL" -a fetch-config -m ec2 -s -c "file:$CONFIG"
    log "the CloudWatch agent runs with $CONFIG"
}

main "$@"
