#include "stream/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "format/error.h"

namespace dsc::stream {

namespace {

std::once_flag g_curl_init;

// One transfer's state, seen by curl's callbacks.
struct Transfer {
  Sink* sink = nullptr;
  bool sink_failed = false;
  uint64_t want = 0;       // bytes asked for
  uint64_t got = 0;
  bool overflow = false;   // more bytes than asked: the server ignored the range
  long status = 0;
  std::string etag, content_range, body_head;
};

size_t OnBody(char* p, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t len = size * count;
  if (t->status != 206 && t->status != 200) {  // an error page: keep its start for the message
    t->body_head.append(p, std::min<size_t>(len, 300 - std::min<size_t>(300, t->body_head.size())));
    return len;
  }
  if (t->got + len > t->want) {
    t->overflow = true;
    return 0;  // aborts the transfer: never buffer more than was asked for
  }
  if (!t->sink->Write(t->got, reinterpret_cast<const uint8_t*>(p), len)) {
    t->sink_failed = true;
    return 0;
  }
  t->got += len;
  return len;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

size_t OnHeader(char* p, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t len = size * count;
  std::string line(p, len);
  if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect or 100-continue): start over
    t->etag.clear();
    t->content_range.clear();
    const size_t sp = line.find(' ');
    t->status = sp == std::string::npos ? 0 : std::strtol(line.c_str() + sp + 1, nullptr, 10);
    return len;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return len;
  std::string key = line.substr(0, colon);
  std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (key == "etag") t->etag = Trim(line.substr(colon + 1));
  if (key == "content-range") t->content_range = Trim(line.substr(colon + 1));
  return len;
}

bool Retryable(const HttpReply& r) {
  if (r.status == 0) return true;  // no answer: refused, reset, timed out
  return r.status >= 500 || r.status == 408 || r.status == 429;
}

std::string Answer(const HttpReply& r, const std::string& body_head) {
  if (r.status == 0) return "no answer (" + r.error + ")";
  std::string s = "HTTP " + std::to_string(r.status);
  if (!r.error.empty()) s += " (" + r.error + ")";
  std::string body;
  for (char c : body_head) body += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  body = Trim(body);
  if (!body.empty()) s += ": " + body.substr(0, 200);
  return s;
}

// The whole range in a vector.
class VectorSink : public Sink {
 public:
  VectorSink(std::vector<uint8_t>* out, uint64_t n) : out_(out) { out_->resize(n); }
  void Begin() override { got_ = 0; }
  bool Write(uint64_t at, const uint8_t* p, size_t n) override {
    std::memcpy(out_->data() + at, p, n);
    got_ = at + n;
    return true;
  }
  uint64_t got() const { return got_; }

