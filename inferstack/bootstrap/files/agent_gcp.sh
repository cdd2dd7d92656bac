#!/bin/bash
# inferstack: install and configure Google Cloud's Ops Agent (inferstack-agent.service runs this as root).
#
# A pinned Ops Agent version from Google's apt repository (packages.cloud.google.com, suite
# google-cloud-ops-agent-<codename>-<major>, as Google's add-google-cloud-ops-agent-repo.sh names it), trusted
# through a keyring that holds only Google's repository keys whose fingerprints are pinned here: apt checks the
# repository's signature with them, and a key Google rotates in later makes the install fail, never trust it blindly.
# Then the configuration the bundle wrote (bootstrap/agents/gcp.py) replaces the agent's own. Idempotent: the pinned
# version installed and the same configuration in place change nothing. Runs beside boot.sh's phases, which use apt
# too: apt waits for their lock.
set -euo pipefail

AGENT_VERSION=2.70.0 # GoogleCloudPlatform/ops-agent release tag 2.70.0
REPO_MAJOR=2
KEY_URL=https://packages.cloud.google.com/apt/doc/apt-key.gpg
# The keys in apt-key.gpg (gpg --show-keys, kubernetes/release#3102): "Rapture Automatic Signing Key" and
# "Artifact Registry Repository Signer". Verify against the current file before raising AGENT_VERSION.
KEY_FINGERPRINTS=(A362B822F6DEDC652817EA46B53DC80D13EDEF05 35BAA0B33E9EB396F59CA838C0BA5CE6DC6315A3)
KEYRING=/usr/share/keyrings/inferstack-google-cloud-ops-agent.gpg
SOURCE=/etc/apt/sources.list.d/inferstack-google-cloud-ops-agent.list
BUNDLED_CONFIG=/etc/inferstack/ops-agent.yaml # bootstrap/agents/gcp.py CONFIG_PATH
CONFIG=/etc/google-cloud-ops-agent/config.yaml
APT=(apt-get -q -o DPkg::Lock::Timeout=600)

log() { echo "inferstack-agent: $*"; }

installed() {
    local version
    version=$(dpkg-query -W -f='${Version}' google-cloud-ops-agent 2>/dev/null) || return 1
    case $version in "$AGENT_VERSION" | "$AGENT_VERSION"~* | "$AGENT_VERSION"-*) return 0 ;; *) return 1 ;; esac
}

trusted_keyring() { # work: an empty scratch directory; writes KEYRING with the pinned keys only
    local work=$1 fingerprint
    mkdir -m 0700 "$work/gnupg"
    curl --proto '=https' --tlsv1.2 -fsSL --connect-timeout 20 --max-time 600 --retry 5 --retry-delay 5 \
        -o "$work/apt-key.gpg" "$KEY_URL"
    gpg --batch --quiet --homedir "$work/gnupg" --import "$work/apt-key.gpg"
    for fingerprint in "${KEY_FINGERPRINTS[@]}"; do
        if ! gpg --batch --homedir "$work/gnupg" --with-colons --list-keys "$fingerprint" >/dev/null 2>&1; then
            log "Google's apt key $fingerprint is not in $KEY_URL: not installed (check the pinned fingerprints)"
            return 1
        fi
    done
    gpg --batch --homedir "$work/gnupg" --export "${KEY_FINGERPRINTS[@]}" >"$work/keyring.gpg"
    install -m 0644 "$work/keyring.gpg" "$KEYRING"
}

install_agent() { # work: an empty scratch directory
    local codename version
    codename=$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release)
    trusted_keyring "$1"
    echo "deb [signed-by=$KEYRING] https://packages.cloud.google.com/apt google-cloud-ops-agent-$codename-$REPO_MAJOR main" \
        >"$SOURCE"
    "${APT[@]}" update -o Dir::Etc::sourcelist="$SOURCE" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0
    # The repository's full version string of the pinned release (e.g. 2.70.0~ubuntu22.04): that one, or none.
    version=$(apt-cache madison google-cloud-ops-agent | awk -v want="$AGENT_VERSION" \
        '$3 == want || index($3, want "~") == 1 || index($3, want "-") == 1 { print $3; exit }')
    if [ -z "$version" ]; then
        log "google-cloud-ops-agent $AGENT_VERSION is not in google-cloud-ops-agent-$codename-$REPO_MAJOR"
        return 1
    fi
    DEBIAN_FRONTEND=noninteractive "${APT[@]}" install -y -o Dpkg::Options::=--force-confold \
        "google-cloud-ops-agent=$version"
    log "installed the Ops Agent $AGENT_VERSION ($codename)"
}

WORK="" # the install's scratch directory, removed on exit (a global: the EXIT trap runs after main returns)
trap 'rm -rf "$WORK"' EXIT

main() {
    if ! installed; then
        WORK=$(mktemp -d)
        install_agent "$WORK"
    fi
    if ! cmp -s "$BUNDLED_CONFIG" "$CONFIG"; then
        install -m 0644 "$BUNDLED_CONFIG" "$CONFIG"
        systemctl restart google-cloud-ops-agent
    fi
    log "the Ops Agent runs with $CONFIG"
}

main "$@"
