#!/bin/bash
# inferstack boot: metadata firewall -> driver -> runtime -> gateway -> model sync -> service -> model load, the model
# sync running beside the runtime's and the gateway's installs (and, when the runtime streams the weights from the
# bucket, MODEL_LOADING=stream, beside the service and the load too: the gateway opens only once the sync has verified
# them).
#
# Runs at every boot as inferstack-boot.service (cloud-init only writes the loader and starts it once; the loader,
# fetch_bundle.py, installed this script and the units from the bundle just before). Every
# phase looks before it acts, so a second run on a booted server changes nothing. One line per phase, with
# its duration, goes to the journal (journalctl -u inferstack-boot) and to /var/log/inferstack/boot.log:
#
#   inferstack phase=model_sync status=ok duration_s=41.2 detail="..."
#
# and one machine-readable line, which the plan's cold-start estimate names the same way (sizing/coldstart.py reads
# them back with parse_phase_lines); vm_boot is the kernel's start until this script's first run after it:
#
#   inferstack-phase {"phase":"model_sync","status":"ok","start":1764590000.123,"end":1764590041.323,"seconds":41.2}
#
# `boot.sh` runs all phases; `boot.sh --phase NAME` runs one (for debugging).
# shellcheck disable=SC2153  # upper-case settings come from bootstrap.env, read by load_settings below
set -euo pipefail

CONFIG=${INFERSTACK_CONFIG:-/etc/inferstack/bootstrap.env}
LIB_DIR=/usr/local/lib/inferstack
STATE_DIR=/var/lib/inferstack
LOG_DIR=/var/log/inferstack
RUN_DIR=/run/inferstack-boot # per-run scratch (phase results): not persistent, so a re-run leaves no trace
MODEL_ENV=/etc/inferstack/model.env
VENV=/opt/inferstack/venv
GATEWAY=inferstack-gateway.service
GATEWAY_CONFIG=/etc/inferstack/gateway.conf
AGENT_UNIT=inferstack-agent.service # telemetry.AGENT_UNIT: the cloud's monitoring agent, when the bundle has it
INTERRUPTION_UNIT=inferstack-interruption.service # interruption.UNIT: the spot interruption watcher, if bundled
REPLICA_ENV=/etc/inferstack/replica.env # replica.REPLICA_ENV: this server's place in a replica across servers
RAY_WORKER_UNIT=inferstack-ray-worker.service # replica.RAY_UNIT, a worker's
REPLICA_WATCH_UNIT=inferstack-replica-watch.service # replica.WATCH_UNIT: the head's watch over its workers
RAY_HEAD_UNIT=inferstack-ray-head.service # replica.RAY_UNIT, the head's
REBOOT_REQUESTED=100
IPV6_STACK=/proc/net/if_inet6 # present when the kernel has IPv6
RESOLV_CONF=/etc/resolv.conf

# Settings are data, never code: each line is KEY=VALUE with a value of a few safe characters, set as a plain
# variable. A line of any other shape stops the boot.
SETTING_PATTERN='^([A-Z][A-Z0-9_]*)=([][A-Za-z0-9._:/@+=,-]*)$'
load_settings() {
    local line
    while IFS= read -r line || [ -n "$line" ]; do
        case "$line" in '' | '#'*) continue ;; esac
        if ! [[ "$line" =~ $SETTING_PATTERN ]]; then
            echo "inferstack: $CONFIG: not a KEY=VALUE setting; refusing to boot" >&2
            exit 2
        fi
        printf -v "${BASH_REMATCH[1]}" '%s' "${BASH_REMATCH[2]}"
    done <"$CONFIG"
}
load_settings
MODEL_LOADING=${MODEL_LOADING:-download} # download, or stream: the runtime reads the weights from the bucket itself
# The model processes' units and loopback ports (several when the plan runs several per server), as word lists.
IFS=, read -r -a SERVICES <<<"$RUNTIME_UNITS"
IFS=, read -r -a RUNTIME_PORT_LIST <<<"$RUNTIME_PORTS"
REPLICA_HEAD=${REPLICA_HEAD:-} # set for a replica across servers (bootstrap/replica.py); its role is phase_replica's
REPLICA_ROLE=""
# This server's role in its replica, as phase_replica wrote it; a worker serves nothing itself: its Ray node only.
read_replica_role() {
    [ -f "$REPLICA_ENV" ] || return 0
    REPLICA_ROLE=$(sed -n 's/^REPLICA_ROLE=//p' "$REPLICA_ENV")
    [ "$REPLICA_ROLE" != worker ] || SERVICES=("$RAY_WORKER_UNIT")
}
[ -z "$REPLICA_HEAD" ] || read_replica_role

