// SPDX-License-Identifier: Apache-2.0
// The static front's side of the public_key_derive() link seam
// (overlay.hpp): it carries no OpenSSL (static, it could not load the
// shared libcrypto), so X25519 runs in a `mesh pubkey` child of the whole
// agent (common/child.hpp). The kernel reports an interface's public key
// and wireguard-go's is remembered in the keyring (keyring.cpp), so this
// runs only for a new or changed private key or a keyring miss.
#include "common/child.hpp"
#include "overlay/overlay.hpp"

namespace fa::overlay {

void crypto_minimal_init() {}

Result<Key> public_key_derive(const Key& private_key) {
  auto whole = whole_agent_path();
  if (!whole) return whole.take_error();
  return public_key_in_child(*whole, private_key);
}

}  // namespace fa::overlay