 private:
  std::vector<uint8_t>* out_;
  uint64_t got_ = 0;
};

}  // namespace

std::string Redact(const std::string& url) {
  std::string s = url.substr(0, url.find('?'));
  const size_t scheme = s.find("://");
  const size_t at = s.find('@');
  if (scheme != std::string::npos && at != std::string::npos && at > scheme && at < s.find('/', scheme + 3))
    s = s.substr(0, scheme + 3) + s.substr(at + 1);
  return s;
}

HttpClient::HttpClient(HttpOptions options) : opt_(options) {
  std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  curl_ = curl_easy_init();
  if (!curl_) throw Error("libcurl: cannot create a handle");
}

HttpClient::~HttpClient() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

HttpReply HttpClient::Once(const std::string& url, uint64_t off, uint64_t n, const std::string& if_match, Sink* sink,
                           const Signer& sign, std::string* body_head, bool prefix) {
  CURL* c = static_cast<CURL*>(curl_);
  curl_easy_reset(c);  // keeps the connection cache: the next request to the host reuses the socket
  Transfer t;
  t.sink = sink;
  t.want = n;
  sink->Begin();
  const std::string range = std::to_string(off) + "-" + std::to_string(off + n - 1);
  std::vector<std::string> lines;
  lines.push_back("Range: bytes=" + range);
  if (!if_match.empty()) lines.push_back("If-Match: " + if_match);
  if (sign) sign(url, &lines);
  curl_slist* headers = nullptr;
  for (const auto& l : lines) headers = curl_slist_append(headers, l.c_str());
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // worker threads: no SIGALRM for name lookups
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, long(opt_.connect_timeout_ms));
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, long(opt_.stall_timeout_s));
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
  // Larger pieces than the default 16 KiB: fewer receive calls and sink writes per block.
  curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 256L << 10);
  ++requests_;
  const CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(headers);
  HttpReply r;
  r.status = t.status;
  r.etag = t.etag;
  bytes_ += t.got;
  *body_head = t.body_head;
  if (t.sink_failed) {
    r.error = "the receiver stopped the transfer";
    r.status = -1;  // not retried: the receiver knows why
    return r;
  }
  if (rc != CURLE_OK && !t.overflow) {
    r.error = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    if (rc != CURLE_WRITE_ERROR) r.status = 0;  // the answer did not arrive whole: treat as none
    return r;
  }
  if (prefix && r.status == 200 && !t.overflow && off == 0 && t.got < n) {
    r.total_size = t.got;  // the whole resource, shorter than the prefix asked for
    return r;
  }
  if (t.overflow || (r.status == 200 && !(off == 0 && t.got == n))) {
    // A whole file shorter than the range asked for from its start is short, not a server without ranges.
    r.error = !t.overflow && off == 0 && t.got < n
                  ? "the server's file is " + std::to_string(t.got) + " bytes, fewer than the " + std::to_string(n) +
                        " asked for: too short for a dsc file (truncated, or not one)"
                  : "the server ignored the Range header (sent more than the " + std::to_string(n) +
                        " bytes asked for): it cannot serve dsc files for streaming";
    r.status = r.status ? r.status : 200;
    return r;
  }
  if (r.status == 206 || r.status == 200) {
    // Content-Range: bytes a-b/TOTAL
    const size_t slash = t.content_range.find('/');
    if (slash != std::string::npos) r.total_size = std::strtoull(t.content_range.c_str() + slash + 1, nullptr, 10);
    const bool clipped_at_end = prefix && t.got < n && r.total_size == off + t.got;
    if (t.got != n && !clipped_at_end) r.error = "short answer: " + std::to_string(t.got) + " of " + std::to_string(n) + " bytes";
  }
  return r;
}

HttpReply HttpClient::Get(const std::string& url, uint64_t off, uint64_t n, const std::string& if_match,
                          const std::string& what, std::vector<uint8_t>* out, const Signer& sign, const std::string& name) {
  VectorSink sink(out, n);
  return Get(url, off, n, if_match, what, &sink, sign, name);
}

HttpReply HttpClient::Get(const std::string& url, uint64_t off, uint64_t n, const std::string& if_match,
                          const std::string& what, Sink* sink, const Signer& sign, const std::string& name) {
  return Fetch(url, off, n, if_match, what, sink, sign, name, false);
}

HttpReply HttpClient::GetPrefix(const std::string& url, uint64_t n, const std::string& what, std::vector<uint8_t>* out,
                                const Signer& sign, const std::string& name) {
  VectorSink sink(out, n);
  const HttpReply r = Fetch(url, 0, n, "", what, &sink, sign, name, true);
  out->resize(sink.got());
  return r;
}

HttpReply HttpClient::Fetch(const std::string& url, uint64_t off, uint64_t n, const std::string& if_match, const std::string& what,
                            Sink* sink, const Signer& sign, const std::string& name, bool prefix) {
  int wait_ms = opt_.backoff_ms;
  HttpReply r;
  std::string body_head;
  for (int attempt = 1;; ++attempt) {
    r = Once(url, off, n, if_match, sink, sign, &body_head, prefix);
    const bool ok = (r.status == 206 || r.status == 200) && r.error.empty();
    if (ok) return r;
    const bool short_answer = (r.status == 206 || r.status == 200) && !r.error.empty() && r.error.rfind("short", 0) == 0;
    if (!(Retryable(r) || short_answer) || attempt >= opt_.attempts) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    wait_ms = std::min(wait_ms * 2, opt_.backoff_max_ms);
  }
  std::string why = Answer(r, body_head);
  if (r.status == 412 || r.status == 416)
    why += "; the file changed on the server since it was opened (its ETag was " + (if_match.empty() ? "unset" : if_match) + ")";
  if (r.status == 403 || r.status == 401) why += "; check the credentials and the permissions on the object";
  throw Error((name.empty() ? Redact(url) : name) + ": " + what + " (bytes " + std::to_string(off) + ".." + std::to_string(off + n) + "): " + why +
              (Retryable(r) ? " (after " + std::to_string(opt_.attempts) + " attempts)" : ""));
}

}  // namespace dsc::stream
