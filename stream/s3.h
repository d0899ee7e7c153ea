// s3://bucket/key as an HTTPS URL plus a Signature V4 signer (docs/streaming.md, "S3").
//
// Credentials and place come from the usual environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN (optional), AWS_REGION or AWS_DEFAULT_REGION (default us-east-1), and an
// endpoint for S3-compatible stores: AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (path-style requests,
// http://host:port/bucket/key). Without an endpoint: https://bucket.s3.REGION.amazonaws.com/key.
// Without credentials requests go unsigned (public buckets).
#pragma once
#include <string>

#include "stream/http.h"
#include "stream/sigv4.h"

namespace dsc::stream {

struct S3Target {
  std::string bucket, key;
  std::string url;      // the HTTP(S) URL requests go to
  AwsCredentials credentials;
  Signer sign;          // empty without credentials
};

// Throws dsc::Error naming the URL when it is not s3://BUCKET/KEY.
S3Target ResolveS3(const std::string& s3_url);

}  // namespace dsc::stream
