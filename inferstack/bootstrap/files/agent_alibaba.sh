#!/bin/bash
# inferstack agent (Alibaba Cloud): the server's metrics through the CloudMonitor agent, its logs through Logtail.
#
# Run by inferstack-agent.service (bootstrap/telemetry.py), never by boot.sh: it does not delay readiness, and a
# failure here leaves the unit failed (journalctl -u inferstack-agent) while the server serves.
#
# CloudMonitor: nothing is downloaded here. Alibaba installs its CloudMonitor agent (C++ 3.x, /usr/local/cloudmonitor)
# on new ECS instances itself (CloudMonitor's account setting EnableInstallAgentNewECS, DescribeMonitoringAgentConfig;
# verify it is on in your account), and the agent authenticates as the account's own instance: no AccessKey on disk.
# It reports the disk (diskusage_utilization) and, on a GPU instance with the NVIDIA driver, the GPUs
# (gpu_memory_usedutilization) in namespace acs_ecs_dashboard, which the fleet's alarms read. This script waits for
# the agent to run and fails (the unit retries) when it never does: the alarms then see no data from the server.
#
# Logtail: the bundle writes the machine-group identity (/etc/ilogtail/user_defined_id); the SLS side (logstore,
# machine group, what to collect) is the stack's. Logtail itself is not installed here: Alibaba publishes it only as
# an unversioned installer script (logtail.sh at its regional OSS endpoint) with no checksum or signature to check,
# and inferstack runs no unverified installer (docs/deploy-alibaba.md, "Monitoring"). A server whose image carries
# Logtail joins the machine group; this script restarts Logtail when the identity changed.
set -euo pipefail

# Where things are on the server (the INFERSTACK_* overrides are for tests only).
# The C++ agent's process (CloudMonitor, "Cloud Monitor agent overview": /usr/local/cloudmonitor/bin/argusagent).
CLOUDMONITOR_AGENT=${INFERSTACK_CLOUDMONITOR_AGENT:-/usr/local/cloudmonitor/bin/argusagent}
# How long CloudMonitor may take to install its agent on a new instance (an assumption, stated as such).
CLOUDMONITOR_WAIT_S=${INFERSTACK_CLOUDMONITOR_WAIT_S:-900}
LOGTAIL=${INFERSTACK_LOGTAIL:-/usr/local/ilogtail/ilogtail}
LOGTAIL_IDENTITY=${INFERSTACK_LOGTAIL_IDENTITY:-/etc/ilogtail/user_defined_id} # agents/alibaba.LOGTAIL_IDENTITY_FILE
STATE_DIR=${INFERSTACK_STATE_DIR:-/var/lib/inferstack}
IDENTITY_STAMP=$STATE_DIR/agent-logtail-identity

log() { echo "inferstack-agent: $*"; }

cloudmonitor_running() { pgrep -f "^$CLOUDMONITOR_AGENT" >/dev/null 2>&1; }

wait_for_cloudmonitor() {
    local waited=0
    until cloudmonitor_running; do
        if [ "$waited" -ge "$CLOUDMONITOR_WAIT_S" ]; then
            log "ERROR: the CloudMonitor agent ($CLOUDMONITOR_AGENT) is not running after ${CLOUDMONITOR_WAIT_S}s:" \
                "no disk or GPU metric reaches CloudMonitor from this server (is automatic installation on new ECS" \
                "instances on in CloudMonitor's settings?)"
            return 1
        fi
        sleep 30
        waited=$((waited + 30))
    done
    log "the CloudMonitor agent runs ($CLOUDMONITOR_AGENT)"
}

refresh_logtail() {
    if [ ! -x "$LOGTAIL" ]; then
        log "Logtail is not installed on this image: the server's logs stay in its journal and /var/log/inferstack" \
            "(docs/deploy-alibaba.md, \"Monitoring\")"
        return 0
    fi
    mkdir -p "$STATE_DIR"
    if cmp -s "$LOGTAIL_IDENTITY" "$IDENTITY_STAMP"; then
        log "Logtail runs with machine-group identity $(cat "$LOGTAIL_IDENTITY")"
        return 0
    fi
    systemctl restart ilogtaild
    cp "$LOGTAIL_IDENTITY" "$IDENTITY_STAMP"
    log "Logtail restarted with machine-group identity $(cat "$LOGTAIL_IDENTITY")"
}

main() {
    refresh_logtail
    wait_for_cloudmonitor
}

main "$@"
