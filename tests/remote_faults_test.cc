// Remote workers that fail, on loopback against real `dsc serve` processes: killed, stalled,
// restarted or all gone mid-epoch (the digests still equal a local run's); tokens, TLS and identity;
// SIGTERM and drain; clients killed mid-epoch; hostile gRPC requests and data connections; the data
// path and its fallback to gRPC. Each test is bounded in time.
#include <gtest/gtest.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <cstdio>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <png.h>
#include <turbojpeg.h>
#include "format/bytes.h"
#include "reader/digest.h"
#include "reader/loader.h"
#include "remote/client.h"
#include "remote/data.h"
#include "remote/wire.h"
#include "remote/worker.grpc.pb.h"
#include "tests/remote_fixtures.h"
#include "tests/test_util.h"
#include "writer/build.h"
#include "writer/writer.h"


namespace dsc::test {
namespace {

uint64_t StatusKiB(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1));
  ADD_FAILURE() << "no " << field << " for " << pid;
  return 0;
}

TEST(Remote, IdleWorkerGivesItsReplyMemoryBack) {
  // The worker keeps freed reply memory in its heap while calls come (Serve's malloc settings); a
  // second after the last call it gives it back: it once held its busiest moment's memory forever.
  Worker a({Built().cifar, "--threads", "1"});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const uint64_t base = StatusKiB(a.pid(), "VmRSS");
  LoaderOptions o = Remote({&a}, 0);
  o.augment.crop = kernels::CropMode::kCenter;
  o.augment.out_w = o.augment.out_h = 320;  // 300 KiB a sample, 19 MiB a request of 64
  o.augment.translate = o.augment.cutout = 0;
  o.batch_size = 64;
  o.remote.transport.chunk = 64;
  {
    Loader l(Built().cifar, o);
    Digests(l, 1);
    EXPECT_EQ(RemoteSamples(l), 7u * 64);
    const uint64_t peak = StatusKiB(a.pid(), "VmHWM");
    ASSERT_GT(peak, base + 24 * 1024) << "the replies should have needed memory";  // else the test shows nothing
  }
  uint64_t now = 0;
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if ((now = StatusKiB(a.pid(), "VmRSS")) < base + 12 * 1024) break;
  }
  EXPECT_LT(now, base + 12 * 1024) << "KiB resident 5 s after the last call; " << base << " at the start";
}

TEST(Remote, KilledStalledAndAllGoneWorkersChangeNothing) {
  Worker dies({Built().cifar, "--threads", "1", "--die-after", "5"});
  Worker stalls({Built().cifar, "--threads", "1", "--stall-after", "4"});
  Worker good({Built().cifar, "--threads", "1"});
  {
    LoaderOptions o = Remote({&dies, &stalls, &good}, 0);
    o.remote.transport.deadline_ms = 500;
    Loader l(Built().cifar, o);
    EXPECT_EQ(Digests(l, 3), Local());
    const auto st = l.remote_stats();
    EXPECT_GT(st[0].failures, 0u);
    EXPECT_GT(st[1].failures, 0u);
  }
  {  // every worker dies mid-epoch: the standby local thread finishes
    Worker d1({Built().cifar, "--threads", "1", "--die-after", "3"});
    Worker d2({Built().cifar, "--threads", "1", "--die-after", "2"});
    Loader l(Built().cifar, Remote({&d1, &d2}, 0));
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(Digests(l, 3), Local());
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
  }
}

TEST(Remote, RestartedWorkerIsUsedAgain) {
  auto w = std::make_unique<Worker>(std::vector<std::string>{Built().cifar, "--threads", "1", "--die-after", "3"});
  const int port = w->port();
  LoaderOptions o = Remote({w.get()}, 1);
  Loader l(Built().cifar, o);
  EXPECT_EQ(Digests(l, 1), std::vector<std::string>{Local()[0]});  // it died during this epoch
  w->Kill();
  w = std::make_unique<Worker>(std::vector<std::string>{Built().cifar, "--threads", "1"}, "127.0.0.1:" + std::to_string(port));
  const uint64_t before = RemoteSamples(l);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (uint64_t e = 1; RemoteSamples(l) == before && std::chrono::steady_clock::now() < until; ++e) {
    BatchDigest g;
    for (const Batch& b : l.epoch(e)) g.Add(b), std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (e < 3) {
      EXPECT_EQ(g.Hex(), Local()[e]);
    }
  }
  EXPECT_GT(RemoteSamples(l), before) << "the restarted worker was not used again";
}

