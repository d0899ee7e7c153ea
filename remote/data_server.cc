#include "remote/data_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <system_error>

#include "format/bytes.h"

namespace dsc::remote {

DataServer::DataServer(int listen_fd, size_t max_connections, WorkerService* service)
    : fd_(listen_fd), max_(max_connections), service_(service) {
  acceptor_ = std::thread([this] { Accept(); });
}

DataServer::~DataServer() {
  BeginStop();
  acceptor_.join();
  for (auto& c : conns_) c.thread.join();
  ::close(fd_);
}

void DataServer::BeginStop() {
  std::lock_guard<std::mutex> l(mu_);
  if (stopping_.load()) return;
  stop_at_ = Clock::now();
  stopping_.store(true);
  ::shutdown(fd_, SHUT_RDWR);  // new connections are refused now, not left waiting
}

void DataServer::Accept() {
  const std::function<bool()> give_up = [this] {
    std::lock_guard<std::mutex> l(mu_);
    return stopping_.load() && Clock::now() - stop_at_ > std::chrono::seconds(10);
  };
  while (!stopping_.load()) {
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (it->done->load()) it->thread.join(), it = conns_.erase(it);
      else ++it;
    }
    sockaddr_storage from{};
    socklen_t len = sizeof from;
    const int c = ::accept4(fd_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) {
      pollfd p{fd_, POLLIN, 0};
      ::poll(&p, 1, 100);
      continue;
    }
    if (conns_.size() >= max_) {
      ::close(c);
      continue;
    }
    char host[64] = "?";
    uint16_t port = 0;
    if (from.ss_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(&from);
      ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host), port = ntohs(a->sin_port);
    } else if (from.ss_family == AF_INET6) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(&from);
      ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host), port = ntohs(a->sin6_port);
    }
    const std::string peer = std::string("data:") + host + ":" + std::to_string(port);
    auto done = std::make_shared<std::atomic<bool>>(false);
    try {
      conns_.push_back({std::thread([this, c, peer, done, give_up] {
                          Serve(c, peer, give_up);
                          ::close(c);
                          done->store(true);
                        }),
                        done});
    } catch (const std::system_error&) {  // no thread: the client retries elsewhere
      ::close(c);
    }
  }
}

// An idle connection ends at once when the worker stops; one in a call ends after sending its reply.
void DataServer::Serve(int fd, const std::string& peer, const std::function<bool()>& give_up) {
  constexpr auto kReadTime = std::chrono::seconds(10);  // for the ticket, and for a request once begun
  constexpr auto kSendTime = std::chrono::seconds(30);
  std::string got(kTicketBytes, '\0');
  if (!RecvAll(fd, got.data(), got.size(), Clock::now() + kReadTime, give_up).empty() || !service_->TicketOk(got)) return;
  auto frame = [](uint32_t code, uint64_t n, uint8_t* head) {
    le::put32(head, code);
    le::put64(head + 4, n);
  };
  auto send_error = [&](const Outcome& st) {
    std::string m = st.message.substr(0, kMaxErrorBytes);
    uint8_t head[kReplyHeadBytes];
    frame(uint32_t(st.code), m.size(), head);
    iovec parts[2] = {{head, sizeof head}, {m.data(), m.size()}};
    return SendAll(fd, parts, 2, Clock::now() + kSendTime, give_up).empty();
  };
  std::string bytes;
  for (;;) {
    uint8_t len[4];
    // Idle between requests for as long as the client keeps the connection.
    if (!RecvAll(fd, len, 4, Clock::time_point::max(), [&] { return stopping_.load(); }).empty()) return;
    const uint32_t n = le::get32(len);
    if (n == 0 || n > kMaxRequestBytes) {
      send_error({Code::kInvalidArgument, "a request of " + std::to_string(n) + " bytes"});
      return;
    }
    bytes.resize(n);
    if (!RecvAll(fd, bytes.data(), n, Clock::now() + kReadTime, give_up).empty()) return;
    ProcessRequest req;
    if (!req.ParseFromString(bytes)) {
      send_error({Code::kInvalidArgument, "malformed request"});
      return;
    }
    bool sent = false, sent_ok = false;
    const Outcome st = service_->Process(req, peer, true, [fd] { return PeerGone(fd); }, [&](Reply& r) {
      sent = true;
      uint8_t head[kReplyHeadBytes];
      frame(0, r.head.size() + r.images.size(), head);
      iovec io[3] = {{head, sizeof head}, {r.head.data(), r.head.size()}, {r.images.data(), r.images.size()}};
      sent_ok = SendAll(fd, io, r.images ? 3 : 2, Clock::now() + kSendTime, give_up).empty();
      return sent_ok ? Outcome() : Outcome{Code::kCancelled, "the client went away"};
    });
    if (sent ? !sent_ok : !send_error(st)) return;
  }
}

}  // namespace dsc::remote