log() { printf '%s inferstack %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"; }
# detail: the phase's one-line result, repeated in its summary line
detail() { printf '%s' "$*" >"$RUN_DIR/${PHASE:-boot}.detail"; log "$*"; }
fail() { detail "ERROR: $*"; exit 1; }
now_s() { date +%s.%N; }
elapsed_s() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }'; }
# phase_record NAME STATUS START END: the phase's machine-readable line. NAME and STATUS are fixed words of this
# script, START and END numbers from now_s: no other text reaches the JSON.
phase_record() {
    awk -v phase="$1" -v status="$2" -v start="$3" -v end="$4" 'BEGIN {
        printf "inferstack-phase {\"phase\":\"%s\",\"status\":\"%s\",\"start\":%.3f,\"end\":%.3f,\"seconds\":%.1f}\n",
            phase, status, start, end, end - start }'
}
# The machine's boot until now, once per boot (RUN_DIR is under /run: a reboot empties it; a later run of this script
# by hand logs nothing). The provider's provisioning before the kernel starts is not visible from here.
record_vm_boot() {
    local now uptime
    [ -f "$RUN_DIR/vm-boot-recorded" ] && return 0
    touch "$RUN_DIR/vm-boot-recorded"
    now=$(now_s)
    read -r uptime _ </proc/uptime
    phase_record vm_boot ok "$(awk -v a="$now" -v b="$uptime" 'BEGIN { printf "%.3f", a - b }')" "$now"
}

#### helpers ####

require_apt() {
    command -v apt-get >/dev/null 2>&1 ||
        fail "this step installs packages with apt-get; use an Ubuntu 22.04/24.04 or Debian 12 image (or a driver-ready image)"
}

is_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# apt-get with retries; waits for the dpkg lock that unattended-upgrades holds on a fresh server.
apt_get() {
    local attempt
    for attempt in 1 2 3 4 5; do
        if DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 "$@"; then return 0; fi
        log "apt-get $1 failed (attempt $attempt/5); retrying in $((attempt * 10))s"
        sleep $((attempt * 10))
    done
    fail "apt-get $* kept failing; check the network egress to the package mirrors"
}

apt_install() {
    local missing=() package
    for package in "$@"; do is_installed "$package" || missing+=("$package"); done
    [ "${#missing[@]}" -eq 0 ] && return 0
    log "installing ${missing[*]}"
    apt_get update
    apt_get install -y --no-install-recommends "${missing[@]}"
}

retry() {
    local attempt
    for attempt in 1 2 3 4 5; do
        if "$@"; then return 0; fi
        log "'$*' failed (attempt $attempt/5); retrying in $((attempt * 5))s"
        sleep $((attempt * 5))
    done
    return 1
}

#### phase: metadata_firewall ####

# iptables_ensure TOOL CHAIN RULE...: puts the rule first in the chain of TOOL (iptables or ip6tables) unless the chain
# has it already.
iptables_ensure() {
    local tool=$1 chain=$2
    shift 2
    "$tool" -w -C "$chain" "$@" 2>/dev/null || "$tool" -w -I "$chain" 1 "$@"
}

# The runtime never reaches the instance metadata server (METADATA_ADDRESSES: clouds.py metadata_addresses), on every
# cloud and in both install modes: session tokens (AWS IMDSv2, Alibaba's hardened mode) stop an SSRF, not code running
# on the server, which can ask for a token itself. Only root may open the HTTP port of those addresses: a non-root
# process (a native runtime runs as RUNTIME_USER; the gateway's workers) is refused, even one that left the runtime's
# unit, and so is every container on Docker's bridge. Other ports stay open: Google's metadata
# server is also the VM's DNS resolver. A native runtime's unit is also denied the addresses outright
# (IPAddressDeny=, render.py), where the kernel supports it. The boot programs, the secret fetch and the monitoring
# agents run as root. Rules do not survive a reboot: this phase runs first at every boot, and again before each
# runtime unit starts (ExecStartPre), so the runtime never runs without them.
phase_metadata_firewall() {
    local addresses address reached=() scope="non-root processes"
    IFS=, read -r -a addresses <<<"$METADATA_ADDRESSES"
    command -v iptables >/dev/null 2>&1 || { require_apt; apt_install iptables; }
    exec 9>/run/inferstack-metadata-firewall.lock # the boot and the runtime units' starts may run this at once
    flock 9
    for address in "${addresses[@]}"; do
        if [[ $address == *:* ]]; then
            [ -e "$IPV6_STACK" ] || continue # a kernel without IPv6 reaches no IPv6 address
            iptables_ensure ip6tables OUTPUT -d "$address/128" -p tcp --dport 80 -m owner ! --uid-owner 0 \
                -j REJECT --reject-with tcp-reset
            reached+=("[$address]:80")
        else
            iptables_ensure iptables OUTPUT -d "$address/32" -p tcp --dport 80 -m owner ! --uid-owner 0 \
                -j REJECT --reject-with tcp-reset
            reached+=("$address:80")
        fi
    done
    if [ "$INSTALL_MODE" = container ]; then
        # Containers on Docker's bridge are forwarded, not local: DOCKER-USER is the chain Docker leaves to us
        # (created here when Docker is not installed yet; Docker keeps its rules and adds its own after them). IPv4
        # only: the bridge gives containers no IPv6 unless the daemon's configuration enables it, which boot.sh never
        # does.
        iptables -w -n -L DOCKER-USER >/dev/null 2>&1 || iptables -w -N DOCKER-USER
        for address in "${addresses[@]}"; do
            [[ $address == *:* ]] && continue
            iptables_ensure iptables DOCKER-USER -d "$address/32" -p tcp --dport 80 -j REJECT --reject-with tcp-reset
        done
        scope="$scope and containers"
    fi
    detail "only root reaches ${reached[*]} ($scope are refused; DNS stays open)$(resolver_warning "${addresses[@]}")"
}

