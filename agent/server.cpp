// SPDX-License-Identifier: Apache-2.0
#include "agent/server.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <array>
#include <atomic>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <vector>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>

#include "common/fd.hpp"
#include "common/log.hpp"

namespace fa::agent {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

namespace {

constexpr size_t kHeaderLimit = 16 * 1024;

// Accepting failed for want of a resource (EMFILE, ENFILE, ENOBUFS): the
// connection stays in the backlog and the listener stays readable, so an
// accept tried again at once fails again at once, forever. Wait this long.
constexpr auto kAcceptPause = std::chrono::milliseconds(100);

// During a long-poll the socket is read, so that a client that goes away
// frees its slot at once instead of when the wait ends. What a client
// pipelines meanwhile is kept for after the answer, up to the header limit.
constexpr size_t kWatchBytes = 1024;

// A request with a body larger than this leaves behind freed heap (the body,
// its copies, the parsed JSON) that malloc keeps: the connection drops its
// buffers once answered, and the heap is trimmed.
constexpr size_t kLargeRequest = 64 * 1024;

auto api_log() {
  static auto log = fa::logger("api");
  return log;
}

bool routine(beast::error_code ec) {
  return ec == beast::error::timeout || ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::ssl::error::stream_truncated || ec == http::error::end_of_stream || ec == asio::error::broken_pipe;
}

// The one place where I/O errors are reported. Errors a client causes by
// hanging up are routine and stay at debug level so they cannot flood the log.
void fail(beast::error_code ec, const char* what) {
  if (ec == asio::error::operation_aborted) return;
  if (routine(ec))
    api_log()->debug("{}: {}", what, ec.message());
  else
    api_log()->info("{}: {}", what, ec.message());
}

// Lines any client can make the daemon repeat (a refused connection, a
// failed TLS handshake, an accept failing while file descriptors are short)
// are written at most once per interval, with the count of those left out.
class LogLimiter {
 public:
  template <class Write>
  void operator()(Write&& write) {
    uint64_t skipped = 0;
    {
      std::lock_guard g(m_);
      const auto now = std::chrono::steady_clock::now();
      if (now < next_) {
        ++skipped_;
        return;
      }
      next_ = now + kEvery;
      skipped = std::exchange(skipped_, 0);
    }
    write(skipped == 0 ? std::string() : " (" + std::to_string(skipped) + " more like it not logged since the last one)");
  }

 private:
  static constexpr std::chrono::seconds kEvery{10};
  std::mutex m_;
  std::chrono::steady_clock::time_point next_{};
  uint64_t skipped_ = 0;
};

// Per-client limits count an IPv4 address, or an IPv6 /64 (what one host
// is usually given, so that it cannot take a new address per connection).
using ClientKey = std::array<unsigned char, 17>;

ClientKey client_key(const asio::ip::address& a) {
  ClientKey k{};
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return client_key(asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()));
  if (a.is_v4()) {
    auto b = a.to_v4().to_bytes();
    std::copy(b.begin(), b.end(), k.begin());
    k[16] = 4;
  } else {
    auto b = a.to_v6().to_bytes();
    std::copy(b.begin(), b.begin() + 8, k.begin());
    k[16] = 6;
  }
  return k;
}

}  // namespace

// What the connection books keep of a session (guarded by Impl::slots_mu).
struct Tracked {
  virtual ~Tracked() = default;
  // Closes the connection (from any thread: posted to its strand).
  virtual void evict() = 0;
  ClientKey client{};
  std::string peer;       // the client's address, for log lines
  bool counted = false;   // holds a slot
  bool pending = false;   // has not authenticated yet
  std::list<std::weak_ptr<Tracked>>::iterator pending_at;
};

struct Server::Impl : std::enable_shared_from_this<Server::Impl> {
  Impl(asio::io_context& i, asio::thread_pool& w, Core& c, ServerOptions o)
      : ioc(i),
        worker(w),
        core(c),
        api(c),
        opt(std::move(o)),
        acceptor(asio::make_strand(i)),
        accept_pause(acceptor.get_executor()) {}

