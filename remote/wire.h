// What the client and the worker agree on beyond the .proto: versions, the WorkSpec <-> LoaderOptions
// mapping and the byte layout of a sample's parameters.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/augment.h"
#include "reader/executor.h"
#include "reader/loader.h"
#include "remote/address.h"  // IsLoopback, IsPort (server and client)
#include "remote/worker.pb.h"

namespace dsc::remote {

constexpr uint32_t kProtocol = 3;  // 2: sample forms (ProcessReply.forms); 3: options as table text
constexpr size_t kParamBytes = 4 * 8 + 5 * 4;  // one kernels::SampleParams on the wire
constexpr uint32_t kMaxRequestSamples = kMaxRemoteRequestSamples;  // per ProcessRequest (reader/executor.h)
constexpr const char* kTokenKey = "dsc-token";  // call metadata

const char* DscVersion();
uint32_t JpegVersion();  // libjpeg-turbo's, as LIBJPEG_TURBO_VERSION_NUMBER

// The options a worker needs (the option table's kOnWire rows, as text) and the output size.
void ToSpec(const LoaderOptions& o, uint32_t width, uint32_t height, WorkSpec* spec);
// Throws OptionError for a spec that lacks an option, has an unknown one, or that ValidateOptions refuses.
LoaderOptions FromSpec(const WorkSpec& spec, uint32_t* width, uint32_t* height);
std::string SpecKey(const WorkSpec& spec);  // equal specs, equal keys (deterministic serialisation)

void PutParams(const kernels::SampleParams& p, uint8_t* out);  // kParamBytes
kernels::SampleParams GetParams(const uint8_t* in);

}  // namespace dsc::remote
