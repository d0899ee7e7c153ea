// Network addresses as dsc's flags and environment give them: "HOST", "HOST:PORT", "[IPV6]:PORT".
// No gRPC here: dsc serve, the remote client and dsc train (its rendezvous address) share it.
#pragma once
#include <string>

namespace dsc::remote {

// Whether `address` names this machine over loopback only: 127.0.0.0/8, ::1 (also written in full,
// or as the IPv4-mapped ::ffff:127.x.y.z) or "localhost" (any case), bare or with a port ("HOST:PORT",
// "[IPV6]:PORT", "[IPV6]"). Anything else is not, including host names that merely begin with "127."
// and the wildcard addresses (0.0.0.0, ::), which listen on every interface.
bool IsLoopback(const std::string& address);

// Whether `text` (what follows an address's last ':') is a TCP port: decimal, 1 to 65535, or 0 too
// when `allow_zero` (listen on any free port). Client and server agree on what a port is.
bool IsPort(const std::string& text, bool allow_zero);

}  // namespace dsc::remote
