// What the remote tests share: `dsc serve` child processes, the files they serve, and the local
// run's digests every remote run must equal.
#pragma once
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "reader/digest.h"
#include "reader/loader.h"
#include "remote/client.h"
#include "remote/worker.grpc.pb.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {

// A `dsc serve` child process; killed (SIGKILL) when destroyed.
class Worker {
 public:
  explicit Worker(std::vector<std::string> args, std::string listen = "127.0.0.1:0") { Start(std::move(args), listen); }
  ~Worker() { Kill(); }
  void Start(std::vector<std::string> args, const std::string& listen) {
    args_ = args;
    int out[2];
    ASSERT_EQ(::pipe(out), 0);
    std::vector<std::string> argv = {DSC_BINARY, "serve", "--listen", listen};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::close(out[0]);
      std::vector<char*> a;
      for (auto& s : argv) a.push_back(s.data());
      a.push_back(nullptr);
      ::execv(a[0], a.data());
      ::_exit(127);
    }
    ::close(out[1]);
    // "listening on 127.0.0.1:PORT"
    std::string line;
    pollfd p{out[0], POLLIN, 0};
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < until) {
      if (::poll(&p, 1, 100) <= 0) continue;
      char c[256];
      const ssize_t n = ::read(out[0], c, sizeof c);
      if (n <= 0) break;
      line.append(c, size_t(n));
    }
    ::close(out[0]);
    const size_t colon = line.rfind(':');
    ASSERT_NE(line.find("listening on "), std::string::npos) << "dsc serve said: " << line;
    port_ = std::stoi(line.substr(colon + 1));
  }
  void Kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  // SIGTERM, then the exit status (waits at most 15 s).
  int Terminate() {
    ::kill(pid_, SIGTERM);
    int st = 0;
    for (int i = 0; i < 1500; ++i) {
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  std::vector<std::string> args_;
  pid_t pid_ = -1;
  int port_ = 0;
};

struct Files {
  std::string dir, cifar, other;
};

inline const Files& Built() {
  static const Files f = [] {
    Files f;
    f.dir = ScratchDir("-remote");
    writer::BuildOptions o;
    o.log = [](const std::string&) {};
    f.cifar = f.dir + "/cifar.beton";
    writer::Build(SubsetTree(40), f.cifar, o);  // 400 real CIFAR-10 JPEGs
    f.other = f.dir + "/other.beton";
    writer::Build(SubsetTree(10), f.other, o);
    return f;
  }();
  return f;
}

inline LoaderOptions Base() {
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.batch_size = 32;
  o.seed = 11;
  o.threads = 1;
  o.remote.transport.chunk = 16;
  o.remote.connect = remote::Connector();
  return o;
}

inline std::vector<std::string> Digests(Loader& l, int epochs, int sleep_ms = 0, const std::function<void(int, int)>& each = {}) {
  std::vector<std::string> d;
  for (int e = 0; e < epochs; ++e) {
    BatchDigest g;
    int k = 0;
    for (const Batch& b : l.epoch(uint64_t(e))) {
      g.Add(b);
      if (each) each(e, k);
      ++k;
      if (sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    }
    d.push_back(g.Hex());
  }
  return d;
}

inline const std::vector<std::string>& Local() {
  static const std::vector<std::string> d = [] {
    LoaderOptions o = Base();
    o.remote = RemoteOptions();
    Loader l(Built().cifar, o);
    return Digests(l, 3);
  }();
  return d;
}

inline LoaderOptions Remote(const std::vector<const Worker*>& ws, int local_threads) {
  LoaderOptions o = Base();
  for (const Worker* w : ws) o.remote.addresses.push_back(w->address());
  o.remote.local_threads = local_threads;
  return o;
}

inline uint64_t RemoteSamples(const Loader& l) {
  uint64_t n = 0;
  for (const auto& w : l.remote_stats()) n += w.samples;
  return n;
}

inline std::unique_ptr<remote::Worker::Stub> StubFor(const Worker& w) {
  return remote::Worker::NewStub(grpc::CreateChannel(w.address(), grpc::InsecureChannelCredentials()));
}

inline remote::StatusReply StatusOf(remote::Worker::Stub& s) {
  grpc::ClientContext c;
  remote::StatusReply r;
  EXPECT_TRUE(s.Status(&c, remote::StatusRequest(), &r).ok());
  return r;
}

inline uint32_t InFlight(remote::Worker::Stub& s) { return StatusOf(s).in_flight(); }

}  // namespace dsc::test