  asio::io_context& ioc;
  asio::thread_pool& worker;
  asio::thread_pool probe_lane{1};
  Core& core;
  Api api;
  ServerOptions opt;
  tcp::acceptor acceptor;
  asio::steady_timer accept_pause;
  std::shared_ptr<asio::ssl::context> tls;
  std::atomic<bool> stopped{false};

  // Connection slots. Every connection holds one of api.max_connections;
  // those that have not yet sent an authenticated request are also counted
  // per client address (at most api.max_unauthenticated_per_client) and
  // queued oldest first: when every slot is taken, the oldest of them is
  // closed to make room, so clients without a token can never keep the
  // control plane out. Authenticated connections are never closed for room.
  std::mutex slots_mu;
  int live = 0;
  std::map<ClientKey, int> pending_by_client;
  std::list<std::weak_ptr<Tracked>> pending;

  LogLimiter refused_log, handshake_log, accept_log;

  // glibc keeps the pages of freed memory (the arenas of the I/O thread and
  // the worker, fragmented by a large document's small nodes): after a large
  // request, give them back. On the worker, queued behind the work that
  // freed them; bursts share one trim.
  std::atomic<bool> trim_queued{false};
  void trim_soon() {
    if (trim_queued.exchange(true)) return;
    asio::post(worker, [self = shared_from_this()] {
      self->trim_queued = false;
      ::malloc_trim(0);
    });
  }

  // Long-polls waiting for the status to move. The server holds one
  // subscription to the core for all of them; when the generation moves
  // they are answered at most kWakeWindow at a time: each woken session
  // holds a turn until its answer is written (or it is gone), and the next
  // waiter is woken when a turn comes back. The answers to hundreds of
  // long-polls then never stand in the event loop's queue ahead of another
  // client's request by more than a window's worth.
  static constexpr size_t kWakeWindow = 16;
  std::mutex waiting_mu;
  uint64_t next_waiter = 0;
  // A waiter is called with its id and a hold: a turn of the window when
  // the generation moved; at stop, a share of the drain, released when its
  // session is gone.
  using Waiter = std::function<void(uint64_t, std::shared_ptr<void>)>;
  std::map<uint64_t, Waiter> waiting;
  // The waking queue, the window and the stop run on this strand.
  asio::strand<asio::io_context::executor_type> wake_strand{asio::make_strand(ioc)};
  std::deque<std::pair<uint64_t, Waiter>> waking;  // on wake_strand
  size_t woken_unanswered = 0;                     // on wake_strand
  std::optional<uint64_t> core_sub;

  uint64_t wait_for_change(Waiter wake) {
    std::lock_guard g(waiting_mu);
    uint64_t id = ++next_waiter;
    waiting.emplace(id, std::move(wake));
    return id;
  }
  void stop_waiting(uint64_t id) {
    std::lock_guard g(waiting_mu);
    waiting.erase(id);
  }
  void generation_moved() {
    {
      std::lock_guard g(waiting_mu);
      for (auto& w : waiting) waking.emplace_back(w.first, std::move(w.second));
      waiting.clear();
    }
    wake_some();
  }
  void wake_some() {
    while (woken_unanswered < kWakeWindow && !waking.empty()) {
      auto w = std::move(waking.front());
      waking.pop_front();
      ++woken_unanswered;
      // The turn's deleter may run as the loop's last handlers are
      // destroyed: posting then is dropped with them.
      std::shared_ptr<void> turn(nullptr, [weak = weak_from_this()](void*) {
        if (auto self = weak.lock())
          asio::post(self->wake_strand, [self] {
            --self->woken_unanswered;
            self->wake_some();
          });
      });
      w.second(w.first, std::move(turn));
    }
  }

  void do_accept();
  void on_accept(beast::error_code ec, tcp::socket sock);
  template <class S>
  void admit(const std::shared_ptr<S>& s);
  void drop_pending(Tracked& s);  // with slots_mu held
  void authenticated(Tracked& s) {
    std::lock_guard g(slots_mu);
    drop_pending(s);
  }
  void release(Tracked& s) {
    std::lock_guard g(slots_mu);
    if (!s.counted) return;
    drop_pending(s);
    --live;
  }
};