# resolver_warning ADDRESS...: a warning when a native runtime would resolve names straight through a metadata address,
# which its unit may not reach (IPAddressDeny= covers every port); a local stub resolver (systemd-resolved's
# 127.0.0.53, as on Ubuntu) runs in a unit of its own and is not affected.
resolver_warning() {
    local address
    [ "$INSTALL_MODE" = native ] || return 0
    for address in "$@"; do
        if grep -Eq "^[[:space:]]*nameserver[[:space:]]+${address//./\\.}[[:space:]]*$" "$RESOLV_CONF" 2>/dev/null; then
            printf '; WARNING: %s names the resolver %s, which the runtime may not reach: it resolves no names' \
                "$RESOLV_CONF" "$address"
            return 0
        fi
    done
}

#### phase: driver ####

phase_driver() {
    if [ "$DEVICE" != gpu ]; then detail "cpu server: no GPU driver needed"; return 0; fi
    if nvidia-smi >/dev/null 2>&1; then
        detail "present: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)"
        return 0
    fi
    if [ -f "$STATE_DIR/driver-installed" ]; then
        modprobe nvidia 2>/dev/null && nvidia-smi >/dev/null 2>&1 && { detail "loaded after install"; return 0; }
        fail "the NVIDIA driver was installed on an earlier boot but nvidia-smi still fails; see dmesg (Secure Boot needs the Ubuntu-signed driver)"
    fi
    require_apt
    # shellcheck source=/dev/null
    . /etc/os-release
    [ "${ID:-}" = ubuntu ] || fail "no NVIDIA driver on this ${ID:-unknown} image; use a driver-ready image (docs/bootstrap.md)"
    log "no NVIDIA driver: installing nvidia-headless-${NVIDIA_DRIVER_BRANCH}-server (slow path, 5-12 min)"
    apt_install "linux-headers-$(uname -r)" "nvidia-headless-${NVIDIA_DRIVER_BRANCH}-server" \
        "nvidia-utils-${NVIDIA_DRIVER_BRANCH}-server"
    touch "$STATE_DIR/driver-installed"
    if modprobe nvidia 2>/dev/null && nvidia-smi >/dev/null 2>&1; then detail "installed and loaded"; return 0; fi
    detail "driver installed; rebooting to load it (inferstack-boot.service resumes after the reboot)"
    return "$REBOOT_REQUESTED"
}

#### phase: runtime ####

install_docker() {
    command -v docker >/dev/null 2>&1 && return 0
    require_apt
    # shellcheck source=/dev/null
    . /etc/os-release
    log "installing Docker Engine ${DOCKER_VERSION_PIN}.x from download.docker.com"
    apt_install ca-certificates curl gnupg
    install -m 0755 -d /etc/apt/keyrings
    retry curl -fsSL "https://download.docker.com/linux/${ID}/gpg" -o /etc/apt/keyrings/docker.asc
    echo "deb [arch=$(dpkg --print-architecture) signed-by=/etc/apt/keyrings/docker.asc] https://download.docker.com/linux/${ID} ${VERSION_CODENAME} stable" \
        >/etc/apt/sources.list.d/docker.list
    printf 'Package: docker-ce docker-ce-cli\nPin: version %s.*\nPin-Priority: 1001\n' "$DOCKER_VERSION_PIN" \
        >/etc/apt/preferences.d/inferstack-docker
    apt_get update
    apt_get install -y docker-ce docker-ce-cli containerd.io
    systemctl enable --now docker.service
}

install_nvidia_container_toolkit() {
    local keyring=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg version=$NVIDIA_CONTAINER_TOOLKIT_VERSION
    if ! command -v nvidia-ctk >/dev/null 2>&1; then
        require_apt
        log "installing NVIDIA Container Toolkit ${version}"
        apt_install ca-certificates curl gnupg
        retry curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey -o /tmp/nvidia-container.gpgkey
        gpg --batch --yes --dearmor -o "$keyring" /tmp/nvidia-container.gpgkey
        retry curl -fsSL https://nvidia.github.io/libnvidia-container/stable/deb/nvidia-container-toolkit.list \
            -o /tmp/nvidia-container-toolkit.list
        sed "s#deb https://#deb [signed-by=${keyring}] https://#g" /tmp/nvidia-container-toolkit.list \
            >/etc/apt/sources.list.d/nvidia-container-toolkit.list
        apt_get update
        apt_get install -y "nvidia-container-toolkit=${version}" "nvidia-container-toolkit-base=${version}" \
            "libnvidia-container-tools=${version}" "libnvidia-container1=${version}"
    fi
    if ! docker info --format '{{json .Runtimes}}' | grep -q nvidia; then
        nvidia-ctk runtime configure --runtime=docker
        systemctl restart docker.service
    fi
}

