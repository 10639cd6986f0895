// SPDX-License-Identifier: Apache-2.0
// Inside overlay/: the desired-state document as the validator reads it
// (RawMesh), shared by the two readers that fill it: desired.cpp (from a
// parsed JSON or YAML document) and desired_sax.cpp (straight from JSON
// text through nlohmann's SAX interface).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/container/small_vector.hpp>

namespace fa::overlay::detail {

// Copies of the strings the SAX path reads (the lexer reuses its buffer),
// and of echoes, in blocks that never move: one allocation per 16 KiB
// instead of one per key and endpoint longer than 15 characters.
class TextStore {
 public:
  std::string_view keep(std::string_view s) {
    if (s.empty()) return {};  // (a store with no block yet has no address to give)
    if (s.size() > left_) {
      left_ = std::max<size_t>(s.size(), 16 * 1024);
      blocks_.emplace_back(new char[left_]);
      next_ = blocks_.back().get();
      if (blocks_.size() == 1) first_size_ = left_;
    }
    char* p = next_;
    std::memcpy(p, s.data(), s.size());
    next_ += s.size();
    left_ -= s.size();
    return {p, s.size()};
  }
  // Forgets what was kept (every view handed out dangles), keeping the
  // first block for what comes next.
  void clear() {
    if (blocks_.empty()) return;
    blocks_.resize(1);
    next_ = blocks_[0].get();
    left_ = first_size_;
  }

 private:
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* next_ = nullptr;
  size_t left_ = 0;
  size_t first_size_ = 0;
};

// The document as the validator reads it, whichever parser produced it: for
// each field, whether and how it was written. Scalars keep their value;
// anything else (a mapping, a list, a boolean, a fraction where a scalar
// belongs) only its echo for the error message.
struct Raw {
  enum Kind : uint8_t { Absent, Null, String, Integer, List, Other };  // List: RawList only
  Kind kind = Absent;
  bool uns = false;  // an integer written without a sign (nlohmann's number_unsigned)
  uint64_t u = 0;
  int64_t i = 0;
  // String: the value; Other: its echo. A view into the parsed document
  // (which outlives validation) or into the RawMesh's TextStore.
  std::string_view s;
  static Raw of(Kind k) {
    Raw r;
    r.kind = k;
    return r;
  }
  std::string echo() const {
    switch (kind) {
      case Null:
        return "null";
      case Integer:
        return uns ? std::to_string(u) : std::to_string(i);
      default: {
        // Control characters (JSON's \u0000, a newline) are echoed escaped:
        // written raw they would cut or garble the message that quotes them.
        static constexpr char kHex[] = "0123456789abcdef";
        std::string out;
        out.reserve(s.size());
        for (char ch : s) {
          auto c = static_cast<unsigned char>(ch);
          if (c >= 0x20 && c != 0x7f) {
            out += ch;
          } else {
            out += "\\u00";
            out += kHex[c >> 4];
            out += kHex[c & 15];
          }
        }
        return out;
      }
    }
  }
};
// A list field (peers, allowed_ips): absent, null, a list, or something
// else (its echo in `other`).
template <class T, class Items = std::vector<T>>
struct RawList {
  Raw::Kind kind = Raw::Absent;  // Absent, Null, List or Other
  std::string other;
  Items items;
  bool is_list() const { return kind == Raw::List; }
};
// A peer's allowed IPs, usually one: held in the peer, not in an allocation
// of its own (250 peers: 250 fewer malloc/free pairs in the parse, which
// runs beside EarlyGet's thread and would contend with it for the heap).
using RawIps = RawList<Raw, boost::container::small_vector<Raw, 1>>;
using Unknown = std::vector<std::pair<std::string, std::string>>;  // key, echo
struct RawPeer {
  std::optional<std::string> not_mapping;  // echo, when the entry is not a mapping
  Unknown unknown;
  Raw public_key, endpoint, persistent_keepalive;
  RawIps allowed_ips;
};
struct RawMesh {
  std::optional<std::string> not_mapping;
  Unknown unknown;
  Raw cluster_id, interface, address, listen_port, private_key_file, mtu, netns;
  // With peers_streamed, peers.items is not the list: each entry went to a
  // PeerStream as it was read (peers.kind still says what the field was).
  RawList<RawPeer> peers;
  bool peers_streamed = false;
  TextStore store;
};

// Takes a document's peer entries one at a time, as the SAX reader ends
// each, instead of the RawMesh keeping them all (for 250 peers ~70 KiB of
// entries and ~20 KiB of their text, each page of it a fault to fill).
class PeerStream {
 public:
  virtual ~PeerStream() = default;
  // Called at the start of the peer list with the fields read so far:
  // whether to take the entries one at a time (else the RawMesh keeps them).
  virtual bool begin(const RawMesh& so_far) = 0;
  // Entry i; its views into the text are valid during the call only.
  virtual void peer(size_t i, const RawPeer& p) = 0;
};

const std::initializer_list<const char*> kTopKeys = {
    "cluster_id", "interface", "address", "listen_port", "private_key_file", "mtu", "netns", "peers"};
const std::initializer_list<const char*> kPeerKeys = {"public_key", "endpoint", "allowed_ips",
                                                      "persistent_keepalive"};

// Whether s is a valid interface name (desired.cpp).
bool valid_ifname(std::string_view s);

// Fills `m` from JSON text through nlohmann's SAX interface (desired_sax.cpp).
// Takes the usual shape only: false for anything else (a syntax error, an
// unknown or repeated key, a mapping, list, boolean or fraction where a
// scalar belongs), and the caller then reads the text through a document,
// which yields the same RawMesh for every document this accepts and the
// exact messages for the rest. on_interface, if set, is called with the
// interface name as soon as it is read (only a name that passes validation).
// stream, if set and its begin() agrees, takes the peer entries as they are
// read (m.peers_streamed); else m keeps them, with room for most_peers.
bool read_json_sax(std::string_view text, RawMesh& m,
                   const std::function<void(const std::string&)>* on_interface, PeerStream* stream = nullptr,
                   size_t most_peers = 0);

}  // namespace fa::overlay::detail
