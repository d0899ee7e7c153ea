#include "remote/address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>

namespace dsc::remote {

namespace {

// The host part: inside brackets (followed by nothing or ":PORT"), before the one ':' of "HOST:PORT", else the whole text (a bare
// IPv6 address has several ':' and no port).
std::string HostOf(const std::string& address) {
  if (!address.empty() && address[0] == '[') {
    const size_t close = address.find(']');
    if (close == std::string::npos || (close + 1 < address.size() && address[close + 1] != ':')) return "";
    return address.substr(1, close - 1);
  }
  if (std::count(address.begin(), address.end(), ':') == 1) return address.substr(0, address.find(':'));
  return address;
}

}  // namespace

bool IsLoopback(const std::string& address) {
  const std::string host = HostOf(address);
  std::string lower(host.size(), '\0');
  std::transform(host.begin(), host.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (lower == "localhost") return true;
  in_addr v4;
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (::inet_pton(AF_INET6, host.c_str(), &v6) == 1)
    return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
  return false;
}

bool IsPort(const std::string& text, bool allow_zero) {
  if (text.empty() || text.size() > 5 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  const unsigned long port = std::stoul(text);
  return port <= 65535 && (allow_zero || port > 0);
}

}  // namespace dsc::remote
