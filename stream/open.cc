#include "stream/open.h"

#include "format/error.h"
#include "stream/s3.h"
#include "stream/url_source.h"

namespace dsc::stream {

std::unique_ptr<format::ByteSource> OpenUrl(const std::string& url, const std::string& cache_dir, uint64_t cache_budget) {
  StreamOptions o;
  o.cache_dir = cache_dir;
  o.budget = cache_budget;
  if (url.rfind("s3://", 0) != 0) return OpenUrlSource(url, o);
  S3Target t = ResolveS3(url);
  o.sign = t.sign;
  o.display_name = url;
  try {
    return OpenUrlSource(t.url, o);
  } catch (const Error& e) {
    const std::string m = e.what();
    if (m.find("HTTP 403") == std::string::npos && m.find("HTTP 401") == std::string::npos) throw;
    throw Error(m + " [S3 bucket '" + t.bucket + "', " +
                (t.credentials.access_key.empty() ? std::string("no credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are unset")
                                                  : "access key ID " + t.credentials.access_key + ", region " + t.credentials.region) +
                "]");
  }
}

}  // namespace dsc::stream