TEST(Remote, TokensTlsAndIdentityAreChecked) {
  const std::string dir = Built().dir;
  WriteFile(dir + "/token", std::string("s3cret\n").data(), 7);
  Worker w({Built().cifar, "--token-file", dir + "/token"});
  // The Loader's constructor refuses the options, naming `what` and the worker.
  auto expect_refused = [&](LoaderOptions o, const std::string& what, const Worker& by) {
    try {
      Loader l(Built().cifar, o);
      ADD_FAILURE() << "expected a refusal mentioning " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(by.address()), std::string::npos) << e.what();
    }
  };
  expect_refused(Remote({&w}, 0), "token", w);  // none
  LoaderOptions o = Remote({&w}, 0);
  o.remote.token = "guess";
  expect_refused(o, "wrong token", w);
  o.remote.token = "s3cret";
  {
    Loader l(Built().cifar, o);
    EXPECT_EQ(Digests(l, 1)[0], Local()[0]);
  }
  // A worker serving another file refuses, naming what it serves.
  Worker other({Built().other});
  expect_refused(Remote({&other}, 0), "serves no file with the identity of " + Built().cifar, other);
  expect_refused(Remote({&other}, 0), "; it serves " + Built().other, other);
  {  // ... also when it serves 100 files of long names: the message once passed gRPC's 8 KiB metadata
     // limit and the client saw only "received initial metadata size exceeds limit"
    std::vector<std::string> many;
    for (int i = 0; i < 100; ++i) {
      many.push_back(dir + "/" + std::string(90, 'n') + std::to_string(i) + ".beton");
      std::filesystem::remove(many.back());
      std::filesystem::create_symlink(Built().other, many.back());
    }
    Worker lots(many);
    expect_refused(Remote({&lots}, 0), "; it serves " + many[0] + ", ", lots);
    expect_refused(Remote({&lots}, 0), ", " + many[3] + " and 96 more", lots);
  }
  {  // Options whose scratch is over the worker's memory limit are refused at the handshake (they
     // were accepted there and every batch then failed: the worker was reconnected forever, unused)
    Worker small({Built().cifar, "--threads", "2", "--max-memory-mb", "1"});
    LoaderOptions big = Remote({&small}, 0);
    big.augment.crop = kernels::CropMode::kCenter;
    big.augment.out_w = big.augment.out_h = 512;
    big.augment.translate = big.augment.cutout = 0;
    expect_refused(big, "options refused: a 512x512 output needs up to", small);
  }
  // A worker of another dsc version is refused, naming both versions.
  Worker old({Built().cifar, "--report-version", "0.0.1-old"});
  expect_refused(Remote({&old}, 0), "0.0.1-old", old);
  // TLS with a self-signed certificate for 127.0.0.1.
  const std::string cert = dir + "/cert.pem", key = dir + "/key.pem";
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 -keyout " +
                          key + " -out " + cert + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl is needed for the TLS test";
  Worker tls({Built().cifar, "--tls-cert", cert, "--tls-key", key});
  LoaderOptions t = Remote({&tls}, 0);
  t.remote.tls_root = remote::ReadFile(cert);
  Loader l(Built().cifar, t);
  EXPECT_EQ(Digests(l, 1)[0], Local()[0]);
  EXPECT_GT(RemoteSamples(l), 0u);
  {  // a TLS worker offers no data path: its requests came on gRPC
    auto s = remote::Worker::NewStub(grpc::CreateChannel(tls.address(), grpc::SslCredentials({remote::ReadFile(cert), "", ""})));
    const remote::StatusReply r = StatusOf(*s);
    EXPECT_GT(r.requests(), 0u);
    EXPECT_EQ(r.data_requests(), 0u);
  }
  // Plaintext to that TLS worker: it looks unreachable (local threads go on), and the warning says why.
  testing::internal::CaptureStderr();
  Loader p(Built().cifar, Remote({&tls}, 1));
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(Digests(p, 1)[0], Local()[0]);
  EXPECT_EQ(RemoteSamples(p), 0u);
  EXPECT_NE(said.find("--tls-root"), std::string::npos) << said;
}

