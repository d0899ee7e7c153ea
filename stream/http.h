// Ranged HTTP(S) GETs over libcurl for the streaming reader: one HttpClient per thread, so each keeps
// its own connection alive between requests (connection reuse without locking a shared handle).
//
// Contract: Get returns the exact bytes [off, off+n) of the resource or throws dsc::Error naming the
// URL, the caller's label (e.g. "block 7") and the server's last answer. Timeouts, refused or dropped
// connections, 5xx, 408 and 429 are retried with exponential back-off; 404, 403, 412 and the like
// are not (retrying cannot change them).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dsc::stream {

struct HttpOptions {
  int attempts = 7;                 // tries per request (so 6 retries)
  int backoff_ms = 100;             // wait before the first retry, doubling up to backoff_max_ms
  int backoff_max_ms = 3000;
  int connect_timeout_ms = 5000;
  int stall_timeout_s = 20;         // a transfer slower than 1 KiB/s for this long is a timeout
};

// What the server said to one request.
struct HttpReply {
  long status = 0;            // HTTP status, 0 when no answer (connection failed)
  std::string etag;           // as sent, quotes included; empty when the server sends none
  uint64_t total_size = 0;    // from Content-Range (bytes a-b/TOTAL), 0 when absent
  std::string error;          // curl's error text when status is 0
};

// Adds the headers a request needs (S3's Signature V4); called before every attempt, since a
// signature carries the time. Arguments: the URL, the header lines so far ("Name: value", to extend).
using Signer = std::function<void(const std::string& url, std::vector<std::string>* headers)>;

// Where a transfer's body goes, piece by piece as it arrives: Begin before each attempt (a retry starts
// over), then Write for each piece in order (`at`: its offset in the range). Write returning false
// aborts the transfer (not retried).
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void Begin() = 0;
  virtual bool Write(uint64_t at, const uint8_t* p, size_t n) = 0;
};

class HttpClient {
 public:
  explicit HttpClient(HttpOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Bytes [off, off+n) of `url` into *out (resized to n). `if_match`: the ETag the resource must
  // still have (empty: none asked). `what` names the range in errors ("header", "block 3").
  // `name` names the resource in errors ("" = the URL without credentials or query).
  HttpReply Get(const std::string& url, uint64_t off, uint64_t n, const std::string& if_match, const std::string& what,
                std::vector<uint8_t>* out, const Signer& sign = {}, const std::string& name = "");
  // The same, the bytes handed to `sink` as they arrive instead of kept (no copy of the whole range).
  HttpReply Get(const std::string& url, uint64_t off, uint64_t n, const std::string& if_match, const std::string& what, Sink* sink,
                const Signer& sign = {}, const std::string& name = "");

  // The first n bytes of `url`, or the whole resource when it is shorter (a 206 whose Content-Range
  // ends at the resource's end, or a whole 200), for opening a file of unknown size: *out holds what
  // came, and the reply's total_size is the resource's size.
  HttpReply GetPrefix(const std::string& url, uint64_t n, const std::string& what, std::vector<uint8_t>* out,
                      const Signer& sign = {}, const std::string& name = "");

  // Requests sent by this client (every attempt counts), and bytes received.
  uint64_t requests() const { return requests_; }
  uint64_t bytes() const { return bytes_; }

 private:
  // `prefix`: GetPrefix's answer shorter than n, clipped at the resource's end, is whole.
  HttpReply Once(const std::string& url, uint64_t off, uint64_t n, const std::string& if_match, Sink* sink,
                 const Signer& sign, std::string* body_head, bool prefix);
  HttpReply Fetch(const std::string& url, uint64_t off, uint64_t n, const std::string& if_match, const std::string& what,
                  Sink* sink, const Signer& sign, const std::string& name, bool prefix);
  HttpOptions opt_;
  void* curl_ = nullptr;  // CURL*, kept for its connection
  uint64_t requests_ = 0, bytes_ = 0;
};

// The URL without credentials or query string, for messages.
std::string Redact(const std::string& url);

}  // namespace dsc::stream
