#include "stream/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstdio>

namespace dsc::stream {

namespace {

std::string Hex(const unsigned char* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = d[p[i] >> 4];
    s[2 * i + 1] = d[p[i] & 15];
  }
  return s;
}

std::string Hmac(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), int(key.size()), reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// Header values: leading and trailing spaces trimmed, inner runs of spaces made one.
std::string TrimValue(const std::string& v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

// The query's parameters sorted by encoded name, then value ("a=1&b=2").
std::string CanonicalQuery(const std::string& q) {
  std::vector<std::pair<std::string, std::string>> params;
  size_t start = 0;
  while (start < q.size()) {
    size_t amp = q.find('&', start);
    if (amp == std::string::npos) amp = q.size();
    const std::string kv = q.substr(start, amp - start);
    if (!kv.empty()) {
      const size_t eq = kv.find('=');
      params.emplace_back(UriEncode(kv.substr(0, eq), false), eq == std::string::npos ? "" : UriEncode(kv.substr(eq + 1), false));
    }
    start = amp + 1;
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [k, v] : params) out += (out.empty() ? "" : "&") + k + "=" + v;
  return out;
}

}  // namespace

std::string UriEncode(const std::string& s, bool keep_slash) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += char(c);
    } else {
      char b[4];
      std::snprintf(b, sizeof b, "%%%02X", c);
      out += b;
    }
  }
  return out;
}

std::string Sha256Hex(const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out, &len, EVP_sha256(), nullptr);
  return Hex(out, len);
}

std::string SigV4Authorization(const AwsCredentials& c, const std::string& service, const std::string& method,
                               const std::string& url, std::vector<std::pair<std::string, std::string>> headers,
                               const std::string& payload_hash, const std::string& amz_date, std::string* string_to_sign) {
  // The path and query as sent: S3 object keys are encoded once by the caller (UriEncode), and the
  // canonical URI is that path as it is.
  const size_t scheme = url.find("://");
  const size_t slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  std::string path = slash == std::string::npos ? "/" : url.substr(slash);
  std::string query;
  if (const size_t q = path.find('?'); q != std::string::npos) {
    query = path.substr(q + 1);
    path = path.substr(0, q);
  }
  for (auto& [k, v] : headers) {
    k = Lower(k);
    v = TrimValue(v);
  }
  std::sort(headers.begin(), headers.end());
  std::string canonical_headers, signed_headers;
  for (const auto& [k, v] : headers) {
    canonical_headers += k + ":" + v + "\n";
    signed_headers += (signed_headers.empty() ? "" : ";") + k;
  }
  const std::string canonical = method + "\n" + path + "\n" + CanonicalQuery(query) + "\n" + canonical_headers + "\n" +
                                signed_headers + "\n" + payload_hash;
  const std::string day = amz_date.substr(0, 8);
  const std::string scope = day + "/" + c.region + "/" + service + "/aws4_request";
  const std::string sts = "AWS4-HMAC-SHA256\n" + amz_date + "\n" + scope + "\n" + Sha256Hex(canonical);
  if (string_to_sign) *string_to_sign = sts;
  const std::string key = Hmac(Hmac(Hmac(Hmac("AWS4" + c.secret_key, day), c.region), service), "aws4_request");
  const std::string sig = Hmac(key, sts);
  return "AWS4-HMAC-SHA256 Credential=" + c.access_key + "/" + scope + ", SignedHeaders=" + signed_headers +
         ", Signature=" + Hex(reinterpret_cast<const unsigned char*>(sig.data()), sig.size());
}

}  // namespace dsc::stream
