// What it costs a remote client to copy received bytes into its batch ring, with and without loopback
// TCP traffic beside it. A sender thread (core 1) writes replies of --message bytes to a loopback TCP
// socket, one per 1-byte request; the receiver (core 0) reads each reply in recv() calls of at most
// 64 KiB (gRPC's read chunks in remote/client.cc) into 64 KiB buffers, then copies the reply into a
// ring of --ring bytes, as the client copies a uint8 reply into its batch (a ring smaller than a reply
// stays in the cache: the copy's cost without the misses). --no-tcp fills the buffers
// with memcpy instead (no socket, no second thread). --stream writes the ring with non-temporal stores.
// --normalize finishes each 3,072 bytes as the float32 client does (kernels::NormalizeRowPlanar: a
// 32x32 image to 12 KB of float planes) into a ring of --ring bytes of floats, instead of copying:
// with TCP, the whole cost of a client that reads replies with plain recv() into reused buffers.
// Reported: the receiver thread's CPU time and the ring copy's time, per 3,072 bytes (a CIFAR image).
// usage: loopback_ring_bench [--message B] [--ring B] [--replies N] [--stream] [--no-tcp] [--normalize]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "kernels/normalize_row.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

constexpr size_t kChunk = 64 << 10;
constexpr size_t kImage = 3072;  // a CIFAR image: 32 x 32 x 3

void Pin(int core) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(core, &s);
  pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

double ThreadCpu() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

[[noreturn]] void Die(const char* what) {
  std::perror(what);
  std::exit(1);
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) void StreamCopy(uint8_t* d, const uint8_t* s, size_t n) {
  size_t i = 0;
  for (; i < n && (reinterpret_cast<uintptr_t>(d + i) & 31); ++i) d[i] = s[i];
  for (; i + 32 <= n; i += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
  for (; i < n; ++i) d[i] = s[i];
}
#else
void StreamCopy(uint8_t* d, const uint8_t* s, size_t n) { std::memcpy(d, s, n); }
#endif

// Each image of the reply (its 3,072 bytes may straddle two buffers: those are gathered) normalised to
// float planes in ring slot `*at` of `slots`, as the client finishes a remote float32 sample.
void NormalizeReply(const std::vector<std::vector<uint8_t>>& bufs, const std::vector<size_t>& filled, size_t k,
                    float* ring, size_t slots, size_t* at) {
  static const float scale[3] = {0.0171f, 0.0175f, 0.0174f}, bias[3] = {-2.12f, -2.04f, -1.80f};
  uint8_t split[kImage];
  size_t held = 0;
  for (size_t j = 0; j < k; ++j) {
    const uint8_t* p = bufs[j].data();
    size_t left = filled[j];
    while (left) {
      const uint8_t* image = p;
      if (held || left < kImage) {
        const size_t c = std::min(kImage - held, left);
        std::memcpy(split + held, p, c);
        held += c, p += c, left -= c;
        if (held < kImage) break;
        image = split, held = 0;
      } else {
        p += kImage, left -= kImage;
      }
      float* o = ring + (*at % slots) * kImage;
      dsc::kernels::NormalizeRowPlanar(image, 1024, o, o + 1024, o + 2048, scale, bias);
      ++*at;
    }
  }
  dsc::kernels::StreamFence();  // AVX-512 writes the planes with streaming stores
}

}  // namespace