TEST(Remote, ServePolicyOffLoopbackAndSigterm) {
  std::string out;
  EXPECT_EQ(RunDsc("serve " + Built().cifar + " --listen 0.0.0.0:0", &out), 2);
  EXPECT_NE(out.find("--token-file"), std::string::npos) << out;
  WriteFile(Built().dir + "/token2", std::string("t").data(), 1);
  EXPECT_EQ(RunDsc("serve " + Built().cifar + " --listen 0.0.0.0:0 --token-file " + Built().dir + "/token2", &out), 2);
  EXPECT_NE(out.find("TLS"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("serve /nonexistent.beton", &out), 1);
  EXPECT_NE(out.find("/nonexistent.beton"), std::string::npos) << out;
  Worker w({Built().cifar});
  EXPECT_EQ(w.Terminate(), 0);
}


// A request for sample 0 of Built().cifar with Base()'s options, and a call of it.
remote::ProcessRequest FirstSampleRequest() {
  Dataset ds(Built().cifar);
  remote::ProcessRequest q;
  q.set_file_id(0);
  q.set_header_checksum(ds.view().header().header_checksum);
  remote::ToSpec(Base(), 32, 32, q.mutable_spec());
  q.add_samples(0);
  return q;
}

grpc::Status Process(remote::Worker::Stub& stub, const remote::ProcessRequest& q, int deadline_s) {
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(deadline_s));
  remote::ProcessReply r;
  return stub.Process(&c, q, &r);
}

