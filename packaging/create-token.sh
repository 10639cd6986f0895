# SPDX-License-Identifier: Apache-2.0
# Shared by the Debian postinst and the RPM post-install scriptlet (pasted in at configure
# time, see packaging/CPack.cmake): creates the API bearer token on first
# install and never overwrites one. Same form as the daemon writes (64 hex
# digits and a newline, mode 0600), so whichever runs first creates it.
fa_create_token() {
    fa_state_dir=/var/lib/fabric-agent
    fa_token="$fa_state_dir/token"
    [ -e "$fa_token" ] && return 0
    [ -d "$fa_state_dir" ] || mkdir -m 0700 "$fa_state_dir"
    fa_tmp=$(mktemp "$fa_state_dir/.token.XXXXXX")
    chmod 0600 "$fa_tmp"
    if ! od -An -vtx1 -N32 /dev/urandom | tr -d ' \n' > "$fa_tmp" \
        || ! echo >> "$fa_tmp" || [ "$(wc -c < "$fa_tmp")" -ne 65 ]; then
        rm -f "$fa_tmp"
        echo "fabric-agent: could not create $fa_token; the daemon creates it on first start" >&2
        return 0
    fi
    # A hard link fails when the name exists (a daemon started meanwhile):
    # the token that is there wins, ours is dropped.
    ln "$fa_tmp" "$fa_token" 2>/dev/null || true
    rm -f "$fa_tmp"
}
