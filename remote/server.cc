#include "remote/server.h"

#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>
#include <malloc.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>

#include "format/error.h"
#include "remote/data.h"
#include "remote/data_server.h"
#include "remote/grpc_service.h"
#include "remote/service.h"
#include "remote/wire.h"

namespace dsc::remote {

namespace {

std::string HostOf(const std::string& listen) {
  if (!listen.empty() && listen[0] == '[') return listen.substr(0, listen.find(']') + 1);
  return listen.substr(0, listen.rfind(':'));
}

}  // namespace

std::string ValidateServeOptions(const ServeOptions& o, std::string* warning) {
  if (o.files.empty()) return "name at least one dsc file to serve";
  if (o.listen.find(':') == std::string::npos) return "--listen needs ADDR:PORT, not '" + o.listen + "'";
  if (o.tls_cert.empty() != o.tls_key.empty()) return "--tls-cert and --tls-key go together";
  if (o.threads < 0 || o.threads > 1024) return "--threads must be 0 (all cores) to 1024";
  if (o.max_calls < 1 || o.max_calls > 4096) return "--max-calls must be 1 to 4096";
  if (o.data_port > 65535) return "--data-port must be 0 (any free port) to 65535";
  if (o.data_port && (!o.data_path || !o.tls_cert.empty()))
    return "--data-port is for a plaintext worker's data path (not with --grpc-only or TLS)";
  if (!IsPort(o.listen.substr(o.listen.rfind(':') + 1), /*allow_zero=*/true))
    return "--listen " + o.listen + ": the port must be 0 (any free port) to 65535";
  if (!IsLoopback(o.listen)) {
    if (o.token.empty())
      return "listening on " + o.listen + " (not loopback) needs --token-file: anyone who can reach the port could use this worker";
    if (o.tls_cert.empty() && !o.insecure_plaintext)
      return "listening on " + o.listen + " (not loopback) needs TLS (--tls-cert, --tls-key), or --insecure-plaintext";
    if (o.tls_cert.empty())
      *warning = "no TLS: the token and the images cross the network in clear (--insecure-plaintext)";
  }
  return "";
}

int Serve(const ServeOptions& o) {
  // Replies are megabytes, allocated and freed per call: keep that memory in the heap instead of
  // mapping fresh pages for each (their page faults cost a worker more than the copies; docs/remote.md).
  // max_memory bounds what it holds.
  mallopt(M_MMAP_THRESHOLD, 512 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // SIGTERM/SIGINT go to one thread that shuts the server down; block them before gRPC starts threads.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  // A reference to the gRPC library that is never given back, so that the server's destructors are
  // not its last user: the library's final shutdown joins its executor threads, and one of them may
  // sleep in a TCP "backup poller" for up to 10 s (gRPC 1.51, tcp_posix.cc), delaying exit after
  // SIGTERM with nothing left to drain.
  grpc_init();  // after the mask: the library starts threads

  WorkerService service(o);
  GrpcWorker grpc_worker(&service);
  grpc::ServerBuilder b;
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (o.tls_cert.empty()) {
    creds = grpc::InsecureServerCredentials();
  } else {
    grpc::SslServerCredentialsOptions so;
    so.pem_key_cert_pairs.push_back({o.tls_key, o.tls_cert});
    creds = grpc::SslServerCredentials(so);
  }
  int port = 0;
  // No SO_REUSEPORT (gRPC's default): a second worker on a port in use must fail, not take a random
  // share of the connections (a stale worker, or one serving another file, would answer some clients).
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  b.AddListeningPort(o.listen, creds, &port);
  b.RegisterService(&grpc_worker);
  b.SetMaxReceiveMessageSize(1 << 20);  // requests are small: samples and options
  b.SetMaxSendMessageSize(-1);          // replies are bounded by max_memory instead
  // A call holds its gRPC thread while the decode pool works, and gRPC's sync server keeps at most
  // MAX_POLLERS (default 2) idle threads: keep enough for one client's calls to come and go without
  // a thread made and ended every few requests.
  b.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, int(std::min<uint32_t>(o.max_in_flight, 64)) + 2);
  // Every call holds a thread: bound them, or many connections make thousands (each admitted call also
  // counts against --max-calls; past this, gRPC answers RESOURCE_EXHAUSTED and the client backs off).
  grpc::ResourceQuota quota("dsc-serve");
  quota.SetMaxThreads(int(o.max_calls) + int(std::min<uint32_t>(o.max_in_flight, 64)) + 16);
  b.SetResourceQuota(quota);
  // The data path, for plaintext workers only: its requests and replies would cross the network in
  // clear beside a TLS channel.
  std::unique_ptr<DataServer> data;
  if (o.data_path && o.tls_cert.empty()) {
    std::string host = HostOf(o.listen), error;
    if (!host.empty() && host[0] == '[') host = host.substr(1, host.size() - 2);
    uint16_t data_port = uint16_t(o.data_port);
    const int fd = ListenTcp(host, &data_port, &error);
    if (fd < 0) throw Error("cannot listen on " + o.listen + ": " + error);
    std::string ticket(kTicketBytes, '\0');
    std::random_device rd;
    for (char& ch : ticket) ch = char(rd());
    service.SetDataPath(data_port, ticket);
    data = std::make_unique<DataServer>(fd, size_t(o.max_calls) + std::min<uint32_t>(o.max_in_flight, 64), &service);
  }
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (!server || port == 0) throw Error("cannot listen on " + o.listen + " (address in use or not local?)");
  std::printf("listening on %s:%d\n", HostOf(o.listen).c_str(), port);
  std::fflush(stdout);

  std::thread waiter([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    std::fprintf(stderr, "dsc serve: signal %d: finishing calls in progress\n", sig);
    if (data) data->BeginStop();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
  });
  server->Wait();
  waiter.join();
  data.reset();  // lets data calls in progress send their replies
  return 0;
}

}  // namespace dsc::remote