// Every call holds a gRPC thread on the worker: besides the per-connection limit, calls from all
// clients together are bounded (--max-calls; 200 connections made 1,546 threads and 1,532 calls in
// flight), and a call past it is told the worker is busy, which the client treats as back-off.
TEST(Remote, CallsFromAllClientsTogetherAreBounded) {
  Worker w({Built().cifar, "--threads", "1", "--max-calls", "1", "--stall-after", "1", "--stall-ms", "3000"});
  auto stub = StubFor(w);
  const remote::ProcessRequest q = FirstSampleRequest();
  auto call = [&](remote::Worker::Stub& st) { return Process(st, q, 20); };
  const grpc::Status first = call(*stub);
  ASSERT_TRUE(first.ok()) << first.error_message();
  std::thread stalled([&] { EXPECT_TRUE(call(*stub).ok()); });  // holds the one call for 3 s
  for (int i = 0; i < 200 && InFlight(*stub) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(InFlight(*stub), 1u);
  auto other = StubFor(w);  // another connection: its own per-connection limit is not reached
  const grpc::Status busy = call(*other);
  EXPECT_EQ(busy.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << busy.error_message();
  EXPECT_NE(busy.error_message().find("1 calls in flight (--max-calls)"), std::string::npos) << busy.error_message();
  stalled.join();
  std::string out;
  EXPECT_EQ(RunDsc("serve " + Built().cifar + " --max-calls 0", &out), 2);
  EXPECT_EQ(RunDsc("serve " + Built().cifar + " --listen 127.0.0.1:70000", &out), 2);
  EXPECT_NE(out.find("the port must be 0 (any free port) to 65535"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("serve " + Built().cifar + " --max-memory-mb 17592186044416", &out), 2);  // << 20 wrapped to 0
  EXPECT_NE(out.find("--max-memory-mb must be 1 to"), std::string::npos) << out;
}

// A second worker on a port in use started (gRPC sets SO_REUSEPORT) and took a random share of the
// connections; a worker address gRPC cannot mean exactly (a port past 65535, text after it) was
// taken modulo 2^16 or cut short.
TEST(Remote, APortInUseAndAddressesThatAreNotHostPortAreRefused) {
  Worker w({Built().cifar, "--threads", "1"});
  std::string out;
  EXPECT_EQ(RunShell("timeout 20 " + std::string(DSC_BINARY) + " serve " + Built().other + " --threads 1 --listen " + w.address() + " 2>&1", &out), 1)
      << "124: it listened too" << out;
  EXPECT_NE(out.find("cannot listen on " + w.address()), std::string::npos) << out;
  const std::string port = w.address().substr(w.address().rfind(':') + 1);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"127.0.0.1:" + std::to_string(std::stoul(port) + 65536), "the port must be 1 to 65535"},
      {w.address() + "x", "the port must be 1 to 65535"},
      {"127.0.0.1:0", "the port must be 1 to 65535"},
      {"127.0.0.1", "needs HOST:PORT"},
      {":" + port, "needs a host"},
      {"::1:" + port, "an IPv6 worker goes in brackets"},
      {"[::1]" + port, "an IPv6 worker is [ADDRESS]:PORT"},
  };
  for (const auto& [address, why] : bad) {
    EXPECT_EQ(RunDsc("bench " + Built().cifar + " --epochs 1 --batch-size 32 --local-threads 0 --remote " + address, &out), 2) << address;
    EXPECT_NE(out.find("remote = " + address + ": " + why), std::string::npos) << out;
  }
  LoaderOptions o = Remote({&w}, 0);
  o.remote.addresses.push_back("");
  EXPECT_THROW(Loader(Built().cifar, o), OptionError);
  for (const std::string& allowed : {"[::1]:" + port, "dns:///localhost:" + port, "localhost:" + port})
    EXPECT_NO_THROW(o.remote.connect(allowed, o.remote, RemoteContext{})) << allowed;
}

TEST(Remote, DecodeThreadsThatCannotStartAreAnError) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer runtimes reserve terabytes of address space: no address-space limit applies";
#else
  // 200 threads' 8 MiB stacks past a 600 MiB address space: the pool's constructor left the threads it
  // had started running while their pool was destroyed.
  std::string out;
  EXPECT_EQ(RunShell("ulimit -v 614400; " + std::string(DSC_BINARY) + " serve " + Built().cifar +
                         " --threads 200 --listen 127.0.0.1:0 2>&1",
                     &out),
            1)
      << out;
  EXPECT_NE(out.find("cannot start 200 decode threads"), std::string::npos) << out;
#endif
}

// SIGTERM drains: calls in progress get up to 10 s (docs/remote.md), then are cancelled, and the worker
// exits 0 soon after; a call that never finishes must not hold it longer.
TEST(Remote, SigtermWithACallThatNeverEndsExitsAfterTheDrainTime) {
  Worker w({Built().cifar, "--threads", "1", "--stall-after", "1"});  // calls after the first stall until their client goes
  auto stub = StubFor(w);
  const remote::ProcessRequest q = FirstSampleRequest();
  auto call = [&] { return Process(*stub, q, 60); };
  ASSERT_TRUE(call().ok());
  grpc::Status stalled_status;
  std::thread stalled([&] { stalled_status = call(); });
  for (int i = 0; i < 500 && InFlight(*stub) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(InFlight(*stub), 1u);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(w.Terminate(), 0);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stalled.join();
  EXPECT_FALSE(stalled_status.ok());
  EXPECT_GE(took, 9.5) << "the call in progress was not given its drain time";
  EXPECT_LT(took, 11.5) << "seconds from SIGTERM to exit";
}

// Runs cmd in the background through the shell, which execs it: the pid is the command's own.
pid_t StartShell(const std::string& cmd) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), nullptr);
    ::_exit(127);
  }
  return pid;
}

