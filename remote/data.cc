#include "remote/data.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace dsc::remote {

namespace {

// Waits until fd is ready for `events`: "" when it is, else why not.
std::string Wait(int fd, short events, Clock::time_point deadline, const std::function<bool()>& stop) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return "timed out";
    if (stop && stop()) return "stopped";
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, int(std::min<long long>(left, stop ? 100 : 1000)));
    if (r < 0 && errno != EINTR) return std::string("poll: ") + std::strerror(errno);
    if (r > 0) return "";
  }
}

void SetNoDelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

std::string SendAll(int fd, iovec* parts, size_t n, Clock::time_point deadline, const std::function<bool()>& stop) {
  while (n) {
    msghdr m{};
    m.msg_iov = parts;
    m.msg_iovlen = n;
    const ssize_t w = ::sendmsg(fd, &m, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return std::string("send: ") + std::strerror(errno);
      if (auto e = Wait(fd, POLLOUT, deadline, stop); !e.empty()) return e;
      continue;
    }
    size_t done = size_t(w);
    while (n && done >= parts->iov_len) done -= parts->iov_len, ++parts, --n;
    if (n) parts->iov_base = static_cast<char*>(parts->iov_base) + done, parts->iov_len -= done;
  }
  return "";
}

size_t RecvSome(int fd, void* out, size_t n, Clock::time_point deadline, std::string* error, const std::function<bool()>& stop) {
  for (;;) {
    const ssize_t r = ::recv(fd, out, n, 0);
    if (r > 0) return size_t(r);
    if (r == 0) return *error = "the peer closed the connection", 0;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return *error = std::string("recv: ") + std::strerror(errno), 0;
    if (auto e = Wait(fd, POLLIN, deadline, stop); !e.empty()) return *error = e, 0;
  }
}

std::string RecvAll(int fd, void* out, size_t n, Clock::time_point deadline, const std::function<bool()>& stop) {
  auto* p = static_cast<uint8_t*>(out);
  std::string error;
  for (size_t k; n; p += k, n -= k)
    if (!(k = RecvSome(fd, p, n, deadline, &error, stop))) return error;
  return "";
}

int ConnectTcp(const std::string& host, uint16_t port, Clock::time_point deadline, std::string* error) {
  addrinfo hints{}, *list = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list); rc != 0) {
    *error = "cannot resolve " + host + ": " + ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  *error = "no address for " + host;
  for (addrinfo* a = list; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      *error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      std::string e = errno == EINPROGRESS ? Wait(fd, POLLOUT, deadline, {}) : std::string("connect: ") + std::strerror(errno);
      if (e.empty()) {
        int so = 0;
        socklen_t len = sizeof so;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &len);
        if (so != 0) e = std::string("connect: ") + std::strerror(so);
      }
      if (!e.empty()) {
        *error = e;
        ::close(fd);
        fd = -1;
        continue;
      }
    }
    SetNoDelay(fd);
  }
  ::freeaddrinfo(list);
  return fd;
}

int ListenTcp(const std::string& host, uint16_t* port, std::string* error) {
  addrinfo hints{}, *list = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  const std::string h = host == "0.0.0.0" || host == "[::]" || host == "::" || host.empty() ? std::string() : host;
  if (const int rc = ::getaddrinfo(h.empty() ? nullptr : h.c_str(), std::to_string(*port).c_str(), &hints, &list); rc != 0) {
    *error = "cannot resolve " + host + ": " + ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  *error = "no address for " + host;
  for (addrinfo* a = list; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;  // a fixed port is free again at once after a restart (TIME_WAIT)
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 64) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
      *error = "cannot listen for the data path on port " + std::to_string(*port) + ": " + std::strerror(errno);
      ::close(fd);
      fd = -1;
      continue;
    }
    *port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  ::freeaddrinfo(list);
  return fd;
}

bool PeerGone(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

std::string HostOfAddress(const std::string& a) {
  for (const char* scheme : {"dns:", "unix:", "unix-abstract:", "ipv4:", "ipv6:"})
    if (a.rfind(scheme, 0) == 0) return "";
  if (!a.empty() && a[0] == '[') {
    const size_t close = a.find(']');
    return close == std::string::npos ? "" : a.substr(1, close - 1);
  }
  const size_t colon = a.rfind(':');
  return colon == std::string::npos ? "" : a.substr(0, colon);
}

}  // namespace dsc::remote
