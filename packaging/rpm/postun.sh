# SPDX-License-Identifier: Apache-2.0
# fabric-agent post-uninstall scriptlet. $1: 0 on erase, 1 or more on upgrade.
# The systemd_postun_with_restart macro written out (see post.sh.in): after
# an upgrade, restart the daemon if it was running. The daemon exits on
# SIGTERM leaving the WireGuard mesh up, so a renter's job does not notice.
# On erase the state (/var/lib/fabric-agent: token, state.json) stays, as RPM
# packages leave user data; rpm keeps an edited agent.yaml as .rpmsave.
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
if [ "$1" -ge 1 ]; then
    systemctl try-restart fabric-agent.service >/dev/null 2>&1 || :
fi
# The CDI spec the daemon wrote names the erased binary as its OCI hook.
if [ "$1" -eq 0 ]; then
    rm -f /var/run/cdi/fabric-agent.io-rdma.json
fi
