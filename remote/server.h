// `dsc serve`: a worker that decodes and augments chunks of batches for remote loaders (docs/remote.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dsc::remote {

struct ServeOptions {
  std::vector<std::string> files;  // the only files it opens; clients name them by identity
  std::string listen = "127.0.0.1:0";  // port 0: any free port
  int threads = 0;                  // decode threads; 0 = all cores
  std::string cache_dir;            // a URL's cache folder ("" = $DSC_CACHE_DIR, else ~/.cache/dsc; docs/streaming.md)
  uint64_t cache_budget = 256ull << 20;  // bytes of blocks kept there, per file
  std::string token;                // required off loopback; compared in constant time
  std::string tls_cert, tls_key;    // PEM; TLS when set
  bool insecure_plaintext = false;  // allow no TLS off loopback
  uint32_t max_in_flight = 8;       // Process calls at once per client connection
  uint32_t max_calls = 64;          // Process calls at once from all clients (each holds a gRPC thread)
  uint64_t max_memory = 2ull << 30; // reply bytes held by all calls together
  // Without TLS, Process requests may also come on a TCP port of their own (remote/data.h), which the
  // handshake gives to authenticated clients: less CPU for the client than gRPC. false: gRPC only.
  bool data_path = true;
  uint32_t data_port = 0;  // the data path's port; 0: any free one (the handshake tells clients)
  // Test hooks: after N Process calls, fail every further one / stall (until the client gives up,
  // or for stall_ms) / die as kill -9 would. 0 = off.
  uint64_t fail_after = 0, stall_after = 0, stall_ms = 0, die_after = 0;
  std::string report_version;  // test hook: claim this dsc version in the handshake ("" = the real one)
  uint32_t report_data_port = 0;  // test hook: give clients this data port in the handshake (0 = the real one)
};

// Runs until SIGTERM or SIGINT (then drains calls in progress and returns 0). Prints
// "listening on ADDR:PORT" on stdout once it accepts calls. Throws dsc::Error for a file it cannot
// open or an address it cannot bind; the caller checks the options' policy (ValidateServeOptions).
// Meant to end the process: it leaves gRPC initialised (its final shutdown could wait 10 s).
int Serve(const ServeOptions& o);

// "" when the options are acceptable; else why not (the CLI exits 2). Warnings go to `warning`.
std::string ValidateServeOptions(const ServeOptions& o, std::string* warning);

}  // namespace dsc::remote