install_container_runtime() {
    install_docker
    [ "$DEVICE" = gpu ] && install_nvidia_container_toolkit
    if docker image inspect "$RUNTIME_IMAGE" >/dev/null 2>&1; then
        detail "container: $RUNTIME_IMAGE present"
        return 0
    fi
    log "pulling $RUNTIME_IMAGE"
    retry docker pull --quiet "$RUNTIME_IMAGE" || fail "cannot pull $RUNTIME_IMAGE; check egress to the registry"
    detail "container: pulled $RUNTIME_IMAGE"
}

installed_pip_version() {
    "$VENV/bin/python3" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' \
        "$PIP_DISTRIBUTION" 2>/dev/null || true
}

install_native_runtime() {
    if [ "$(installed_pip_version)" = "$PIP_VERSION" ]; then
        detail "native: $PIP_DISTRIBUTION $PIP_VERSION present in $VENV"
        return 0
    fi
    require_apt
    local packages
    IFS=, read -r -a packages <<<"$APT_PACKAGES"
    apt_install "${packages[@]}"
    [ -x "$VENV/bin/python3" ] || python3 -m venv "$VENV"
    log "pip install $PIP_REQUIREMENT (llama-cpp-python compiles llama.cpp here: minutes)"
    retry "$VENV/bin/pip" install --no-input --disable-pip-version-check "$PIP_REQUIREMENT" ||
        fail "pip install $PIP_REQUIREMENT failed; see the lines above"
    [ "$(installed_pip_version)" = "$PIP_VERSION" ] || fail "$PIP_DISTRIBUTION $PIP_VERSION not importable after install"
    detail "native: installed $PIP_DISTRIBUTION $PIP_VERSION in $VENV"
}

# The runtime runs as this unprivileged system user (no login); its home holds the runtime's caches only.
ensure_runtime_user() {
    id -u "$RUNTIME_USER" >/dev/null 2>&1 ||
        useradd --system --user-group --home-dir "$RUNTIME_HOME" --shell /usr/sbin/nologin "$RUNTIME_USER"
    [ -d "$RUNTIME_HOME" ] || install -d -o "$RUNTIME_USER" -g "$RUNTIME_USER" -m 0750 "$RUNTIME_HOME"
}

phase_runtime() {
    ensure_runtime_user
    if [ "$INSTALL_MODE" = container ]; then install_container_runtime; else install_native_runtime; fi
}

#### phase: replica ####

# A replica across servers (bootstrap/replica.py): its servers all boot this bundle, and this one is the member whose
# address its route to the head leaves from (the head's own address routes locally). Written for the Ray units.
phase_replica() {
    local self role
    self=$(ip -4 -o route get "$REPLICA_HEAD" 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
    if [ "$self" = "$REPLICA_HEAD" ]; then
        role="head"
    elif [ -n "$self" ] && [[ ",$REPLICA_WORKERS," == *",$self,"* ]]; then
        role="worker"
    else
        fail "this server (${self:-no IPv4 route to $REPLICA_HEAD}) is none of its replica's servers (head $REPLICA_HEAD, workers $REPLICA_WORKERS)"
    fi
    write_if_changed "$REPLICA_ENV" "REPLICA_SELF=$self
REPLICA_HEAD=$REPLICA_HEAD
REPLICA_ROLE=$role"
    detail "$role of a replica across servers ($self; head $REPLICA_HEAD, workers $REPLICA_WORKERS)"
}

#### phase: gateway ####

# nginx from the distribution, run by inferstack-gateway.service with /etc/inferstack/gateway.conf. The package's
# own service (the default site on port 80) is masked before the install, so it never starts.
phase_gateway() {
    if [ "$REPLICA_ROLE" = worker ]; then
        detail "none: a replica's worker serves nothing itself (the load balancer targets its head)"
        return 0
    fi
    if ! command -v nginx >/dev/null 2>&1; then
        require_apt
        systemctl mask nginx.service >/dev/null
        apt_install nginx
    fi
    if [ -n "${GATEWAY_APT_PACKAGES:-}" ]; then  # a plan with a cache: the caching path's modules
        IFS=, read -r -a gateway_packages <<<"$GATEWAY_APT_PACKAGES"
        apt_install "${gateway_packages[@]}"
    fi
    [ -f "$GATEWAY_CONFIG" ] || fail "$GATEWAY_CONFIG is missing; the bundle was not installed"
    detail "$(nginx -v 2>&1 | head -n 1) in front of 127.0.0.1:${RUNTIME_PORTS//,/ and 127.0.0.1:} on port $PORT"
}

#### phase: model_sync ####

# An instance-store NVMe disk: whole disk, no partitions, not mounted, named as the clouds name local disks.
find_local_nvme() {
    local block model name
    for block in /sys/block/nvme*n1; do
        [ -e "$block" ] || continue
        name=$(basename "$block")
        model=$(cat "$block/device/model" 2>/dev/null || true)
        case "$model" in
            *"Instance Storage"* | *nvme_card* | *EphemeralDisk*) ;;
            *) continue ;;
        esac
        [ "$(lsblk -nro NAME "/dev/$name" | wc -l)" -eq 1 ] || continue
        [ -z "$(lsblk -nro MOUNTPOINT "/dev/$name")" ] || continue
        echo "/dev/$name"
        return 0
    done
}

