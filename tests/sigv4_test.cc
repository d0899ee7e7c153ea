// Signature Version 4 against AWS's own published examples (expected values as AWS documents them:
// the SigV4 test suite's get-vanilla cases, and the S3 API reference's "GET Object" example).
#include <gtest/gtest.h>

#include "stream/sigv4.h"

namespace dsc::stream {
namespace {

const char* kEmptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

TEST(SigV4, EmptyPayloadHash) { EXPECT_EQ(Sha256Hex(""), kEmptyHash); }

TEST(SigV4, TestSuiteGetVanilla) {
  AwsCredentials c{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "", "us-east-1"};
  std::string sts;
  EXPECT_EQ(SigV4Authorization(c, "service", "GET", "https://example.amazonaws.com/",
                               {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}}, kEmptyHash,
                               "20150830T123600Z", &sts),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, "
            "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
  EXPECT_EQ(sts, "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
                 "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
}

TEST(SigV4, TestSuiteGetVanillaQueryOrderKeyCase) {
  AwsCredentials c{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "", "us-east-1"};
  const std::string auth = SigV4Authorization(c, "service", "GET", "https://example.amazonaws.com/?Param2=value2&Param1=value1",
                                              {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}}, kEmptyHash,
                                              "20150830T123600Z");
  EXPECT_NE(auth.find("Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"), std::string::npos) << auth;
}

TEST(SigV4, S3GetObjectExample) {
  AwsCredentials c{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "", "us-east-1"};
  std::string sts;
  const std::string auth = SigV4Authorization(c, "s3", "GET", "https://examplebucket.s3.amazonaws.com/test.txt",
                                              {{"Host", "examplebucket.s3.amazonaws.com"},
                                               {"Range", "bytes=0-9"},
                                               {"x-amz-content-sha256", kEmptyHash},
                                               {"x-amz-date", "20130524T000000Z"}},
                                              kEmptyHash, "20130524T000000Z", &sts);
  EXPECT_EQ(auth, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
                  "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                  "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(sts.substr(sts.rfind('\n') + 1), "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
}

TEST(SigV4, KeysEncodedOnce) {
  EXPECT_EQ(UriEncode("a b/c+d~e.jpg", true), "a%20b/c%2Bd~e.jpg");
  EXPECT_EQ(UriEncode("a/b", false), "a%2Fb");
}

}  // namespace
}  // namespace dsc::stream
