// Executors other than the loader's own threads: remote workers (`dsc serve`; remote/ implements this
// interface over gRPC). dsc::reader knows only the interface, so its users never link gRPC.
//
// The loader hands an executor chunks of consecutive samples of one batch (ChunkTask). A sample's
// output depends only on the file, the options, the seed, the epoch and its index, so a chunk is
// stateless, idempotent work: when an executor fails, stalls or disappears the loader gives its
// unfinished chunks to another executor (or to its own threads) and the batches stay byte-identical
// to a local run's (docs/remote.md).
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/augment.h"
#include "reader/loader.h"

namespace dsc {

// The most samples one request may carry: workers refuse more (dsc serve), and the loader sizes its
// requests within it.
constexpr uint32_t kMaxRemoteRequestSamples = 4096;

// What an executor must know to produce a loader's samples.
struct RemoteContext {
  std::string path;  // the loader's file, for messages
  uint64_t file_size = 0, header_checksum = 0;  // the file's identity: a worker must serve the same bytes
  // As the loader normalised them, except that float outputs are asked for in the deferred form
  // (RemoteOptions::transport.ship_uint8): the loader finishes those samples itself.
  LoaderOptions options;
  uint32_t width = 0, height = 0;  // the output size at construction (ChunkTask has the current one)
  // The most samples one of this loader's requests carries: with the output size, it bounds the reply
  // an executor accepts (a worker cannot make the loader receive more).
  uint32_t max_request_samples = kMaxRemoteRequestSamples;
  // The loader finishes the samples (ChunkTask::sink) and takes them in any SampleForm: an executor
  // may ask for planes. Without it every sample comes as `options` says.
  bool planes = false;
  uint64_t run_fingerprint = 0;                 // RunIdentity, for logs
};

struct BytePiece {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

// How a deferred sample travels (ChunkTask::sink). kRgb: its uint8 RGB rows at the output size, as
// the deferring processor writes them. The others only where the executor was asked for planes
// (RemoteContext::planes) and the sample is a JPEG of the output's size that the loader's own threads
// would decode to planes (no crop, box upsampling): the decoder's planes, each w x h plane's rows one
// after another, Y then Cb then Cr at the chroma size ceil(w / 2^h) x ceil(h / 2^v); the loader
// converts them as its fused path does. Same bytes in the batch, half of RGB's on the wire at 4:2:0.
enum class SampleForm : uint8_t {
  kRgb = 0,
  kGray = 1,     // one plane: luma
  kYcc444 = 2,   // the four YCbCr forms are kYcc444 + hshift + 2 x vshift of the chroma planes
  kYcc422 = 3,
  kYcc440 = 4,
  kYcc420 = 5,
};
constexpr uint8_t kSampleForms = 6;
// The bytes of a w x h sample in form f (f < kSampleForms).
size_t SampleFormBytes(SampleForm f, uint32_t w, uint32_t h);

// Takes a chunk's samples as they arrive (ChunkTask::sink).
class SampleSink {
 public:
  virtual ~SampleSink() = default;
  // Sample j of the chunk (each once, in any order): its SampleFormBytes(form, width, height) bytes in
  // order across n pieces (one, or several when a sample is split between receive buffers), valid
  // only during the call.
  virtual void Take(uint32_t j, SampleForm form, const BytePiece* pieces, size_t n) = 0;
};


// Consecutive samples of one batch to fill in place.
struct ChunkTask {
  uint64_t epoch = 0, seed = 0;
  const uint32_t* samples = nullptr;  // dataset indices
  uint32_t count = 0;
  uint32_t width = 0, height = 0;           // the output size now (Loader::set_output_size may change it)
  uint8_t* images = nullptr;                // count x 3 x width x height x the dtype's bytes
  kernels::SampleParams* params = nullptr;  // count
  // When set, Run hands every sample to sink->Take instead of leaving it in `images`, which it may
  // then use as scratch: the loader finishes deferred samples straight from the receive buffers,
  // without copying them out first. On anything but kOk the sink may have seen some of the samples.
  SampleSink* sink = nullptr;
  const std::atomic<bool>* cancel = nullptr;  // set before CancelAll: the loader is stopping
};

enum class ConnectResult {
  kReady,        // the handshake succeeded
  kUnreachable,  // try again later
  kRefused,      // the worker cannot serve this run (another file or version, a bad token): a user error
};

enum class RunResult {
  kOk,           // the chunk is filled
  kRetry,        // the executor failed (down, stalled, overloaded): the loader gives the chunk to another
  kSampleError,  // a sample is damaged (`why` names it): the loader raises it as a local decode would
  kBusy,         // the executor is up but turned the chunk away for now (its in-flight or memory limit):
                 // the loader gives it to another and asks again shortly, without marking it down
};

// "host:port,host:port" -> its addresses (empty entries dropped): the one reading of --remote and of
// Python's remote="...".
std::vector<std::string> SplitAddresses(const std::string& list);

class RemoteExecutor {
 public:
  virtual ~RemoteExecutor() = default;
  virtual const std::string& address() const = 0;
  // The handshake; `why` names the worker and the reason when not kReady.
  virtual ConnectResult Connect(int timeout_ms, std::string* why) = 0;
  // Fills `t`, within `deadline_ms`. Anything but kOk leaves `t`'s bytes unspecified. Called by several
  // threads at once.
  virtual RunResult Run(const ChunkTask& t, int deadline_ms, std::string* why) = 0;
  // Makes every Run in progress return kRetry soon (the loader is stopping mid-epoch).
  virtual void CancelAll() = 0;
  virtual uint64_t wire_bytes() const = 0;  // bytes sent and received by Run so far (messages, not framing)
};

}  // namespace dsc
