// The loader's side of remote workers: a RemoteExecutor (reader/executor.h) that sends chunks to a
// `dsc serve` worker over gRPC (and its data path).
//
//   dsc::LoaderOptions o = dsc::LoaderOptions::ImagenetTrain();
//   o.remote.addresses = {"10.0.0.7:7000", "10.0.0.8:7000"};
//   o.remote.token = dsc::remote::ReadTokenFile("token.txt");
//   o.remote.connect = dsc::remote::Connector();
//   dsc::Loader loader("train.beton", o);  // throws if a worker serves another file or version
//
// A reply's images are read from the receive buffers straight into the batch: one copy (or one zstd
// decompression) per byte. Without TLS the requests go on the worker's data port, outside gRPC
// (remote/data.h; RemoteOptions::transport.data_path).
#pragma once
#include <string>

#include "reader/executor.h"

namespace dsc::remote {

RemoteConnector Connector();

// The token in `path` without trailing white space; throws dsc::Error naming the file when it cannot
// be read or is empty.
std::string ReadTokenFile(const std::string& path);
// A whole file (TLS certificates and keys); throws dsc::Error naming it.
std::string ReadFile(const std::string& path);

}  // namespace dsc::remote