model_root() {
    local mount=/mnt/inferstack-nvme device
    if [ "$NVME_EXPECTED" = 1 ]; then
        if mountpoint -q /opt/dlami/nvme; then echo /opt/dlami/nvme/inferstack; return 0; fi
        if mountpoint -q "$mount"; then echo "$mount"; return 0; fi
        device=$(find_local_nvme || true)
        if [ -n "$device" ]; then
            # Instance storage is empty after a stop/start: format it only when it carries no file system.
            blkid "$device" >/dev/null 2>&1 || mkfs.ext4 -q -F -L inferstack-nvme "$device" >&2
            mkdir -p "$mount"
            mount -o noatime "$device" "$mount"
            echo "$mount"
            return 0
        fi
        log "local NVMe expected but not found; using the data disk" >&2
    fi
    echo "$STATE_DIR"
}

write_if_changed() { # path, content: rewrites the file only when its content differs, atomically (a temporary file
    # of its own: the sync and the service phase may write one file at once)
    [ -f "$1" ] && [ "$(cat "$1")" = "$2" ] && return 0
    local tmp
    tmp=$(mktemp "$1.XXXXXX")
    printf '%s\n' "$2" >"$tmp" && chmod 0644 "$tmp" && mv "$tmp" "$1"
}

triton_repository() { # model dir, root -> a Triton model repository (under root) holding the model as version 1
    local repo=$2/triton-repo model_dir=$1 kind=KIND_CPU
    [ "$DEVICE" = gpu ] && kind=KIND_GPU
    mkdir -p "$repo/$MODEL_NAME"
    ln -sfn "$model_dir" "$repo/$MODEL_NAME/1"
    if [ -f "$model_dir/config.pbtxt" ]; then
        ln -sfn "$model_dir/config.pbtxt" "$repo/$MODEL_NAME/config.pbtxt"
    else
        write_if_changed "$repo/$MODEL_NAME/config.pbtxt" "name: \"$MODEL_NAME\"
backend: \"$TRITON_BACKEND\"
default_model_filename: \"model.onnx\"
instance_group [ { kind: $kind, count: 1 } ]"
    fi
    echo "$repo"
}

# What a streaming runtime reads: the model's prefix in the bucket (vLLM's --model, in model.env). A function, not a
# setting read at the top: an image build runs the install phases with their own settings only (components/aws/
# image.py INSTALL_SETTINGS).
stream_source() { echo "s3://$MODEL_BUCKET/$MODEL_PREFIX"; }

# write_model_env DIR FILE REPO ROOT: what the runtime's unit reads (EnvironmentFile=): where the model is, and the
# runtime user's ids for the container
write_model_env() {
    write_if_changed "$MODEL_ENV" "MODEL_DIR=$1
MODEL_FILE=$2
TRITON_REPO=$3
MODEL_ROOT=$4
RUNTIME_UID=$(id -u "$RUNTIME_USER")
RUNTIME_GID=$(id -g "$RUNTIME_USER")"
}

phase_model_sync() {
    local root dest output model_dir model_file="" repo=""
    root=$(model_root)
    dest=$root/models/$MODEL_NAME # model_sync refuses any destination outside $root/models
    output=$(python3 "$LIB_DIR/model_sync.py" --cloud "$INFERSTACK_CLOUD" --region "$INFERSTACK_REGION" \
        --bucket "$MODEL_BUCKET" --prefix "$MODEL_PREFIX" --root "$root" --name "$MODEL_NAME" --workers "$SYNC_WORKERS" \
        ${MODEL_REVISION:+--revision "$MODEL_REVISION"} \
        ${STORAGE_ENDPOINT:+--endpoint "$STORAGE_ENDPOINT"} ${METADATA_ENDPOINT:+--metadata-endpoint "$METADATA_ENDPOINT"}) ||
        fail "model sync failed (exit $?); the server keeps the model it had, if any"
    model_dir=$dest/current
    case "$MODEL_FORMAT" in
        gguf)
            # the single file, or the first shard of a split model (name-00001-of-0000N.gguf)
            model_file=$(find -L "$model_dir" -name '*.gguf' | sort | head -n 1)
            [ -n "$model_file" ] || fail "no .gguf file in $MODEL_BUCKET/$MODEL_PREFIX"
            ;;
        onnx) repo=$(triton_repository "$model_dir" "$root") ;;
    esac
    if [ "$MODEL_LOADING" = stream ]; then
        # The runtime streams from the bucket (the copy here is what the sync verified): the same file as phase_service
        write_model_env "$(stream_source)" "" "" "$STATE_DIR"
    else
        write_model_env "$model_dir" "$model_file" "$repo" "$root"
    fi
    write_if_changed "$STATE_DIR/model-version" "$(readlink "$model_dir")"
    detail "$output"
}