namespace {

template <class Stream>
class Session : public Tracked, public std::enable_shared_from_this<Session<Stream>> {
 public:
  template <class... Args>
  Session(std::shared_ptr<Server::Impl> srv, const tcp::endpoint& remote, Args&&... args)
      : srv_(std::move(srv)), stream_(std::forward<Args>(args)...), timer_(stream_.get_executor()) {
    client = client_key(remote.address());
    peer = remote.address().to_string();
  }
  ~Session() override {
    if (sub_) srv_->stop_waiting(*sub_);
    srv_->release(*this);
    if (large_) srv_->trim_soon();
  }

  void run() {
    asio::dispatch(stream_.get_executor(), beast::bind_front_handler(&Session::on_run, this->shared_from_this()));
  }

  void evict() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->lowest().close(); });
  }

 private:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  auto& lowest() { return beast::get_lowest_layer(stream_); }

  void on_run() {
    if constexpr (kTls) {
      lowest().expires_after(srv_->opt.api.read_timeout);
      stream_.async_handshake(asio::ssl::stream_base::server,
                              beast::bind_front_handler(&Session::on_handshake, this->shared_from_this()));
    } else {
      do_read();
    }
  }

  void on_handshake(beast::error_code ec) {
    if (ec) {
      if (ec == asio::error::operation_aborted) return;
      if (routine(ec)) return api_log()->debug("tls handshake with {}: {}", peer, ec.message());
      return srv_->handshake_log(
          [&](const std::string& more) { api_log()->info("tls handshake with {}: {}{}", peer, ec.message(), more); });
    }
    if constexpr (kTls) {
      // verify_peer already refused a certificate from another CA during the
      // handshake; a client without a certificate may still use the token.
      if (srv_->opt.tls.mutual()) {
        SSL* ssl = stream_.native_handle();
        // OpenSSL 1.1.1's name (3.0 keeps it as a macro for SSL_get1_peer_certificate):
        // both return a reference of our own.
        X509* cert = SSL_get_peer_certificate(ssl);
        ctx_.client_cert_verified = cert != nullptr && SSL_get_verify_result(ssl) == X509_V_OK;
        if (cert) X509_free(cert);
        if (ctx_.client_cert_verified) authenticated();
      }
    }
    do_read();
  }

  void authenticated() {
    if (authenticated_) return;
    authenticated_ = true;
    srv_->authenticated(*this);
  }

  void do_read() {
    parser_.emplace();
    parser_->body_limit(kMaxBody);
    parser_->header_limit(kHeaderLimit);
    // One deadline for the whole request: a client dribbling a header byte
    // at a time is cut off when it passes.
    lowest().expires_after(srv_->opt.api.read_timeout);
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::on_read, this->shared_from_this()));
  }

  void on_read(beast::error_code ec, size_t) {
    if (ec == http::error::end_of_stream) return close();
    if (ec == http::error::body_limit) {
      t0_ = std::chrono::steady_clock::now();
      route_ = "other";
      if (parser_->is_header_done()) route_ = std::string(Api::route_of(std::string_view(parser_->get().target().data(), parser_->get().target().size())));
      linger_ = true;  // the rest of the body may still be on its way
      large_ = true;
      return send(Api::error(413, "payload_too_large",
                             "the request body is larger than " + std::to_string(kMaxBody) + " bytes", "", 11, false));
    }
    if (ec == beast::error::timeout) return fail(ec, "read (client too slow, connection closed)");
    if (ec && ec.category() == beast::error_code(http::error::bad_target).category()) {
      t0_ = std::chrono::steady_clock::now();
      route_ = "other";
      linger_ = true;
      return send(Api::error(400, "bad_request", "malformed HTTP request: " + ec.message(), "", 11, false));
    }
    if (ec) return fail(ec, "read");
    lowest().expires_never();
    req_ = parser_->release();
    t0_ = std::chrono::steady_clock::now();
    large_ = req_.body().size() > kLargeRequest;
    if (!authenticated_ && srv_->core.check_token(std::string_view(req_[http::field::authorization].data(),
                                                                   req_[http::field::authorization].size())) ==
                               AuthResult::Ok)
      authenticated();
    route_ = std::string(Api::route_of(std::string_view(req_.target().data(), req_.target().size())));
    dispatch(srv_->api.handle(req_, ctx_));
  }

  void dispatch(Outcome o) {
    if (auto* r = std::get_if<Response>(&o)) return send(std::move(*r));
    if (auto* d = std::get_if<Deferred>(&o)) {
      auto& pool = d->long_running ? srv_->probe_lane : srv_->worker;
      asio::post(pool, [self = this->shared_from_this(), work = std::move(d->work)]() mutable {
        Response res = work();
        asio::post(self->stream_.get_executor(),
                   [self, res = std::move(res)]() mutable { self->send(std::move(res)); });
      });
      return;
    }
    const LongPoll lp = std::get<LongPoll>(o);
    std::weak_ptr<Session> weak = this->shared_from_this();
    auto exec = stream_.get_executor();
    sub_ = srv_->wait_for_change([weak, exec](uint64_t id, std::shared_ptr<void> hold) {
      asio::dispatch(exec, [weak, id, hold = std::move(hold)]() mutable {
        if (auto self = weak.lock(); self && self->sub_ == id) {  // not a later long-poll's
          self->hold_ = std::move(hold);
          self->wake();
        }
      });
    });
    if (srv_->core.snapshot()->generation != lp.generation) return wake();  // moved before we subscribed
    timer_.expires_after(lp.wait);
    timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (!ec) self->wake();
    });
    watch();
  }

  // While the long-poll waits, read the socket: a client that closes ends
  // the wait and frees the slot at once.
  void watch() {
    watching_ = true;
    stream_.async_read_some(buffer_.prepare(kWatchBytes),
                            beast::bind_front_handler(&Session::on_watch, this->shared_from_this()));
  }

  void on_watch(beast::error_code ec, size_t n) {
    watching_ = false;
    buffer_.commit(n);
    if (woken_) return answer_again();  // wake() cancelled this read to answer
    if (!sub_) return;
    if (ec) {
      // The client went away (or broke the connection): nobody to answer.
      srv_->stop_waiting(*sub_);
      sub_.reset();
      timer_.cancel();
      return lowest().close();
    }
    if (buffer_.size() < kHeaderLimit) watch();  // a pipelined request: parsed after the answer
  }

  // Long-poll ends: the generation moved or the wait passed. Answer with
  // whatever is current (200 with the new ETag, or 304), once the watching
  // read is out of the way (one read or write at a time on the stream).
  void wake() {
    if (!sub_) return;
    srv_->stop_waiting(*sub_);
    sub_.reset();
    timer_.cancel();
    if (watching_) {
      woken_ = true;
      beast::error_code ignored;
      lowest().socket().cancel(ignored);
      return;
    }
    answer_again();
  }

  void answer_again() {
    woken_ = false;
    RequestContext again = ctx_;
    again.allow_long_poll = false;
    dispatch(srv_->api.handle(req_, again));
  }

  void send(Response res) {
    srv_->core.api_metrics().observe(route_, res.result_int(), std::chrono::steady_clock::now() - t0_);
    res_ = std::move(res);
    if (srv_->stopped) res_.keep_alive(false);  // the daemon is stopping: the client reconnects to the next one
    keep_alive_ = res_.keep_alive();
    lowest().expires_after(srv_->opt.api.read_timeout);  // a client that does not read its answer is cut off too
    http::async_write(stream_, res_, beast::bind_front_handler(&Session::on_write, this->shared_from_this()));
  }

  void on_write(beast::error_code ec, size_t) {
    if (ec) return fail(ec, "write");
    if (large_) {
      // Kept alive, this connection would hold the large request's memory
      // until its next request, and beyond: assigning a short string keeps
      // the long one's allocation (libstdc++ copies into it). Moved out and
      // destroyed instead.
      large_ = false;
      { Request gone = std::move(req_); }
      { Response gone = std::move(res_); }
      parser_.reset();
      if (buffer_.size() == 0) buffer_.shrink_to_fit();
      srv_->trim_soon();
    }
    if (!keep_alive_) return linger_ ? linger_close() : close();
    hold_.reset();  // answered: the next long-poll's turn
    if (buffer_.size() > 0) return do_read();  // pipelined request already here
    if constexpr (kTls) {
      // OpenSSL may hold decrypted bytes the socket no longer shows; read
      // directly, with the idle timeout as the deadline for the first byte.
      parser_.emplace();
      parser_->body_limit(kMaxBody);
      parser_->header_limit(kHeaderLimit);
      lowest().expires_after(srv_->opt.api.idle_timeout);
      http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::on_read, this->shared_from_this()));
    } else {
      // Idle keep-alive: wait for the first byte of the next request under the
      // idle timeout, then give the whole request the read timeout.
      lowest().expires_never();
      timer_.expires_after(srv_->opt.api.idle_timeout);
      timer_.async_wait([self = this->shared_from_this()](beast::error_code tec) {
        if (!tec) {
          beast::error_code ignored;
          self->lowest().socket().cancel(ignored);
          self->idle_expired_ = true;
        }
      });
      lowest().socket().async_wait(tcp::socket::wait_read, [self = this->shared_from_this()](beast::error_code wec) {
        self->timer_.cancel();
        if (wec || self->idle_expired_) return self->close();
        self->do_read();
      });
    }
  }

  // After answering a request whose body was not read (413, a malformed
  // request), the client may still be sending it: closing at once would
  // make the kernel answer those bytes with a reset, which can destroy the
  // answer before the client has read it. So the sending side is shut down
  // and whatever still arrives is read and dropped, for at most 2 s and
  // 16 MiB, before the close (a lingering close, as Apache and nginx do).
  void linger_close() {
    if constexpr (kTls) {
      close();
    } else {
      beast::error_code ec;
      lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
      lowest().expires_after(std::chrono::seconds(2));
      drain();
    }
  }
  void drain() {
    lowest().async_read_some(asio::buffer(drain_),
                             [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                               self->drained_ += n;
                               if (ec || self->drained_ > (16u << 20)) return self->lowest().close();
                               self->drain();
                             });
  }

  void close() {
    beast::error_code ec;
    if constexpr (kTls) {
      lowest().expires_after(std::chrono::seconds(2));
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) { self->lowest().close(); });
    } else {
      lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
      lowest().close();
    }
  }

  std::shared_ptr<Server::Impl> srv_;
  // A woken long-poll's turn, given back once answered; at stop, the drain's
  // share, which waits for this session to be gone.
  std::shared_ptr<void> hold_;
  Stream stream_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Request req_;
  Response res_;
  RequestContext ctx_;
  std::optional<uint64_t> sub_;
  std::chrono::steady_clock::time_point t0_;
  std::string route_ = "other";
  bool keep_alive_ = false;
  bool idle_expired_ = false;
  bool linger_ = false;
  bool authenticated_ = false;
  bool large_ = false;
  bool watching_ = false;
  bool woken_ = false;
  size_t drained_ = 0;
  std::array<char, 4096> drain_{};
};

}  // namespace

