# SPDX-License-Identifier: Apache-2.0
# wireguard-kernel: the kernel's WireGuard works in the lab: a `wireguard`
# link can be created, `wg` configures it and reads the configuration back,
# and two namespaces ping each other over two kernel WireGuard interfaces.
# The overlay's kernel backend tests build on this.
. "$LAB/lib.sh"

step "create and configure a wireguard link"
ip link add wg9 type wireguard
assert_contains "$(ip -d link show wg9)" "wireguard" "ip -d link show wg9"
umask 077
wg genkey > /tmp/a.key
wg genkey > /tmp/b.key
pub_a=$(wg pubkey < /tmp/a.key)
pub_b=$(wg pubkey < /tmp/b.key)
wg set wg9 private-key /tmp/a.key listen-port 51820 \
  peer "$pub_b" allowed-ips 10.42.0.2/32,10.42.1.0/24 endpoint 127.0.0.1:51821 persistent-keepalive 25
assert_eq "$(wg show wg9 public-key)" "$pub_a" "wg show public-key"
assert_eq "$(wg show wg9 listen-port)" 51820 "wg show listen-port"
assert_eq "$(wg show wg9 peers)" "$pub_b" "wg show peers"
assert_eq "$(wg show wg9 allowed-ips)" "$pub_b	10.42.0.2/32 10.42.1.0/24" "wg show allowed-ips"
assert_eq "$(wg show wg9 endpoints)" "$pub_b	127.0.0.1:51821" "wg show endpoints"
assert_eq "$(wg show wg9 persistent-keepalive)" "$pub_b	25" "wg show persistent-keepalive"
wg set wg9 peer "$pub_b" remove
assert_eq "$(wg show wg9 peers)" "" "peers after removing the peer"
ip link del wg9

step "two nodes ping each other over kernel WireGuard"
node_add a
node_add b
link_nodes a va 10.99.0.1/24 b vb 10.99.0.2/24
for n in a b; do ip -n "$n" link add wg0 type wireguard; done
on a wg set wg0 private-key /tmp/a.key listen-port 51820 peer "$pub_b" allowed-ips 10.42.0.2/32 endpoint 10.99.0.2:51820
on b wg set wg0 private-key /tmp/b.key listen-port 51820 peer "$pub_a" allowed-ips 10.42.0.1/32 endpoint 10.99.0.1:51820
ip -n a addr add 10.42.0.1/24 dev wg0
ip -n b addr add 10.42.0.2/24 dev wg0
ip -n a link set wg0 up
ip -n b link set wg0 up
assert_cmd "ping 10.42.0.2 from node a over wg0" retry 3 1 on a ping -c 1 -W 5 10.42.0.2
hs=$(on a wg show wg0 latest-handshakes | cut -f2)
assert_gt "$hs" 0 "node a: latest handshake with b (unix time)"
read -r rx tx <<< "$(on b wg show wg0 transfer | cut -f2,3)"
assert_gt "$rx" 0 "node b: bytes received from a"
# The tunnel's UDP left through the veth, not around it.
assert_gt "$(on a cat /sys/class/net/va/statistics/tx_packets)" 0 "node a: va tx_packets"
