// SPDX-License-Identifier: Apache-2.0
// The desired state straight from JSON text: nlohmann's SAX interface fills
// RawMesh without building a document (for 250 peers the document's
// allocations and lookups cost about as much as the parse itself).
//
// This file is compiled at -O3 (overlay/CMakeLists.txt): at -O2 nlohmann's
// lexer reads each character through two out-of-line calls (its get() and
// std::string::push_back), ~75 instructions a byte and more than half of a
// 1000-peer `mesh apply`; at -O3 they are inlined into its loop and ~40 %
// of its instructions go (a 1000-peer apply: 16.8 M -> 13.1 M in all). The
// lexer is instantiated here for an input type of this file's own (Cursor),
// so the linker cannot pick the copy the document path instantiates in
// desired.cpp, compiled at -O2.
#include <iterator>

#include <nlohmann/json.hpp>

#include "overlay/desired_raw.hpp"

namespace fa::overlay::detail {

using nlohmann::json;

namespace {

// A pointer into the text, of a type only this file knows.
struct Cursor {
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;
  const char* p;
  reference operator*() const { return *p; }
  Cursor& operator++() {
    ++p;
    return *this;
  }
  Cursor operator++(int) { return Cursor{p++}; }
  bool operator==(const Cursor&) const = default;
};

class RawSax {
 public:
  using OnInterface = std::function<void(const std::string&)>;
  RawSax(RawMesh& m, const OnInterface* on_interface, PeerStream* stream, size_t most_peers)
      : m_(m), on_interface_(on_interface), stream_(stream), most_peers_(most_peers) {}