void Server::Impl::drop_pending(Tracked& s) {
  if (!s.pending) return;
  s.pending = false;
  pending.erase(s.pending_at);
  auto it = pending_by_client.find(s.client);
  if (--it->second == 0) pending_by_client.erase(it);
}

template <class S>
void Server::Impl::admit(const std::shared_ptr<S>& s) {
  std::shared_ptr<Tracked> evicted;
  enum { Yes, PerClient, Full } verdict = Yes;
  {
    std::lock_guard g(slots_mu);
    auto it = pending_by_client.find(s->client);
    if (it != pending_by_client.end() && it->second >= opt.api.max_unauthenticated_per_client) {
      verdict = PerClient;
    } else if (live >= opt.api.max_connections) {
      for (auto& w : pending)
        if ((evicted = w.lock())) break;
      if (evicted) drop_pending(*evicted);
      else verdict = Full;
    }
    if (verdict == Yes) {
      ++live;
      s->counted = true;
      s->pending = true;
      s->pending_at = pending.insert(pending.end(), s);
      ++pending_by_client[s->client];
    }
  }
  if (verdict == PerClient)
    return refused_log([&](const std::string& more) {
      api_log()->warn("closing a new connection from {}: {} connections from that address have not authenticated "
                      "yet (api.max_unauthenticated_per_client){}",
                      s->peer, opt.api.max_unauthenticated_per_client, more);
    });
  if (verdict == Full)
    return refused_log([&](const std::string& more) {
      api_log()->warn("connection cap ({}) reached and every connection has authenticated: closing a new connection "
                      "from {}{}",
                      opt.api.max_connections, s->peer, more);
    });
  if (evicted) {
    evicted->evict();
    refused_log([&](const std::string& more) {
      api_log()->warn("connection cap ({}) reached: closing the oldest connection that has not authenticated (from "
                      "{}) to admit one from {}{}",
                      opt.api.max_connections, evicted->peer, s->peer, more);
    });
  }
  s->run();
}