// A reply larger than the socket buffers, written while its client reads nothing, makes gRPC 1.51
// start a TCP backup poller that sleeps in 10 s polls; the library's final shutdown waited for it,
// so a worker with nothing left to drain took up to 10 s to exit after SIGTERM (about a third of the
// photo runs of bench/run_remote_bench.sh). A stopped client makes the blocked write certain; it is
// then killed (its connection closes with it), and the worker has nothing to drain.
TEST(Remote, SigtermAfterABlockedReplyExitsPromptly) {
  // Twice: a client stopped while nothing of its was on the wire would leave no write blocked.
  for (int round = 0; round < 2; ++round) {
    Worker w({Built().cifar, "--threads", "1"});
    // Replies of 256 samples as 224 x 224 RGB rows (38.5 MB each), two in flight: more than the
    // loopback socket buffers hold.
    const std::string log = Built().dir + "/blocked-client.log";
    const std::string cmd = std::string(DSC_BINARY) + " bench " + Built().cifar + " --preset imagenet-train --remote " +
                            w.address() + " --local-threads 0 --epochs 100000 --batch-size 256 --remote-chunk 256 >" + log + " 2>&1";
    const pid_t pid = StartShell(cmd);
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    ::kill(pid, SIGSTOP);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    ::kill(pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
    ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "the client ended before it was killed; it said:\n" << [&] {
      auto v = ReadFile(log);
      return std::string(v.begin(), v.end());
    }();
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(w.Terminate(), 0);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(took, 3.0) << "seconds from SIGTERM to exit, with no client and no call in progress (round " << round << ")";
  }
}

TEST(Remote, KilledClientFreesItsWork) {
  Worker w({Built().cifar, "--threads", "1", "--stall-after", "1"});  // calls after the first stall until their client goes
  auto stub = StubFor(w);
  const std::string cmd = std::string(DSC_BINARY) + " bench " + Built().cifar + " --remote " + w.address() +
                          " --local-threads 0 --epochs 100000 --batch-size 32 >" + Built().dir + "/client.log 2>&1";
  const pid_t pid = StartShell(cmd);
  // Wait for a stalled call: the first call has finished (requests >= 1) and calls are still in
  // flight 100 ms later. (In flight alone can be the first call, over a moment later.)
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int stalled = 0;
  while (stalled < 2 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(stalled ? 100 : 20));
    const remote::StatusReply r = StatusOf(*stub);  // EXPECT, not ASSERT: the client must still be killed below
    stalled = r.requests() >= 1 && r.in_flight() > 0 ? stalled + 1 : 0;
  }
  if (stalled < 2) ::kill(pid, SIGKILL), ::waitpid(pid, nullptr, 0);
  ASSERT_EQ(stalled, 2) << "the client's calls never arrived; it said:\n" << [] {
    auto v = ReadFile(Built().dir + "/client.log");
    return std::string(v.begin(), v.end());
  }();
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  const auto freed = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (InFlight(*stub) > 0 && std::chrono::steady_clock::now() < freed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(InFlight(*stub), 0u) << "the worker kept a dead client's calls";
}

TEST(Remote, HostileRequestsGetErrorsAndTheWorkerKeepsServing) {
  Worker w({Built().cifar, "--threads", "1"});
  auto stub = StubFor(w);
  auto process = [&](const remote::ProcessRequest& q) {
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    remote::ProcessReply r;
    return stub->Process(&c, q, &r);
  };
  remote::ProcessRequest q;
  q.set_file_id(7);  // unknown
  EXPECT_EQ(process(q).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  q.set_file_id(0);
  q.set_header_checksum(123);  // not the file's
  EXPECT_EQ(process(q).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // A valid handshake gives the checksum and a spec.
  {
    LoaderOptions o = Base();
    o.remote.addresses = {w.address()};
    o.remote.local_threads = 0;
    Loader l(Built().cifar, o);  // connects: the worker accepts the file
  }
  Dataset ds(Built().cifar);
  q.set_header_checksum(ds.view().header().header_checksum);
  for (int i = 0; i < 5000; ++i) q.add_samples(0);  // huge
  EXPECT_EQ(process(q).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  q.clear_samples();
  q.add_samples(uint32_t(ds.size()));  // past the end
  EXPECT_EQ(process(q).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  q.clear_samples();
  q.add_samples(0);
  q.mutable_spec()->set_width(32);  // incomplete spec (no mean/std/fill)
  EXPECT_EQ(process(q).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  {  // a valid spec whose output (crop none) is larger than the images: a sample error, not a crash
    // (the worker read past its decoded planes and died of SIGSEGV, found by an audit)
    remote::ProcessRequest big = q;
    remote::ToSpec(Base(), 32, 32, big.mutable_spec());
    big.mutable_spec()->set_width(64);
    big.mutable_spec()->set_height(48);
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    remote::ProcessReply r;
    const grpc::Status st = stub->Process(&c, big, &r);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_NE(r.sample_error().find("sample 0: a 32x32 image for a 64x48 output without a crop"), std::string::npos)
        << r.sample_error();
  }
  {  // an output so large that the worker's kept scratch would pass its memory limit: refused
    remote::ProcessRequest big = q;
    remote::ToSpec(Base(), 32, 32, big.mutable_spec());
    big.mutable_spec()->set_width(8192);  // 4 x 1 GiB of scratch for the worker's one thread
    big.mutable_spec()->set_height(8192);
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    remote::ProcessReply r;
    const grpc::Status st = stub->Process(&c, big, &r);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("MiB of scratch"), std::string::npos) << "[" << st.error_message() << "]";
  }
  {  // garbage bytes
    grpc::GenericStub g(grpc::CreateChannel(w.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const char junk[] = "\xff\xff\xff\xff\x0f garbage";
    grpc::Slice s(junk, sizeof junk);
    grpc::ByteBuffer in(&s, 1), out;
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    grpc::Status st;
    g.UnaryCall(&c, "/dsc.remote.Worker/Process", grpc::StubOptions(), &in, &out, [&](grpc::Status x) {
      std::lock_guard<std::mutex> l(m);
      st = x;
      done = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return done; });
    EXPECT_FALSE(st.ok());
  }
  // Still serving.
  Loader l(Built().cifar, Remote({&w}, 0));
  EXPECT_EQ(Digests(l, 1)[0], Local()[0]);
  EXPECT_GT(RemoteSamples(l), 0u);
}

// The data path (remote/data.h) carries a plaintext worker's requests by default, with the same
// batches as gRPC and as a local run; RemoteOptions::data_path = false and `dsc serve --grpc-only`
// keep them on gRPC.
TEST(Remote, DataPathCarriesTheRequestsAndEqualsLocal) {
  Worker w({Built().cifar, "--threads", "1"});
  auto stub = StubFor(w);
  {
    Loader l(Built().cifar, Remote({&w}, 0));
    EXPECT_EQ(Digests(l, 3), Local());
  }
  const remote::StatusReply data = StatusOf(*stub);
  EXPECT_GT(data.data_requests(), 0u);
  EXPECT_EQ(data.data_requests(), data.requests());
  {
    LoaderOptions o = Remote({&w}, 0);
    o.remote.transport.data_path = false;
    Loader l(Built().cifar, o);
    EXPECT_EQ(Digests(l, 3), Local());
  }
  const remote::StatusReply grpc_only = StatusOf(*stub);
  EXPECT_GT(grpc_only.requests(), data.requests());
  EXPECT_EQ(grpc_only.data_requests(), data.data_requests());
  Worker g({Built().cifar, "--threads", "1", "--grpc-only"});
  {
    Loader l(Built().cifar, Remote({&g}, 0));
    EXPECT_EQ(Digests(l, 1)[0], Local()[0]);
    EXPECT_GT(RemoteSamples(l), 0u);
  }
  auto gs = StubFor(g);
  EXPECT_GT(StatusOf(*gs).requests(), 0u);
  EXPECT_EQ(StatusOf(*gs).data_requests(), 0u);
}

// What reaches the data port without the handshake's ticket, or with bytes that are not a request,
// ends that connection (after an error frame where the ticket was right); the worker keeps serving.
TEST(Remote, HostileDataConnectionsAreClosedAndTheWorkerKeepsServing) {
  Worker w({Built().cifar, "--threads", "1"});
  auto stub = StubFor(w);
  remote::HelloReply hello;
  {
    grpc::ClientContext c;
    remote::HelloRequest q;
    ASSERT_TRUE(stub->Hello(&c, q, &hello).ok());
  }
  ASSERT_GT(hello.data_port(), 0u);
  ASSERT_EQ(hello.data_ticket().size(), remote::kTicketBytes);
  using remote::Clock;
  auto open = [&](const std::string& first) {
    std::string error;
    const int fd = remote::ConnectTcp("127.0.0.1", uint16_t(hello.data_port()), Clock::now() + std::chrono::seconds(5), &error);
    EXPECT_GE(fd, 0) << error;
    std::string bytes = first;
    iovec part{bytes.data(), bytes.size()};
    if (fd >= 0 && !bytes.empty()) {
      EXPECT_EQ(remote::SendAll(fd, &part, 1, Clock::now() + std::chrono::seconds(5)), "");
    }
    return fd;
  };
  // An error frame's code and message.
  auto error_frame = [&](int fd, uint32_t* code, std::string* message) {
    uint8_t head[remote::kReplyHeadBytes];
    if (!remote::RecvAll(fd, head, sizeof head, Clock::now() + std::chrono::seconds(10)).empty()) return false;
    *code = le::get32(head);
    const uint64_t n = le::get64(head + 4);
    EXPECT_LE(n, remote::kMaxErrorBytes);
    message->resize(size_t(std::min<uint64_t>(n, remote::kMaxErrorBytes)));
    return remote::RecvAll(fd, message->data(), message->size(), Clock::now() + std::chrono::seconds(10)).empty();
  };
  auto closed = [&](int fd) {  // closed by the worker (reset where bytes it did not read were left)
    char c;
    const std::string e = remote::RecvAll(fd, &c, 1, Clock::now() + std::chrono::seconds(15));
    EXPECT_TRUE(e == "the peer closed the connection" || e == "recv: Connection reset by peer") << e;
    return e != "timed out" && !e.empty();
  };
  auto le32 = [](uint32_t v) {
    uint8_t b[4];
    le::put32(b, v);
    return std::string(reinterpret_cast<const char*>(b), 4);
  };
  const std::string valid = FirstSampleRequest().SerializeAsString();
  {  // a wrong ticket, then a valid request: closed without a reply
    const int fd = open(std::string(remote::kTicketBytes, 'x') + le32(uint32_t(valid.size())) + valid);
    EXPECT_TRUE(closed(fd));
    ::close(fd);
  }
  {  // a request longer than the limit
    const int fd = open(hello.data_ticket() + le32(0xffffffffu));
    uint32_t code = 0;
    std::string m;
    ASSERT_TRUE(error_frame(fd, &code, &m));
    EXPECT_EQ(code, uint32_t(grpc::StatusCode::INVALID_ARGUMENT));
    EXPECT_NE(m.find("a request of 4294967295 bytes"), std::string::npos) << m;
    EXPECT_TRUE(closed(fd));
    ::close(fd);
  }
  {  // garbage for a request
    const int fd = open(hello.data_ticket() + le32(9) + "\xff\xff\xff\xff\xff\xff\xff\xff\xff");
    uint32_t code = 0;
    std::string m;
    ASSERT_TRUE(error_frame(fd, &code, &m));
    EXPECT_EQ(code, uint32_t(grpc::StatusCode::INVALID_ARGUMENT));
    EXPECT_EQ(m, "malformed request");
    EXPECT_TRUE(closed(fd));
    ::close(fd);
  }
  {  // a well-formed request for a file it does not serve: an error, and the connection stays usable
    remote::ProcessRequest q = FirstSampleRequest();
    q.set_file_id(7);
    const std::string bytes = q.SerializeAsString();
    const int fd = open(hello.data_ticket() + le32(uint32_t(bytes.size())) + bytes + le32(uint32_t(bytes.size())) + bytes);
    for (int i = 0; i < 2; ++i) {
      uint32_t code = 0;
      std::string m;
      ASSERT_TRUE(error_frame(fd, &code, &m));
      EXPECT_EQ(code, uint32_t(grpc::StatusCode::INVALID_ARGUMENT));
      EXPECT_EQ(m, "unknown file id 7");
    }
    ::close(fd);
  }
  {  // the right ticket and that request: served
    const int fd = open(hello.data_ticket() + le32(uint32_t(valid.size())) + valid);
    uint8_t head[remote::kReplyHeadBytes];
    ASSERT_EQ(remote::RecvAll(fd, head, sizeof head, Clock::now() + std::chrono::seconds(10)), "");
    EXPECT_EQ(le::get32(head), 0u);  // status OK
    ::close(fd);
  }
  ::close(open(""));                                    // connects and leaves
  ::close(open(hello.data_ticket().substr(0, 5)));      // half a ticket
  // Still serving, on the data path.
  Loader l(Built().cifar, Remote({&w}, 0));
  EXPECT_EQ(Digests(l, 1)[0], Local()[0]);
  EXPECT_GT(StatusOf(*stub).data_requests(), 0u);
}

// A data port the client cannot reach (a firewall that lets only the gRPC port through) puts that
// worker's requests on gRPC, with one warning; --data-port fixes the port, and is refused where there
// is no data path.
TEST(Remote, AnUnreachableDataPortFallsBackToGrpc) {
  Worker w({Built().cifar, "--threads", "1", "--report-data-port", "1"});
  auto stub = StubFor(w);
  testing::internal::CaptureStderr();
  {
    Loader l(Built().cifar, Remote({&w}, 0));
    EXPECT_EQ(Digests(l, 3), Local());
    EXPECT_GT(RemoteSamples(l), 0u);
  }
  const std::string said = testing::internal::GetCapturedStderr();
  const size_t at = said.find("its data port 1 cannot be reached");
  EXPECT_NE(at, std::string::npos) << said;
  EXPECT_EQ(said.find("its data port", at + 1), std::string::npos) << "warned more than once:\n" << said;
  const remote::StatusReply r = StatusOf(*stub);
  EXPECT_GT(r.requests(), 0u);
  EXPECT_EQ(r.data_requests(), 0u);

  std::string error;
  uint16_t port = 0;  // a free port, for the next worker's data path
  const int probe = remote::ListenTcp("127.0.0.1", &port, &error);
  ASSERT_GE(probe, 0) << error;
  ::close(probe);
  Worker fixed({Built().cifar, "--threads", "1", "--data-port", std::to_string(port)});
  auto fs = StubFor(fixed);
  remote::HelloReply hello;
  grpc::ClientContext c;
  ASSERT_TRUE(fs->Hello(&c, remote::HelloRequest(), &hello).ok());
  EXPECT_EQ(hello.data_port(), port);
  {
    Loader l(Built().cifar, Remote({&fixed}, 0));
    EXPECT_EQ(Digests(l, 1)[0], Local()[0]);
  }
  EXPECT_GT(StatusOf(*fs).data_requests(), 0u);
  std::string out;
  EXPECT_EQ(RunDsc("serve " + Built().cifar + " --data-port 70000", &out), 2);
  EXPECT_NE(out.find("--data-port must be 0 (any free port) to 65535"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("serve " + Built().cifar + " --grpc-only --data-port 7000", &out), 2);
  EXPECT_NE(out.find("--data-port is for a plaintext worker's data path"), std::string::npos) << out;
}

}  // namespace
}  // namespace dsc::test
