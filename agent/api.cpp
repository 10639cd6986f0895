// SPDX-License-Identifier: Apache-2.0
#include "agent/api.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "agent/rdma_service.hpp"
#include "common/json.hpp"

namespace fa::agent {

using nlohmann::json;

namespace {

// Boost 1.74's beast::string_view is boost::string_view; convert at the edge.
std::string_view sv(boost::beast::string_view v) { return {v.data(), v.size()}; }

constexpr std::string_view kJson = "application/json";

// Every answer's JSON text. What a client sent may come back in it (a path,
// a query key, a Content-Type, a field's value) and need not be UTF-8:
// such bytes are replaced, never a reason to throw on the I/O thread.
std::string text_of(const json& doc) { return doc.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"; }

Response make(int status, unsigned version, bool keep_alive, std::string body,
              std::string_view content_type = kJson) {
  Response res{static_cast<http::status>(status), version};
  res.set(http::field::server, "fabric-agent/" FA_VERSION);
  if (!body.empty() || status != 304) res.set(http::field::content_type, boost::beast::string_view(content_type.data(), content_type.size()));
  res.set(http::field::cache_control, "no-store");
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  if (status != 304) res.prepare_payload();
  return res;
}

Response json_response(int status, const json& doc, const Request& req) {
  return make(status, req.version(), req.keep_alive(), text_of(doc));
}

Response from_result(const ApiResult& r, const Request& req) {
  if (const json* doc = std::get_if<json>(&r)) return json_response(200, *doc, req);
  const ApiFailure& f = std::get<ApiFailure>(r);
  Response res = Api::error(f.status, f.code, f.message, f.field, req.version(), req.keep_alive());
  if (!f.details.is_null()) {
    json doc = json::parse(res.body());
    doc["error"]["details"] = f.details;
    res.body() = text_of(doc);
    res.prepare_payload();
  }
  return res;
}

// Where a body stopped being JSON, for the 400: its byte offset, or that it
// holds a number no double can hold. Read again only on this error path,
// and nothing of the body is echoed (it may carry anything).
std::string why_not_json(const std::string& body) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos)
    return "the request body is empty; expected a JSON document";
  try {
    [[maybe_unused]] json parsed = json::parse(body);
  } catch (const json::parse_error& e) {
    // nlohmann counts bytes from 1, and the end of the input as one more.
    if (e.byte > body.size())
      return "the request body is not valid JSON (it ends after " + std::to_string(body.size()) +
             " bytes, in the middle of a value)";
    return "the request body is not valid JSON (at byte " + std::to_string(e.byte) + " of " +
           std::to_string(body.size()) + ")";
  } catch (const json::out_of_range&) {
    return "the request body holds a number no double can hold";
  } catch (const json::exception&) {
  }
  return "the request body is not valid JSON";
}

// Weak comparison (RFC 9110 8.8.3.2): W/"x" matches "x"; "*" matches anything.
bool etag_matches(std::string_view header, std::string_view etag) {
  auto strip = [](std::string_view t) {
    if (t.substr(0, 2) == "W/") t.remove_prefix(2);
    return t;
  };
  const std::string_view want = strip(etag);
  size_t pos = 0;
  while (pos <= header.size()) {
    size_t comma = header.find(',', pos);
    std::string_view item = header.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item == "*" || strip(item) == want) return true;
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return false;
}

struct Target {
  std::string_view path;
  std::string_view query;
};

Target split(std::string_view t) {
  auto q = t.find('?');
  if (q == std::string_view::npos) return {t, {}};
  return {t.substr(0, q), t.substr(q + 1)};
}

Response method_not_allowed(const Request& req, const char* allow) {
  Response res = Api::error(405, "method_not_allowed",
                            std::string(req.method_string()) + " is not allowed on " + std::string(split(sv(req.target())).path) +
                                "; accepted: " + allow,
                            "", req.version(), req.keep_alive());
  res.set(http::field::allow, allow);
  return res;
}

// 415 unless the body is declared JSON (media types are case-insensitive,
// RFC 9110 8.3.1; parameters such as charset are ignored).
std::optional<Response> not_json_type(const Request& req) {
  std::string_view ct = sv(req[http::field::content_type]);
  std::string_view base = ct.substr(0, ct.find(';'));
  while (!base.empty() && (base.back() == ' ' || base.back() == '\t')) base.remove_suffix(1);
  while (!base.empty() && (base.front() == ' ' || base.front() == '\t')) base.remove_prefix(1);
  const bool json_type = base.size() == kJson.size() &&
                         std::equal(base.begin(), base.end(), kJson.begin(), [](char a, char b) {
                           return std::tolower(static_cast<unsigned char>(a)) == b;
                         });
  if (json_type) return std::nullopt;
  return Api::error(415, "unsupported_media_type",
                    "Content-Type '" + std::string(ct) + "' is not accepted; accepted: application/json",
                    "Content-Type", req.version(), req.keep_alive());
}

// The JSON body of a PUT/POST: 415 for another media type, 400 when not
// JSON. An empty body reads as {} where `empty_ok`.
std::variant<json, Response> json_body(const Request& req, bool empty_ok) {
  if (empty_ok && req.body().empty()) return json::object();
  if (auto r = not_json_type(req)) return std::move(*r);
  bool too_deep = false;
  json doc = fa::parse_json(req.body(), &too_deep);
  if (doc.is_discarded())
    return Api::error(400, "malformed_json",
                      too_deep ? "the request body nests arrays and objects deeper than " +
                                     std::to_string(fa::kJsonMaxDepth) + " levels"
                               : why_not_json(req.body()),
                      "", req.version(), req.keep_alive());
  return doc;
}

}  // namespace