void Server::Impl::on_accept(beast::error_code ec, tcp::socket sock) {
  if (stopped) return;
  if (ec) {
    accept_log([&](const std::string& more) {
      api_log()->warn("accept: {}{}{}", ec.message(),
                      ec == asio::error::no_descriptors || ec.value() == ENFILE
                          ? " (raise LimitNOFILE, or lower api.max_connections); accepting again in 100 ms"
                          : "",
                      more);
    });
    // A client that reset before it was accepted is nothing; anything else
    // would fail again at once (EMFILE, ENFILE, ENOBUFS): pause first.
    if (ec != asio::error::connection_aborted) {
      accept_pause.expires_after(kAcceptPause);
      accept_pause.async_wait([self = shared_from_this()](beast::error_code tec) {
        if (!tec && !self->stopped) self->do_accept();
      });
      return;
    }
    return do_accept();
  }
  ::fcntl(sock.native_handle(), F_SETFD, FD_CLOEXEC);  // see start(): children must not hold it
  beast::error_code pec;
  const tcp::endpoint remote = sock.remote_endpoint(pec);
  if (pec) return do_accept();  // already gone
  if (tls)
    admit(std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(shared_from_this(), remote, std::move(sock),
                                                                          *tls));
  else
    admit(std::make_shared<Session<beast::tcp_stream>>(shared_from_this(), remote, std::move(sock)));
  do_accept();
}

