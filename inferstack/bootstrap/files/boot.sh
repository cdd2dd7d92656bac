#!/bin/bash
# inferstack boot: metadata firewall -> driver -> runtime -> gateway -> model sync -> service -> model load.
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
# The model processes' units and loopback ports (several when the plan runs several per server), as word lists.
IFS=, read -r -a SERVICES <<<"$RUNTIME_UNITS"
IFS=, read -r -a RUNTIME_PORT_LIST <<<"$RUNTIME_PORTS"

log() { printf '%s inferstack %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"; }
# detail: the phase's one-line result, repeated in its summary line
detail() { printf '%s' "$*" >"$RUN_DIR/phase-detail"; log "$*"; }
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

#### phase: gateway ####

# nginx from the distribution, run by inferstack-gateway.service with /etc/inferstack/gateway.conf. The package's
# own service (the default site on port 80) is masked before the install, so it never starts.
phase_gateway() {
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

write_if_changed() { # path, content: rewrites the file only when its content differs
    [ -f "$1" ] && [ "$(cat "$1")" = "$2" ] && return 0
    printf '%s\n' "$2" >"$1.tmp" && mv "$1.tmp" "$1"
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
    write_if_changed "$MODEL_ENV" "MODEL_DIR=$model_dir
MODEL_FILE=$model_file
TRITON_REPO=$repo
MODEL_ROOT=$root
RUNTIME_UID=$(id -u "$RUNTIME_USER")
RUNTIME_GID=$(id -g "$RUNTIME_USER")"
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

phase_service() {
    local version served="" serving changed=0 unit servers=() gateway
    version=$(cat "$STATE_DIR/model-version")
    serving="$version bundle=${BUNDLE_SHA256:0:16}"
    [ -f "$STATE_DIR/served-version" ] && served=$(cat "$STATE_DIR/served-version")
    [ "$served" = "$serving" ] || changed=1
    systemctl daemon-reload
    for unit in "${SERVICES[@]}"; do
        servers+=("$(start_or_restart "$unit" "$changed")")
    done
    gateway=$(start_or_restart "$GATEWAY" "$changed")
    # A server that may run on spot capacity watches the cloud's interruption notice; on a notice the watcher makes the
    # gateway's health path answer 503 (the load balancer drains it) and never stops a unit.
    [ -f "/etc/systemd/system/$INTERRUPTION_UNIT" ] && gateway+=", $(start_or_restart "$INTERRUPTION_UNIT" "$changed")"
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
    for i in "${!SERVICES[@]}"; do # every model process on its own port: the gateway may send each a request
        until healthy "http://127.0.0.1:${RUNTIME_PORT_LIST[$i]}${HEALTH_PATH}" "${SERVICES[$i]}"; do sleep 2; done
    done
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

# An Alibaba fleet's scaling group holds each new server in a lifecycle hook, out of the load balancer, until the
# server completes the hook's action (components/alibaba/fleet.py); this is the boot's last step, once the model
# answers. Any other server finds no action to complete. One that cannot complete it fails the boot: the hook releases
# it at its timeout, and the group starts another.
complete_lifecycle_action() {
    [ "$INFERSTACK_CLOUD" = alibaba ] || return 0
    local output
    if output=$(python3 "$LIB_DIR/cloud_access.py" complete-lifecycle-action --region "$INFERSTACK_REGION" \
        ${METADATA_ENDPOINT:+--metadata-endpoint "$METADATA_ENDPOINT"} 2>&1); then
        log "lifecycle: $output"
    else
        log "lifecycle: FAILED: $output"
        return 1
    fi
}

run_phase() { # name: runs the phase in its own process (so errexit applies inside) and logs its lines
    local name=$1 started ended detail="" code status=ok
    started=$(now_s)
    rm -f "$RUN_DIR/phase-rc" "$RUN_DIR/phase-detail"
    bash "$0" --phase "$name" || true
    code=$(cat "$RUN_DIR/phase-rc" 2>/dev/null || echo 1)
    [ -f "$RUN_DIR/phase-detail" ] && detail=$(cat "$RUN_DIR/phase-detail")
    [ "$code" -eq 0 ] || status=failed
    [ "$code" -eq "$REBOOT_REQUESTED" ] && status=reboot
    ended=$(now_s)
    log "phase=$name status=$status duration_s=$(elapsed_s "$started") detail=\"${detail//\"/\'}\""
    phase_record "$name" "$status" "$started" "$ended"
    DURATIONS+=("$name=$(elapsed_s "$started")s")
    return "$code"
}

main() {
    local started phase code
    started=$(now_s)
    DURATIONS=()
    record_vm_boot
    log "boot start: $RUNTIME ($INSTALL_MODE) on $DEVICE, model $MODEL_NAME from $INFERSTACK_CLOUD $MODEL_BUCKET/$MODEL_PREFIX"
    for phase in metadata_firewall driver runtime gateway model_sync service model_load; do
        code=0
        run_phase "$phase" || code=$?
        if [ "$code" -eq "$REBOOT_REQUESTED" ]; then
            log "summary: rebooting to finish the driver install (${DURATIONS[*]})"
            systemctl reboot
            exit 0
        fi
        if [ "$code" -ne 0 ]; then
            log "summary: FAILED in phase $phase after $(elapsed_s "$started")s (${DURATIONS[*]}); see the lines above"
            exit 1
        fi
        # After the driver phase, the boot's last reboot point: a reboot never cuts the agent's package install.
        [ "$phase" = driver ] && start_agent
    done
    log "summary: ready in $(elapsed_s "$started")s (${DURATIONS[*]})"
    complete_lifecycle_action || exit 1
}

if [ "${1:-}" = --phase ]; then
    mkdir -p "$STATE_DIR" "$RUN_DIR"
    trap 'echo $? >"$RUN_DIR/phase-rc"' EXIT
    case "$2" in
        metadata_firewall) phase_metadata_firewall ;;
        driver) phase_driver ;;
        runtime) phase_runtime ;;
        gateway) phase_gateway ;;
        model_sync) phase_model_sync ;;
        service) phase_service ;;
        model_load) phase_model_load ;;
        *) fail "unknown phase $2 (metadata_firewall, driver, runtime, gateway, model_sync, service, model_load)" ;;
    esac
    exit 0
fi
mkdir -p "$STATE_DIR" "$LOG_DIR" "$RUN_DIR"
set +e # the boot's status is main's, even if the log file cannot be written
main 2>&1 | tee -a "$LOG_DIR/boot.log"
exit "${PIPESTATUS[0]}"