  bool null() { return scalar(Raw::of(Raw::Null)); }
  bool boolean(bool) { return false; }
  bool number_integer(json::number_integer_t v) {
    Raw r = Raw::of(Raw::Integer);
    r.i = v;
    return scalar(std::move(r));
  }
  bool number_unsigned(json::number_unsigned_t v) {
    Raw r = Raw::of(Raw::Integer);
    r.uns = true;
    r.u = v;
    return scalar(std::move(r));
  }
  bool number_float(json::number_float_t, const json::string_t&) { return false; }
  bool string(json::string_t& v) {
    Raw r = Raw::of(Raw::String);
    // A copy: the lexer keeps its buffer (and its capacity) for the next
    // token. A streamed peer's strings live until the next peer only.
    r.s = (m_.peers_streamed && (state_ == Peer || state_ == Ips) ? peer_store_ : m_.store).keep(v);
    return scalar(std::move(r));
  }
  bool binary(json::binary_t&) { return false; }
  bool start_object(std::size_t) {
    if (state_ == Start) {
      state_ = Top;
      return true;
    }
    if (state_ == Peers) {
      if (m_.peers_streamed) {  // one entry, reused
        m_.peers.items.clear();
        peer_store_.clear();
      }
      m_.peers.items.emplace_back();
      state_ = Peer;
      seen_ &= ~0xffu;
      return true;
    }
    return false;
  }
  bool end_object() {
    if (state_ == Peer) {
      if (m_.peers_streamed) stream_->peer(streamed_++, m_.peers.items.back());
      state_ = Peers;
      return true;
    }
    if (state_ == Top) {
      state_ = Done;
      return true;
    }
    return false;
  }
  bool start_array(std::size_t) {
    if (state_ == Top && field_ == &peers_marker_) {
      m_.peers.kind = Raw::List;
      m_.peers_streamed = stream_ && stream_->begin(m_);
      m_.peers.items.reserve(m_.peers_streamed ? 1 : most_peers_);
      state_ = Peers;
      field_ = nullptr;
      return true;
    }
    if (state_ == Peer && list_ != nullptr) {
      list_->kind = Raw::List;
      state_ = Ips;
      return true;
    }
    return false;
  }
  bool end_array() {
    if (state_ == Peers) {
      state_ = Top;
      return true;
    }
    if (state_ == Ips) {
      state_ = Peer;
      list_ = nullptr;
      return true;
    }
    return false;
  }
  bool key(json::string_t& k) {
    field_ = nullptr;
    list_ = nullptr;
    if (state_ == Top) return top_key(k);
    if (state_ == Peer) return peer_key(k);
    return false;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

  bool done() const { return state_ == Done; }

 private:
  enum State { Start, Top, Peers, Peer, Ips, Done };

  // A repeated key: the document keeps the last value; leave it to that path.
  bool first_time(unsigned bit) {
    if (seen_ & bit) return false;
    seen_ |= bit;
    return true;
  }
  bool top_key(const std::string& k) {
    Raw* f[] = {&m_.cluster_id,       &m_.interface, &m_.address, &m_.listen_port,
                &m_.private_key_file, &m_.mtu,       &m_.netns,   &peers_marker_};
    unsigned i = 0;
    for (std::string_view name : kTopKeys) {
      if (std::string_view(k) == name) {
        if (!first_time(1u << (8 + i))) return false;
        field_ = f[i];
        return true;
      }
      ++i;
    }
    return false;
  }
  bool peer_key(const std::string& k) {
    RawPeer& p = m_.peers.items.back();
    const struct {
      std::string_view name;
      Raw* field;
      RawIps* list;
    } keys[] = {{"public_key", &p.public_key, nullptr},
                {"endpoint", &p.endpoint, nullptr},
                {"persistent_keepalive", &p.persistent_keepalive, nullptr},
                {"allowed_ips", nullptr, &p.allowed_ips}};
    for (unsigned i = 0; i < 4; ++i) {
      if (std::string_view(k) != keys[i].name) continue;
      field_ = keys[i].field;
      list_ = keys[i].list;
      return first_time(1u << i);
    }
    return false;
  }
  bool scalar(Raw&& r) {
    if (state_ == Ips) {
      list_->items.push_back(std::move(r));
      return true;
    }
    if (state_ != Top && state_ != Peer) return false;
    if (field_ == &peers_marker_) {  // peers: null
      if (r.kind != Raw::Null) return false;
      m_.peers.kind = Raw::Null;
      field_ = nullptr;
      return true;
    }
    if (list_ != nullptr) {  // allowed_ips: null
      if (r.kind != Raw::Null) return false;
      list_->kind = Raw::Null;
      list_->other = "null";
      list_ = nullptr;
      return true;
    }
    if (field_ == nullptr) return false;
    *field_ = std::move(r);
    // The interface is known: the caller may start reading it (a name that
    // would not pass validation is never handed out).
    if (field_ == &m_.interface && on_interface_ && *on_interface_ && m_.interface.kind == Raw::String &&
        valid_ifname(m_.interface.s))
      (*on_interface_)(std::string(m_.interface.s));
    field_ = nullptr;
    return true;
  }

  RawMesh& m_;
  const OnInterface* on_interface_;
  PeerStream* stream_;
  size_t most_peers_;
  size_t streamed_ = 0;   // entries handed to stream_
  TextStore peer_store_;  // the strings of a streamed entry
  State state_ = Start;
  Raw* field_ = nullptr;          // the scalar field whose value comes next
  RawIps* list_ = nullptr;        // allowed_ips, whose list comes next
  Raw peers_marker_;              // field_ == &peers_marker_: the value of "peers" comes next
  unsigned seen_ = 0;             // keys seen: top level in bits 8-15, the current peer in bits 0-3
};

}  // namespace

bool read_json_sax(std::string_view text, RawMesh& m,
                   const std::function<void(const std::string&)>* on_interface, PeerStream* stream,
                   size_t most_peers) {
  RawSax sax(m, on_interface, stream, most_peers);
  return json::sax_parse(Cursor{text.data()}, Cursor{text.data() + text.size()}, &sax) && sax.done();
}

}  // namespace fa::overlay::detail