Response Api::error(int status, const std::string& code, const std::string& message, const std::string& field,
                    unsigned version, bool keep_alive) {
  json doc = {{"error", {{"code", code}, {"message", message}, {"field", field.empty() ? json(nullptr) : json(field)}}}};
  Response res = make(status, version, keep_alive, text_of(doc));
  if (status == 401) res.set(http::field::www_authenticate, "Bearer realm=\"fabric-agent\"");
  return res;
}

std::string_view Api::route_of(std::string_view target) {
  std::string_view p = split(target).path;
  for (std::string_view r : {"/healthz", "/v1/status", "/metrics", "/v1/mesh", "/v1/login", "/v1/pods", "/v1/probes/rdma/serve",
                             "/v1/probes/rdma/run"})
    if (p == r) return r;
  return "other";
}

Outcome Api::handle(const Request& req, const RequestContext& ctx) const {
  const auto [path, query] = split(sv(req.target()));
  const unsigned ver = req.version();
  const bool ka = req.keep_alive();

  if (path == "/healthz") {
    if (req.method() != http::verb::get && req.method() != http::verb::head) return method_not_allowed(req, "GET, HEAD");
    Response res = make(200, ver, ka, "{\"status\":\"ok\"}\n");
    // HEAD: the headers of the GET, Content-Length included, and no body
    // (RFC 9110 9.3.2); a body here would be read as the next response.
    if (req.method() == http::verb::head) res.body().clear();
    return res;
  }

  // Authentication before routing: an unauthenticated client learns nothing,
  // not even which paths exist.
  if (!ctx.client_cert_verified) {
    auto auth = core_.check_token(sv(req[http::field::authorization]));
    if (auth == AuthResult::Missing)
      return error(401, "unauthorized",
                   "authentication required: send 'Authorization: Bearer <token>' (token file: see docs/api.md) or a "
                   "client certificate signed by tls.client_ca",
                   "Authorization", ver, ka);
    if (auth == AuthResult::Wrong) {
      // RFC 6750 3.1: a token that is not valid is 401 with invalid_token
      // (403 is for a valid credential without the right).
      Response res = error(401, "invalid_token", "the bearer token is not valid for this agent", "Authorization",
                           ver, ka);
      res.set(http::field::www_authenticate, "Bearer realm=\"fabric-agent\", error=\"invalid_token\"");
      return res;
    }
  }

  if (path == "/v1/status") {
    if (req.method() != http::verb::get) return method_not_allowed(req, "GET");
    long wait = 0;
    if (!query.empty()) {
      // Only ?wait=SECONDS is accepted; anything else is a client bug worth naming.
      for (size_t pos = 0; pos <= query.size();) {
        size_t amp = query.find('&', pos);
        std::string_view kv = query.substr(pos, amp == std::string_view::npos ? std::string_view::npos : amp - pos);
        auto eq = kv.find('=');
        std::string_view k = kv.substr(0, eq), v = eq == std::string_view::npos ? std::string_view{} : kv.substr(eq + 1);
        const long cap = core_.config().api.max_wait.count();
        if (k == "wait") {
          auto [e, ec] = std::from_chars(v.data(), v.data() + v.size(), wait);
          if (v.empty() || ec != std::errc() || e != v.data() + v.size() || wait < 0)
            return error(400, "bad_request",
                         "wait '" + std::string(v) + "' is not accepted; accepted: an integer number of seconds 0.." +
                             std::to_string(cap),
                         "wait", ver, ka);
          wait = std::min(wait, cap);
        } else if (!k.empty()) {
          return error(400, "bad_request", "unknown query parameter '" + std::string(k) + "'; accepted: wait", std::string(k), ver, ka);
        }
        if (amp == std::string_view::npos) break;
        pos = amp + 1;
      }
    }
    auto snap = core_.snapshot();
    std::string_view inm = sv(req[http::field::if_none_match]);
    if (!inm.empty() && etag_matches(inm, snap->etag)) {
      if (wait > 0 && ctx.allow_long_poll) return LongPoll{snap->generation, std::chrono::seconds(wait)};
      Response res = make(304, ver, ka, "");
      res.set(http::field::etag, snap->etag);
      return res;
    }
    Response res = make(200, ver, ka, core_.render_status(*snap));
    res.set(http::field::etag, snap->etag);
    return res;
  }

  if (path == "/metrics") {
    if (req.method() != http::verb::get) return method_not_allowed(req, "GET");
    Core* core = &core_;
    return Deferred{[core, ver, ka] {
      return make(200, ver, ka, core->metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
    }};
  }

  if (path == "/v1/mesh") {
    // The request is captured by value: the worker runs after this frame is gone.
    Core* core = &core_;
    switch (req.method()) {
      case http::verb::get:
        return Deferred{[core, req] { return from_result(core->get_mesh(), req); }};
      case http::verb::delete_:
        return Deferred{[core, req] { return from_result(core->delete_mesh(), req); }};
      case http::verb::put:
      case http::verb::patch: {
        if (auto r = not_json_type(req)) return std::move(*r);
        // Parsed on the worker: a large body would hold the I/O thread.
        return Deferred{[core, req] {
          auto parsed = json_body(req, false);
          if (auto* r = std::get_if<Response>(&parsed)) return std::move(*r);
          const json& doc = std::get<json>(parsed);
          return from_result(req.method() == http::verb::put ? core->put_mesh(doc) : core->patch_mesh(doc), req);
        }};
      }
      default:
        return method_not_allowed(req, "GET, PUT, PATCH, DELETE");
    }
  }

  if (path == "/v1/login") {
    Core* core = &core_;
    switch (req.method()) {
      case http::verb::get:
        return Deferred{[core, req] { return from_result(core->get_login(), req); }};
      case http::verb::delete_:
        return Deferred{[core, req] { return from_result(core->delete_login(), req); }};
      case http::verb::put: {
        if (auto r = not_json_type(req)) return std::move(*r);
        return Deferred{[core, req] {
          auto parsed = json_body(req, false);
          if (auto* r = std::get_if<Response>(&parsed)) return std::move(*r);
          return from_result(core->put_login(std::get<json>(parsed)), req);
        }};
      }
      default:
        return method_not_allowed(req, "GET, PUT, DELETE");
    }
  }

  if (path == "/v1/pods") {
    if (req.method() != http::verb::get) return method_not_allowed(req, "GET");
    return json_response(200, core_.pods(), req);
  }

  if (path == "/v1/probes/rdma/serve") {
    RdmaService* rdma = &core_.rdma();
    switch (req.method()) {
      case http::verb::get:
        return from_result(rdma->serve_status(), req);
      case http::verb::delete_:
        return Deferred{[rdma, req] { return from_result(rdma->serve_stop(), req); }, true};
      case http::verb::post: {
        auto parsed = json_body(req, true);
        if (auto* r = std::get_if<Response>(&parsed)) return std::move(*r);
        return Deferred{[rdma, req, doc = std::get<json>(parsed)] { return from_result(rdma->serve_start(doc), req); },
                        true};
      }
      default:
        return method_not_allowed(req, "GET, POST, DELETE");
    }
  }

  if (path == "/v1/probes/rdma/run") {
    if (req.method() != http::verb::post) return method_not_allowed(req, "POST");
    auto parsed = json_body(req, false);
    if (auto* r = std::get_if<Response>(&parsed)) return std::move(*r);
    RdmaService* rdma = &core_.rdma();
    return Deferred{[rdma, req, doc = std::get<json>(parsed)] { return from_result(rdma->run(doc), req); }, true};
  }

  return error(404, "not_found", "no such endpoint: " + std::string(path), "", ver, ka);
}

}  // namespace fa::agent