void Server::Impl::do_accept() {
  acceptor.async_accept(asio::make_strand(ioc), [self = shared_from_this()](beast::error_code ec, tcp::socket sock) {
    self->on_accept(ec, std::move(sock));
  });
}

Result<std::shared_ptr<asio::ssl::context>> load_tls_context(const TlsConfig& t) {
  try {
    auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
    ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1 |
                     asio::ssl::context::single_dh_use);
    // Each file is opened first, so that a missing or unreadable one is
    // named with the system's reason rather than as an OpenSSL error.
    auto load = [](const char* key, const std::string& path, const std::string& accepted, auto&& use) -> Status {
      Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd.valid()) return Error::from_errno(std::string(key) + ": " + path);
      beast::error_code ec;
      use(ec);
      if (ec) return Error{std::string(key) + ": " + path + ": " + ec.message() + " (accepted: " + accepted + ")"};
      return {};
    };
    if (auto s = load("tls.cert", t.cert, "a PEM certificate chain, the server's first",
                      [&](beast::error_code& ec) { ctx->use_certificate_chain_file(t.cert, ec); });
        !s)
      return s.take_error();
    if (auto s = load("tls.key", t.key, "the PEM private key of tls.cert " + t.cert,
                      [&](beast::error_code& ec) { ctx->use_private_key_file(t.key, asio::ssl::context::pem, ec); });
        !s)
      return s.take_error();
    if (t.mutual()) {
      if (auto s = load("tls.client_ca", t.client_ca, "PEM CA certificates",
                        [&](beast::error_code& ec) { ctx->load_verify_file(t.client_ca, ec); });
          !s)
        return s.take_error();
      ctx->set_verify_mode(asio::ssl::verify_peer);
    }
    return ctx;
  } catch (const boost::system::system_error& e) {
    return Error{std::string("tls: ") + e.what()};
  }
}

