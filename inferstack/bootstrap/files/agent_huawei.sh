#!/bin/bash
# inferstack agent (Huawei Cloud): the request-rate reporter of a GPU fleet's server (huawei_metrics.py).
#
# Run by inferstack-agent.service (bootstrap/telemetry.py), never by boot.sh: it does not delay readiness, and a
# failure here leaves the unit failed (journalctl -u inferstack-agent) while the server serves.
#
# Nothing is downloaded and nothing secret is written: the bundle carries the reporter, its configuration and its
# unit (bootstrap/agents/huawei.py), and the reporter takes the agency's temporary keys from the metadata server at
# each request. This script enables the reporter's unit and starts it, or restarts it when the reporter, its
# configuration or its unit changed since it last (re)started it (a new bundle); otherwise a second run changes
# nothing.
set -euo pipefail

# Where things are on the server (the INFERSTACK_* overrides are for tests only).
REPORTER_UNIT=inferstack-metrics # agents/huawei.REPORTER_UNIT
LIB_DIR=${INFERSTACK_LIB_DIR:-/usr/local/lib/inferstack}
CONFIG_DIR=${INFERSTACK_CONFIG_DIR:-/etc/inferstack}
UNIT_DIR=${INFERSTACK_UNIT_DIR:-/etc/systemd/system}
STATE_DIR=${INFERSTACK_STATE_DIR:-/var/lib/inferstack}
STAMP=$STATE_DIR/agent-huawei-metrics.sha256

log() { echo "inferstack-agent: $*"; }

# installed_files_digest: one digest of the reporter, its configuration and its unit, as installed.
installed_files_digest() {
    cat "$LIB_DIR/huawei_metrics.py" "$CONFIG_DIR/huawei-metrics.json" "$UNIT_DIR/$REPORTER_UNIT.service" |
        sha256sum | cut -d' ' -f1
}

main() {
    local digest
    digest=$(installed_files_digest)
    systemctl enable --quiet "$REPORTER_UNIT.service"
    mkdir -p "$STATE_DIR"
    if [ "$(cat "$STAMP" 2>/dev/null)" = "$digest" ]; then
        systemctl start "$REPORTER_UNIT.service" # nothing when it runs
        log "$REPORTER_UNIT runs (journalctl -u $REPORTER_UNIT)"
        return 0
    fi
    systemctl restart "$REPORTER_UNIT.service"
    echo "$digest" >"$STAMP"
    log "$REPORTER_UNIT (re)started with $CONFIG_DIR/huawei-metrics.json (journalctl -u $REPORTER_UNIT)"
}

main "$@"