int main(int argc, char** argv) {
  size_t message = 1600000, ring = size_t(6) << 20;
  int replies = 2000;
  bool stream = false, tcp = true, normalize = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--message" && i + 1 < argc) message = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--ring" && i + 1 < argc) ring = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--replies" && i + 1 < argc) replies = std::atoi(argv[++i]);
    else if (a == "--stream") stream = true;
    else if (a == "--no-tcp") tcp = false;
    else if (a == "--normalize") normalize = true;
    else {
      std::fprintf(stderr, "usage: loopback_ring_bench [--message B] [--ring B] [--replies N] [--stream] [--no-tcp] [--normalize]\n");
      return 2;
    }
  }
  if (message == 0 || ring < kChunk || replies <= 0) {  // a ring below a reply wraps within it
    std::fprintf(stderr, "loopback_ring_bench: need --message > 0, --ring >= 65536 and --replies > 0\n");
    return 2;
  }
  if (normalize && (stream || message % kImage || ring < kImage * 4)) {
    std::fprintf(stderr, "loopback_ring_bench: --normalize needs a --message of whole 3,072-byte images, without --stream\n");
    return 2;
  }
  std::vector<uint8_t> source(message, 7);
  std::thread sender;
  int conn = -1;
  if (tcp) {
    const int ls = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (ls < 0 || bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(ls, 1) != 0 ||
        getsockname(ls, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      Die("listen");
    sender = std::thread([&, addr] {
      Pin(1);
      const int s = socket(AF_INET, SOCK_STREAM, 0);
      if (s < 0 || connect(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) Die("connect");
      for (int r = 0; r < replies; ++r) {
        for (size_t o = 0; o < message;) {
          const ssize_t n = send(s, source.data() + o, message - o, 0);
          if (n <= 0) Die("send");
          o += size_t(n);
        }
        char request;
        if (recv(s, &request, 1, MSG_WAITALL) != 1) Die("recv request");
      }
      close(s);
    });
    conn = accept(ls, nullptr, nullptr);
    if (conn < 0) Die("accept");
    close(ls);
  }
  Pin(0);
  auto* dst = static_cast<uint8_t*>(std::aligned_alloc(4096, (ring + 4095) / 4096 * 4096));
  if (!dst) Die("aligned_alloc");
  std::memset(dst, 0, ring);
  std::vector<std::vector<uint8_t>> bufs((message + kChunk - 1) / kChunk, std::vector<uint8_t>(kChunk));
  std::vector<size_t> filled(bufs.size());
  size_t at = 0;
  double copy_s = 0;
  const double cpu0 = ThreadCpu();
  for (int r = 0; r < replies; ++r) {
    size_t got = 0, k = 0;
    for (; got < message; ++k) {
      const size_t want = std::min(kChunk, message - got);
      size_t n = want;
      if (k == bufs.size()) bufs.emplace_back(kChunk), filled.push_back(0);  // a short read: one buffer more
      if (tcp) {
        const ssize_t m = recv(conn, bufs[k].data(), want, 0);
        if (m <= 0) Die("recv");
        n = size_t(m);
      } else {
        std::memcpy(bufs[k].data(), source.data() + got, n);
      }
      filled[k] = n;
      got += n;
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (normalize) NormalizeReply(bufs, filled, k, reinterpret_cast<float*>(dst), ring / (kImage * 4), &at);
    for (size_t j = 0; !normalize && j < k; ++j) {
      if (at + filled[j] > ring) at = 0;
      if (stream) StreamCopy(dst + at, bufs[j].data(), filled[j]);
      else std::memcpy(dst + at, bufs[j].data(), filled[j]);
      at += filled[j];
    }
#if defined(__x86_64__)
    if (stream) _mm_sfence();
#endif
    copy_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (tcp) {
      const char request = 1;
      if (send(conn, &request, 1, 0) != 1) Die("send request");
    }
  }
  const double cpu = ThreadCpu() - cpu0;
  if (tcp) {
    sender.join();
    close(conn);
  }
  const double images = double(message) * replies / 3072;
  std::printf("message %zu B, ring %zu B, %s, %s: receiver CPU %.3f us, ring writes %.3f us per 3,072 B\n", message, ring,
              tcp ? "loopback TCP" : "no TCP", normalize ? "normalised to float32" : stream ? "streaming stores" : "memcpy", cpu / images * 1e6,
              copy_s / images * 1e6);
  std::free(dst);
  return 0;
}