#### phase: service ####

# (re)start UNIT when it is not running, or when what it serves changed (a new model, a new bundle)
start_or_restart() {
    local unit=$1 changed=$2
    systemctl is-enabled --quiet "$unit" || systemctl enable "$unit"
    if ! systemctl is-active --quiet "$unit"; then
        systemctl start "$unit"
        echo "started $unit"
    elif [ "$changed" = 1 ]; then
        systemctl restart "$unit"
        echo "restarted $unit"
    else
        echo "$unit already serving"
    fi
}

# What the server serves: the synced model's version, or, when the runtime streams it, the bucket's prefix (the sync is
# still under way then), and the bundle.
serving_version() {
    if [ "$MODEL_LOADING" = stream ]; then
        echo "$(stream_source) bundle=${BUNDLE_SHA256:0:16}"
    else
        echo "$(cat "$STATE_DIR/model-version") bundle=${BUNDLE_SHA256:0:16}"
    fi
}

# The gateway, and the spot interruption watcher beside it: a server that may run on spot capacity watches the cloud's
# interruption notice; on a notice the watcher makes the gateway's health path answer 503 (the load balancer drains
# it) and never stops a unit.
open_gateway() {
    local changed=$1 gateway
    gateway=$(start_or_restart "$GATEWAY" "$changed")
    # A streaming runtime's gateway is not started by systemd at boot: after a reboot the runtime streams again, and
    # nothing reaches it before this boot's sync has verified the bucket's files (phase_model_load).
    [ "$MODEL_LOADING" = stream ] && systemctl disable --quiet "$GATEWAY"
    [ -f "/etc/systemd/system/$INTERRUPTION_UNIT" ] && gateway+=", $(start_or_restart "$INTERRUPTION_UNIT" "$changed")"
    [ "$REPLICA_ROLE" = head ] && gateway+=", $(start_or_restart "$REPLICA_WATCH_UNIT" "$changed")"
    echo "$gateway"
}

phase_service() {
    local served="" serving changed=0 unit servers=() gateway
    serving=$(serving_version)
    [ -f "$STATE_DIR/served-version" ] && served=$(cat "$STATE_DIR/served-version")
    [ "$served" = "$serving" ] || changed=1
    # A streaming runtime reads the model's prefix in the bucket, not a directory here (vLLM's --model s3://bucket/
    # prefix/ with --load-format runai_streamer); the sync, under way, writes the same file when it ends.
    if [ "$MODEL_LOADING" = stream ]; then write_model_env "$(stream_source)" "" "" "$STATE_DIR"; fi
    systemctl daemon-reload
    # A replica's head: its Ray node first, started by the boot after the sync (never by itself at boot: a container
    # started before the model's disk is mounted would not see it)
    [ "$REPLICA_ROLE" = head ] && servers+=("$(start_or_restart "$RAY_HEAD_UNIT" "$changed")")
    for unit in "${SERVICES[@]}"; do
        servers+=("$(start_or_restart "$unit" "$changed")")
    done
    if [ "$REPLICA_ROLE" = worker ]; then
        gateway="no gateway: the replica's head serves" # the load balancer targets heads only
    elif [ "$MODEL_LOADING" = stream ]; then
        gateway="$GATEWAY once the sync has verified the weights" # phase_model_load opens it
        printf '%s' "$changed" >"$RUN_DIR/gateway-changed"
    else
        gateway=$(open_gateway "$changed")
    fi
    write_if_changed "$STATE_DIR/served-version" "$serving"
    detail "${servers[*]}, $gateway ($serving)"
}

#### phase: model_load ####

# healthy URL [UNIT...]: whether URL answers 200; fails the phase when one of the units has stopped
healthy() {
    local url=$1 unit
    shift
    curl -fsS -o /dev/null --max-time 5 "$url" 2>/dev/null && return 0
    for unit in "$@"; do
        systemctl is-active --quiet "$unit" || fail "$unit is not running; see journalctl -u $unit"
    done
    [ "$SECONDS" -lt "$DEADLINE" ] || fail "$url not healthy after ${READY_TIMEOUT_S}s; see journalctl -u ${1:-$GATEWAY}"
    return 1
}

