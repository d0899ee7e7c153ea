// The data path: Process requests on a plain TCP connection beside the gRPC channel (docs/remote.md,
// "The data path"). gRPC carries the handshake, which authenticates the client with the token and
// gives it the data port and a ticket; each data connection starts with that ticket, then carries one
// request and its reply at a time. Only for plaintext workers: with TLS the requests stay on gRPC.
//
//   client -> worker, once:  the ticket (kTicketBytes)
//   request:                 u32 LE n (1 to kMaxRequestBytes), n bytes of ProcessRequest
//   reply:                   u32 LE code (a grpc::StatusCode), u64 LE n, n bytes: the ProcessReply
//                            when the code is 0, else the error message (at most kMaxErrorBytes)
#pragma once
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace dsc::remote {

constexpr size_t kTicketBytes = 16;
constexpr uint32_t kMaxRequestBytes = 1u << 20;  // as gRPC's limit for a request
constexpr uint64_t kMaxErrorBytes = 64u << 10;
constexpr size_t kReplyHeadBytes = 12;

using Clock = std::chrono::steady_clock;

// Socket I/O on a non-blocking descriptor, waiting with poll() until `deadline`. "" on success, else
// what went wrong ("the peer closed the connection", "timed out", a system error). `stop`, when given,
// is asked between waits (every 100 ms at most) and ends the wait when it returns true.
std::string SendAll(int fd, iovec* parts, size_t n, Clock::time_point deadline, const std::function<bool()>& stop = {});
std::string RecvAll(int fd, void* out, size_t n, Clock::time_point deadline, const std::function<bool()>& stop = {});
// Reads what is there now, at most n bytes, after waiting for some until `deadline`; 0 with `error`
// set on failure.
size_t RecvSome(int fd, void* out, size_t n, Clock::time_point deadline, std::string* error,
                const std::function<bool()>& stop = {});

// Connects to host:port within `deadline` (non-blocking, TCP_NODELAY); -1 with `error` set on failure.
int ConnectTcp(const std::string& host, uint16_t port, Clock::time_point deadline, std::string* error);
// Listens on host (the --listen address's host) at *port, or a free port when it is 0 (set to the
// port); -1 with `error` set on failure.
int ListenTcp(const std::string& host, uint16_t* port, std::string* error);

// Whether the peer has hung up (or the connection failed), without reading.
bool PeerGone(int fd);

// The host of "HOST:PORT" or "[V6]:PORT" (brackets dropped); "" for a gRPC target with a scheme
// (dns:, unix:, ...), which the data path does not use.
std::string HostOfAddress(const std::string& address);

}  // namespace dsc::remote
