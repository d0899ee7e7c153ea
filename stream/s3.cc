#include "stream/s3.h"

#include <ctime>

#include "format/error.h"

namespace dsc::stream {

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string AmzDate() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[17];
  std::strftime(b, sizeof b, "%Y%m%dT%H%M%SZ", &tm);
  return b;
}

}  // namespace

S3Target ResolveS3(const std::string& s3_url) {
  S3Target t;
  const std::string rest = s3_url.substr(5);  // after "s3://"
  const size_t slash = rest.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 >= rest.size())
    throw Error(s3_url + ": expected s3://BUCKET/KEY");
  t.bucket = rest.substr(0, slash);
  t.key = rest.substr(slash + 1);
  t.credentials.access_key = Env("AWS_ACCESS_KEY_ID");
  t.credentials.secret_key = Env("AWS_SECRET_ACCESS_KEY");
  t.credentials.session_token = Env("AWS_SESSION_TOKEN");
  std::string region = Env("AWS_REGION");
  if (region.empty()) region = Env("AWS_DEFAULT_REGION");
  if (!region.empty()) t.credentials.region = region;
  std::string endpoint = Env("AWS_ENDPOINT_URL_S3");
  if (endpoint.empty()) endpoint = Env("AWS_ENDPOINT_URL");
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  const std::string key = UriEncode(t.key, true);
  t.url = endpoint.empty() ? "https://" + t.bucket + ".s3." + t.credentials.region + ".amazonaws.com/" + key
                           : endpoint + "/" + UriEncode(t.bucket, false) + "/" + key;
  if (t.credentials.access_key.empty() || t.credentials.secret_key.empty()) return t;
  const AwsCredentials creds = t.credentials;
  t.sign = [creds](const std::string& url, std::vector<std::string>* lines) {
    const size_t scheme = url.find("://");
    const size_t host_end = url.find('/', scheme + 3);
    const std::string host = url.substr(scheme + 3, host_end == std::string::npos ? std::string::npos : host_end - scheme - 3);
    const std::string payload = Sha256Hex("");
    const std::string date = AmzDate();
    lines->push_back("x-amz-date: " + date);
    lines->push_back("x-amz-content-sha256: " + payload);
    if (!creds.session_token.empty()) lines->push_back("x-amz-security-token: " + creds.session_token);
    std::vector<std::pair<std::string, std::string>> headers = {{"host", host}};
    for (const auto& l : *lines) {
      const size_t colon = l.find(':');
      headers.emplace_back(l.substr(0, colon), l.substr(colon + 1));
    }
    lines->push_back("Authorization: " + SigV4Authorization(creds, "s3", "GET", url, headers, payload, date));
  };
  return t;
}

}  // namespace dsc::stream