phase_model_load() {
    local url="http://127.0.0.1:${PORT}${HEALTH_PATH}" i
    DEADLINE=$((SECONDS + READY_TIMEOUT_S))
    if [ "$REPLICA_ROLE" = worker ]; then # joined once its Ray node listens: `ray start` starts it only then
        until (exec 3<>"/dev/tcp/127.0.0.1/$RAY_NODE_MANAGER_PORT") 2>/dev/null; do
            case "$(systemctl is-active "$RAY_WORKER_UNIT" || true)" in # active, or activating between its restarts
                failed | inactive) fail "$RAY_WORKER_UNIT is not running; see journalctl -u $RAY_WORKER_UNIT" ;;
            esac
            [ "$SECONDS" -lt "$DEADLINE" ] || fail "not joined to the replica's head $REPLICA_HEAD after ${READY_TIMEOUT_S}s"
            sleep 2
        done
        write_if_changed "$STATE_DIR/ready" "model=$MODEL_NAME replica worker of $REPLICA_HEAD"
        detail "Ray worker joined to the replica whose head is $REPLICA_HEAD"
        return 0
    fi
    for i in "${!SERVICES[@]}"; do # every model process on its own port: the gateway may send each a request
        until healthy "http://127.0.0.1:${RUNTIME_PORT_LIST[$i]}${HEALTH_PATH}" "${SERVICES[$i]}"; do sleep 2; done
    done
    if [ "$MODEL_LOADING" = stream ]; then
        # The runtime answers from the weights it streamed; nobody else reaches it before the sync has checked the
        # bucket's files against their manifest (sha256), here, once the sync's own process has ended.
        until [ -f "$RUN_DIR/model_sync.rc" ]; do
            [ "$SECONDS" -lt "$DEADLINE" ] || fail "the model sync did not end within ${READY_TIMEOUT_S}s"
            sleep 2
        done
        [ "$(cat "$RUN_DIR/model_sync.rc")" -eq 0 ] || fail "the model sync failed: the gateway stays closed"
        open_gateway "$(cat "$RUN_DIR/gateway-changed" 2>/dev/null || echo 1)" >/dev/null
    fi
    until healthy "$url" "$GATEWAY" "${SERVICES[@]}"; do sleep 2; done # through the gateway
    write_if_changed "$STATE_DIR/ready" "model=$MODEL_NAME version=$(cat "$STATE_DIR/served-version") url=$url"
    detail "healthy at $url"
}

#### main ####

# The cloud's monitoring agent is installed by a unit of its own (bootstrap/telemetry.py), started once the driver
# phase is done and never waited for: it does not delay readiness, and a server whose agent fails still serves.
start_agent() {
    [ -f "/etc/systemd/system/$AGENT_UNIT" ] || return 0
    systemctl daemon-reload
    if systemctl start --no-block "$AGENT_UNIT"; then
        log "started $AGENT_UNIT (the cloud's monitoring agent: journalctl -u ${AGENT_UNIT%.service})"
    else
        log "WARNING: cannot start $AGENT_UNIT; the server serves without its monitoring agent"
    fi
}

# A fleet's group holds each new server in a lifecycle hook until the server completes the hook's action: an Alibaba
# fleet's (components/alibaba/fleet.py), out of the load balancer; an AWS group with a warm pool's (components/aws/
# fleet.py; LIFECYCLE_HOOK names the hook), in the pool until prepared or out of service until ready. This is the
# boot's last step, once the model answers (or once prepared for the pool). Any other server finds no action to
# complete. One that cannot complete it fails the boot: the hook releases it at its timeout, and the group starts
# another.
complete_lifecycle_action() {
    local output hook=()
    case "$INFERSTACK_CLOUD" in
        alibaba) ;;
        aws) [ -n "${LIFECYCLE_HOOK:-}" ] || return 0; hook=(--cloud aws --hook "$LIFECYCLE_HOOK") ;;
        *) return 0 ;;
    esac
    if output=$(python3 "$LIB_DIR/cloud_access.py" complete-lifecycle-action --region "$INFERSTACK_REGION" \
        "${hook[@]}" ${METADATA_ENDPOINT:+--metadata-endpoint "$METADATA_ENDPOINT"} 2>&1); then
        log "lifecycle: $output"
    else
        log "lifecycle: FAILED: $output"
        return 1
    fi
}

# Where the AWS group takes this server (IMDS autoscaling/target-lifecycle-state): Warmed:Stopped (or Warmed:Running,
# Warmed:Hibernated) for a server launched into the warm pool, which is prepared and stopped, and boots again, from
# the top, when it leaves the pool; InService otherwise; "" outside a group with a warm pool, or when the metadata
# server cannot tell (then the boot runs to the end: a server that serves before it stops is merely early).
target_lifecycle_state() {
    [ "$INFERSTACK_CLOUD" = aws ] && [ -n "${LIFECYCLE_HOOK:-}" ] || return 0
    python3 "$LIB_DIR/cloud_access.py" target-lifecycle-state \
        ${METADATA_ENDPOINT:+--metadata-endpoint "$METADATA_ENDPOINT"} ||
        log "WARNING: cannot read the target lifecycle state; booting to service" >&2
}

