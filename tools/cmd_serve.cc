// dsc serve: decode and augment for remote loaders (docs/remote.md).

#include <cstdio>

#include "format/error.h"
#include "tools/commands.h"
#include "tools/loader_flags.h"
#ifdef DSC_HAVE_REMOTE
#include "remote/client.h"
#include "remote/server.h"
#endif

namespace dsc::tools {

int CmdServe(int argc, char** argv) {
#ifndef DSC_HAVE_REMOTE
  // Before any option parsing: nothing else of this command exists here (and GCC 12 at -O3 warns
  // about the unused parser's strings).
  (void)argc, (void)argv;
  std::fprintf(stderr, "dsc serve: this dsc was built without gRPC (install libgrpc++-dev, protobuf-compiler-grpc and rebuild)\n");
  return kExitUsage;
#else
  cli::Options opts("dsc serve",
                    "Decode and augment batches of FILE... for loaders on other machines (their --remote).\n\n"
                    "  dsc serve train.beton --listen 127.0.0.1:7000 --threads 8\n"
                    "  dsc serve train.beton --listen 0.0.0.0:7000 --token-file token --tls-cert c.pem --tls-key k.pem\n");
  opts.positional_help("FILE [FILE...]");
  opts.add_options()
      ("listen", "ADDR:PORT to listen on; port 0 picks a free one (printed)", cli::value<std::string>()->default_value("127.0.0.1:0"))
      ("threads", "decode threads (0 = all cores)", cli::value<int>()->default_value("0"))
      ("token-file", "callers must send the token in this file (required off loopback)", cli::value<std::string>()->default_value(""))
      ("tls-cert", "PEM certificate chain (TLS)", cli::value<std::string>()->default_value(""))
      ("tls-key", "PEM private key (TLS)", cli::value<std::string>()->default_value(""))
      ("insecure-plaintext", "allow a non-loopback address without TLS")
      ("grpc-only", "no data port: Process requests on gRPC only (without TLS they may also come on a TCP port of their own, which costs clients less CPU)")
      ("data-port", "the data port (0 = a free one; set one that a firewall lets through)", cli::value<uint32_t>()->default_value("0"))
      ("max-in-flight", "calls at once per client connection", cli::value<uint32_t>()->default_value("8"))
      ("max-calls", "calls at once from all clients together", cli::value<uint32_t>()->default_value("64"))
      ("max-memory-mb", "reply memory held by all calls together", cli::value<uint64_t>()->default_value("2048"))
      ("h,help", "show this help")("files", "", cli::value<std::vector<std::string>>());
  const LoaderFlagSet source_flags = SourceFlags(true);  // FILE may be a URL, streamed through a cache folder
  DeclareLoaderFlags(opts, source_flags, nullptr);
  // Fault injection for the tests (tests/remote_test.cc): accepted, never listed by --help.
  opts.add_options("Test hooks")
      ("fail-after", "test hook: fail every call after the first N", cli::value<uint64_t>()->default_value("0"))
      ("stall-after", "test hook: stall every call after the first N", cli::value<uint64_t>()->default_value("0"))
      ("stall-ms", "test hook: how long a stalled call stalls (0 = until the client gives up)", cli::value<uint64_t>()->default_value("0"))
      ("die-after", "test hook: die as kill -9 would at call N + 1", cli::value<uint64_t>()->default_value("0"))
      ("report-version", "test hook: claim this dsc version in the handshake", cli::value<std::string>()->default_value(""))
      ("report-data-port", "test hook: give clients this data port in the handshake", cli::value<uint32_t>()->default_value("0"));
  opts.hide_group("Test hooks");
  opts.parse_positional({"files"});
  remote::ServeOptions so;
  try {
    auto r = Parse(opts, argc, argv);
    RejectUnmatched(r);
    if (r.count("help")) {
      std::fputs(opts.help().c_str(), stdout);
      return kExitOk;
    }
    if (r.count("files")) so.files = r["files"].as<std::vector<std::string>>();
    so.listen = r["listen"].as<std::string>();
    so.threads = r["threads"].as<int>();
    const DatasetOptions source = SourceOptions(r, source_flags);
    so.cache_dir = source.cache_dir;
    so.cache_budget = source.cache_budget;
    const std::string token_file = r["token-file"].as<std::string>();
    if (!token_file.empty()) so.token = remote::ReadTokenFile(token_file);
    if (!r["tls-cert"].as<std::string>().empty()) so.tls_cert = remote::ReadFile(r["tls-cert"].as<std::string>());
    if (!r["tls-key"].as<std::string>().empty()) so.tls_key = remote::ReadFile(r["tls-key"].as<std::string>());
    so.insecure_plaintext = r.count("insecure-plaintext") > 0;
    so.data_path = r.count("grpc-only") == 0;
    so.data_port = r["data-port"].as<uint32_t>();
    so.report_data_port = r["report-data-port"].as<uint32_t>();
    so.max_in_flight = std::max<uint32_t>(1, r["max-in-flight"].as<uint32_t>());
    so.max_calls = r["max-calls"].as<uint32_t>();
    const uint64_t mb = r["max-memory-mb"].as<uint64_t>();
    if (mb == 0 || mb > (uint64_t(1) << 30)) throw Error("--max-memory-mb must be 1 to 1073741824 (1 PiB), not " + std::to_string(mb));
    so.max_memory = mb << 20;
    so.fail_after = r["fail-after"].as<uint64_t>();
    so.stall_after = r["stall-after"].as<uint64_t>();
    so.stall_ms = r["stall-ms"].as<uint64_t>();
    so.die_after = r["die-after"].as<uint64_t>();
    so.report_version = r["report-version"].as<std::string>();
    std::string warning;
    const std::string bad = remote::ValidateServeOptions(so, &warning);
    if (!bad.empty()) throw Error(bad);
    if (!warning.empty()) std::fprintf(stderr, "dsc serve: warning: %s\n", warning.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsc serve: %s\n\n%s", e.what(), opts.help().c_str());
    return kExitUsage;
  }
  try {
    return remote::Serve(so);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsc serve: %s\n", e.what());
    return kExitBad;
  }
#endif
}

}  // namespace dsc::tools
