// AWS Signature Version 4 for S3 GETs (stream/s3.h), checked against AWS's published examples in
// tests/sigv4_test.cc. Only what a ranged GET needs: no request body, no chunked signing.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dsc::stream {

struct AwsCredentials {
  std::string access_key, secret_key, session_token;  // AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN
  std::string region = "us-east-1";
};

// SHA-256 of `data`, as 64 lowercase hex digits.
std::string Sha256Hex(const std::string& data);

// The Authorization header's value for a request. `url` is scheme://host[:port]/path[?query] (path
// and query as sent); `headers` are the request's headers (name, value) to sign, Host included, e.g.
// {"Host", "examplebucket.s3.amazonaws.com"}, {"X-Amz-Date", "20130524T000000Z"}; `amz_date` is
// the X-Amz-Date value (YYYYMMDD'T'HHMMSS'Z'); `payload_hash` the body's SHA-256 in hex.
// `string_to_sign`, when given, receives the string that was signed (for tests).
std::string SigV4Authorization(const AwsCredentials& c, const std::string& service, const std::string& method,
                               const std::string& url, std::vector<std::pair<std::string, std::string>> headers,
                               const std::string& payload_hash, const std::string& amz_date,
                               std::string* string_to_sign = nullptr);

// S3's path-safe encoding of an object key (RFC 3986 unreserved characters and '/' kept).
std::string UriEncode(const std::string& s, bool keep_slash);

}  // namespace dsc::stream