run_phase() { # name: runs the phase in its own process (so errexit applies inside) and logs its lines
    local name=$1 started ended detail="" code status=ok
    started=$(now_s)
    rm -f "$RUN_DIR/$name.rc" "$RUN_DIR/$name.detail"
    bash "$0" --phase "$name" || true
    code=$(cat "$RUN_DIR/$name.rc" 2>/dev/null || echo 1)
    [ -f "$RUN_DIR/$name.detail" ] && detail=$(cat "$RUN_DIR/$name.detail")
    [ "$code" -eq 0 ] || status=failed
    [ "$code" -eq "$REBOOT_REQUESTED" ] && status=reboot
    ended=$(now_s)
    log "phase=$name status=$status duration_s=$(elapsed_s "$started") detail=\"${detail//\"/\'}\""
    phase_record "$name" "$status" "$started" "$ended"
    printf '%s=%ss\n' "$name" "$(elapsed_s "$started")" >>"$RUN_DIR/durations"
    return "$code"
}

# step NAME: a phase of the boot in order; stops the boot when it fails, reboots when it asks to
step() {
    local code=0
    run_phase "$1" || code=$?
    if [ "$code" -eq "$REBOOT_REQUESTED" ]; then
        log "summary: rebooting to finish the driver install ($(durations))"
        systemctl reboot
        exit 0
    fi
    [ "$code" -eq 0 ] && return 0
    log "summary: FAILED in phase $1 after $(elapsed_s "$BOOT_STARTED")s ($(durations)); see the lines above"
    exit 1
}

durations() { paste -sd ' ' "$RUN_DIR/durations" 2>/dev/null || true; }

# The model sync in its own process beside the phases that follow it (its lines go to the same log); its result is
# $RUN_DIR/model_sync.rc once it has ended (run_phase), which wait_for_sync and phase_model_load read.
start_sync() {
    rm -f "$RUN_DIR/model_sync.rc"
    run_phase model_sync &
    SYNC_PID=$!
}
wait_for_sync() {
    wait "$SYNC_PID" 2>/dev/null || true
    [ "$(cat "$RUN_DIR/model_sync.rc" 2>/dev/null || echo 1)" -eq 0 ] && return 0
    log "summary: FAILED in phase model_sync after $(elapsed_s "$BOOT_STARTED")s ($(durations)); see the lines above"
    exit 1
}

main() {
    local state
    BOOT_STARTED=$(now_s)
    rm -f "$RUN_DIR/durations"
    record_vm_boot
    log "boot start: $RUNTIME ($INSTALL_MODE) on $DEVICE, model $MODEL_NAME from $INFERSTACK_CLOUD $MODEL_BUCKET/$MODEL_PREFIX"
    step metadata_firewall
    if [ -n "$REPLICA_HEAD" ]; then # which member of its replica this server is: milliseconds, not in the estimate
        run_phase replica || {
            log "summary: FAILED in phase replica after $(elapsed_s "$BOOT_STARTED")s; see the lines above"
            exit 1
        }
        read_replica_role
    fi
    step driver
    start_agent # after the driver phase, the boot's last reboot point: a reboot never cuts the agent's install
    ensure_runtime_user # the sync writes the runtime user's ids into model.env
    start_sync
    step runtime
    step gateway
    # The runtime loads from the synced disk unless it streams the weights; then the load's phase waits for the
    # sync before it opens the gateway (phase_model_load).
    [ "$MODEL_LOADING" = stream ] || wait_for_sync
    step service
    step model_load
    [ "$MODEL_LOADING" = stream ] && wait_for_sync # it ended already: the load's phase waited for it
    state=$(target_lifecycle_state)
    if [[ "$state" == Warmed:* ]]; then
        # Prepared for the warm pool, the runtime started once (its compile caches are on the disk now): stopped
        # again, it starts when the server leaves the pool and boots from the top.
        systemctl disable --now "${SERVICES[@]}" "$GATEWAY" >/dev/null 2>&1 || true
        log "summary: prepared for the warm pool ($state) in $(elapsed_s "$BOOT_STARTED")s ($(durations)); the runtime and gateway start again when it leaves the pool"
    else
        log "summary: ready in $(elapsed_s "$BOOT_STARTED")s ($(durations))"
    fi
    complete_lifecycle_action || exit 1
}

if [ "${1:-}" = --phase ]; then
    mkdir -p "$STATE_DIR" "$RUN_DIR"
    PHASE=$2
    trap 'echo $? >"$RUN_DIR/$PHASE.rc"' EXIT
    case "$2" in
        metadata_firewall) phase_metadata_firewall ;;
        driver) phase_driver ;;
        runtime) phase_runtime ;;
        gateway) phase_gateway ;;
        model_sync) phase_model_sync ;;
        service) phase_service ;;
        model_load) phase_model_load ;;
        replica) phase_replica ;;
        *) fail "unknown phase $2 (metadata_firewall, replica, driver, runtime, gateway, model_sync, service, model_load)" ;;
    esac
    exit 0
fi
mkdir -p "$STATE_DIR" "$LOG_DIR" "$RUN_DIR"
set +e # the boot's status is main's, even if the log file cannot be written
main 2>&1 | tee -a "$LOG_DIR/boot.log"
exit "${PIPESTATUS[0]}"
