// The remote-worker flags `dsc bench` and `dsc train` share: --remote, --token-file, --tls-root,
// --local-threads, --wire-compression.
#pragma once
#include <string>

#include "format/error.h"
#include "reader/executor.h"
#include "reader/loader.h"
#ifdef DSC_HAVE_REMOTE
#include "remote/client.h"
#endif

namespace dsc::tools {

// Fills o->remote from the flags; throws dsc::OptionError (a usage error) for flags that need --remote
// and a negative --local-threads (-1 is "not given"), dsc::Error for files it cannot read.
inline void ApplyRemoteFlags(const std::string& remote, const std::string& token_file, const std::string& tls_root,
                             int local_threads, bool compression, LoaderOptions* o) {
  if (remote.empty()) {
    if (!token_file.empty() || !tls_root.empty() || local_threads >= 0 || compression)
      throw OptionError("--token-file, --tls-root, --local-threads and --wire-compression need --remote");
    return;
  }
  if (local_threads < -1) throw OptionError("--local-threads " + std::to_string(local_threads) + ": expected 0 or more");
#ifdef DSC_HAVE_REMOTE
  o->remote.addresses = SplitAddresses(remote);
  if (!token_file.empty()) o->remote.token = remote::ReadTokenFile(token_file);
  if (!tls_root.empty()) o->remote.tls_root = remote::ReadFile(tls_root);
  o->remote.local_threads = local_threads;
  o->remote.compression = compression;
  o->remote.connect = remote::Connector();
#else
  (void)token_file, (void)tls_root, (void)local_threads, (void)compression, (void)o;
  throw OptionError("--remote: this dsc was built without gRPC (install libgrpc++-dev, protobuf-compiler-grpc and rebuild)");
#endif
}

}  // namespace dsc::tools
