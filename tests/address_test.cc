// remote/address.h: which addresses are loopback (dsc serve's policy, dsc train's Gloo interface)
// and what a port is.
#include <gtest/gtest.h>

#include "remote/address.h"

namespace dsc::remote {
namespace {

TEST(Address, LoopbackBareAndWithAPort) {
  for (const char* a : {"127.0.0.1", "127.0.0.1:50051", "127.1.2.3", "127.255.255.254:0", "localhost", "localhost:80",
                        "LocalHost", "::1", "[::1]", "[::1]:50051", "0:0:0:0:0:0:0:1", "[0:0:0:0:0:0:0:1]:9",
                        "::ffff:127.0.0.1", "[::ffff:127.0.0.2]:7"})
    EXPECT_TRUE(IsLoopback(a)) << a;
}

TEST(Address, NotLoopback) {
  for (const char* a : {"", ":", "0.0.0.0", "0.0.0.0:50051", "::", "[::]:50051", "10.0.0.1", "128.0.0.1", "126.255.255.255",
                        "192.168.1.7:80", "::2", "[::2]:1", "::ffff:10.0.0.1", "example.com", "example.com:80",
                        "127.example.com", "127.0.0.1.example.com:80", "localhost.example.com", "notlocalhost",
                        "[::1", "[localhost]x", "127.0.0.1:80:90"})
    EXPECT_FALSE(IsLoopback(a)) << a;
}

TEST(Address, Ports) {
  for (const char* p : {"1", "80", "50051", "65535", "00080"}) EXPECT_TRUE(IsPort(p, false)) << p;
  for (const char* p : {"", "0", "65536", "99999", "123456", "-1", "+80", "80x", " 80", "8 0"}) EXPECT_FALSE(IsPort(p, false)) << p;
  EXPECT_TRUE(IsPort("0", true));
  EXPECT_TRUE(IsPort("00000", true));
  EXPECT_FALSE(IsPort("65536", true));
}

}  // namespace
}  // namespace dsc::remote
