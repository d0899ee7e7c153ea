// The worker's data port (remote/data.h): a listening socket whose connections carry Process requests
// to a WorkerService outside gRPC. A thread accepts; each connection has a thread of its own, at most
// `max_connections` of them (more are closed at once).
#pragma once
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "remote/data.h"
#include "remote/service.h"

namespace dsc::remote {

class DataServer {
 public:
  // Takes `listen_fd` (ListenTcp's); `service` must outlive this.
  DataServer(int listen_fd, size_t max_connections, WorkerService* service);
  // Stops (BeginStop), waits for the connections to end, closes the socket.
  ~DataServer();
  // Idle connections end now; a call in progress sends its reply, unless that takes over 10 s.
  void BeginStop();

 private:
  struct Conn {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  void Accept();
  // One connection's requests, one at a time, until the client closes it or the worker stops.
  void Serve(int fd, const std::string& peer, const std::function<bool()>& give_up);

  const int fd_;
  const size_t max_;
  WorkerService* const service_;
  std::mutex mu_;
  std::atomic<bool> stopping_{false};
  Clock::time_point stop_at_;
  std::vector<Conn> conns_;  // the acceptor's alone until it is joined
  std::thread acceptor_;
};

}  // namespace dsc::remote