Server::Server(asio::io_context& ioc, asio::thread_pool& worker, Core& core, ServerOptions opt)
    : impl_(std::make_shared<Impl>(ioc, worker, core, std::move(opt))) {}

Server::~Server() {
  stop();
  // After this no callback of the core posts into the io_context, which may
  // go before the core does.
  if (impl_->core_sub) impl_->core.unsubscribe(*impl_->core_sub);
}

Result<uint16_t> Server::start() {
  auto hp = parse_host_port(impl_->opt.listen);
  if (!hp) return Error{"listen '" + impl_->opt.listen + "' " + hp.error().message};
  if (!impl_->opt.tls.enabled() && !impl_->opt.allow_plain_http_on_non_loopback && !is_loopback_host(hp->host))
    return Error{"listen '" + impl_->opt.listen +
                 "': plain HTTP on a non-loopback address is refused (set tls.cert/tls.key, or "
                 "allow_plain_http_on_non_loopback: true)"};
  if (impl_->opt.tls.enabled()) {
    impl_->tls = impl_->opt.tls_context;
    if (!impl_->tls) {
      auto t = load_tls_context(impl_->opt.tls);
      if (!t) return t.take_error();
      impl_->tls = std::move(*t);
    }
  }
  beast::error_code ec;
  std::string host = hp->host == "localhost" ? "127.0.0.1" : hp->host;
  auto addr = asio::ip::make_address(host, ec);
  if (ec) return Error{"listen '" + impl_->opt.listen + "': " + ec.message()};
  tcp::endpoint ep(addr, hp->port);
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  // Close-on-exec: processes we start (wireguard-go) outlive us and must not
  // keep our listening port, or a restarted agent cannot bind it again.
  if (!ec) ::fcntl(a.native_handle(), F_SETFD, FD_CLOEXEC);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Error{"listen " + impl_->opt.listen + ": " + ec.message(), ec.value()};
  uint16_t port = a.local_endpoint().port();
  if (!impl_->core_sub)
    impl_->core_sub = impl_->core.subscribe([weak = std::weak_ptr<Impl>(impl_), strand = impl_->wake_strand] {
      asio::post(strand, [weak] {
        if (auto impl = weak.lock()) impl->generation_moved();
      });
    });
  impl_->do_accept();
  return port;
}

void Server::stop(std::chrono::milliseconds grace, std::function<void()> drained) {
  if (!impl_) {
    if (drained) drained();
    return;
  }
  asio::post(impl_->wake_strand, [impl = impl_, grace, drained = std::move(drained)]() mutable {
    if (impl->stopped) {
      if (drained) drained();
      return;
    }
    impl->stopped = true;
    asio::post(impl->acceptor.get_executor(), [impl] {
      beast::error_code ec;
      impl->acceptor.close(ec);
      impl->accept_pause.cancel();
    });
    // `drained` once: when the last hold goes (every woken session has
    // answered and closed; at once when none waited) or when the grace
    // timer fires. The hold's deleter touches no I/O object: it may run as
    // the loop's last handlers are destroyed.
    struct Once {
      std::once_flag flag;
      std::function<void()> fn;
    };
    auto once = std::make_shared<Once>();
    once->fn = std::move(drained);
    auto fire = [once] {  // from the timer or from the last session's strand
      std::call_once(once->flag, [&] {
        if (once->fn) once->fn();
      });
    };
    auto timer = std::make_shared<asio::steady_timer>(impl->wake_strand, grace);
    timer->async_wait([fire, timer](beast::error_code) { fire(); });
    std::shared_ptr<void> hold(nullptr, [fire](void*) { fire(); });
    std::vector<std::pair<uint64_t, Impl::Waiter>> all;
    {
      std::lock_guard g(impl->waiting_mu);
      for (auto& w : impl->waiting) all.emplace_back(w.first, std::move(w.second));
      impl->waiting.clear();
    }
    for (auto& w : impl->waking) all.push_back(std::move(w));
    impl->waking.clear();
    if (!all.empty()) api_log()->info("stopping: answering {} waiting long-poll{}", all.size(), all.size() == 1 ? "" : "s");
    for (auto& w : all) w.second(w.first, hold);
  });
}

}  // namespace fa::agent
