#!/bin/bash
# inferstack: install and configure the Amazon CloudWatch agent (inferstack-agent.service runs this as root).
#
# A pinned agent version, the .deb from Amazon's download bucket, checked against its detached signature made by
# Amazon's CloudWatch agent key, whose fingerprint is pinned here ("Verifying the signature of the CloudWatch agent
# package", CloudWatch User Guide). Then the configuration the bundle wrote (bootstrap/agents/aws.py) is loaded.
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

installed() {
    local version
    version=$(dpkg-query -W -f='${Version}' amazon-cloudwatch-agent 2>/dev/null) || return 1
    case $version in "$AGENT_VERSION" | "$AGENT_VERSION"-*) return 0 ;; *) return 1 ;; esac
}

install_agent() { # work: an empty scratch directory
    local work=$1 arch package status
    arch=$(dpkg --print-architecture) # amd64 or arm64 (Graviton): Amazon publishes both for Ubuntu
    package=$work/amazon-cloudwatch-agent.deb
    fetch "$KEY_URL" "$work/key.gpg"
    fetch "$DOWNLOAD/ubuntu/$arch/$AGENT_VERSION/amazon-cloudwatch-agent.deb" "$package"
    fetch "$DOWNLOAD/ubuntu/$arch/$AGENT_VERSION/amazon-cloudwatch-agent.deb.sig" "$work/package.sig"
    mkdir -m 0700 "$work/gnupg"
    gpg --batch --quiet --homedir "$work/gnupg" --import "$work/key.gpg"
    # A good signature by the pinned key only: VALIDSIG's last field is the signing key's primary fingerprint, and
    # GOODSIG (not REVKEYSIG or EXPKEYSIG) says that key is neither revoked nor expired.
    status=$(gpg --batch --homedir "$work/gnupg" --status-fd 1 --verify "$work/package.sig" "$package" 2>/dev/null) ||
        status=""
    if ! grep -Eq "^\[GNUPG:\] VALIDSIG .* $KEY_FINGERPRINT\$" <<<"$status" ||
        ! grep -q '^\[GNUPG:\] GOODSIG ' <<<"$status"; then
        log "the CloudWatch agent package's signature is not Amazon's (key $KEY_FINGERPRINT): not installed"
        return 1
    fi
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
