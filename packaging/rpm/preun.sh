# SPDX-License-Identifier: Apache-2.0
# fabric-agent pre-uninstall scriptlet. $1: 0 on erase, 1 or more on upgrade.
# The systemd_preun macro written out (see post.sh.in): on erase, disable
# and stop the unit; on upgrade leave it running, post-uninstall restarts it.
if [ "$1" -eq 0 ]; then
    systemctl --no-reload disable --now fabric-agent.service >/dev/null 2>&1 || :
fi
