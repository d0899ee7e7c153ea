// The worker's service (dsc serve), apart from any transport: the handshake, a Process request turned
// into reply bytes, the limits on calls and memory, and the counts Status reports. The gRPC service
// (remote/grpc_service.h) and the data port (remote/data_server.h) only carry its requests and replies.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "reader/dataset.h"
#include "reader/sample_work.h"
#include "remote/decode_pool.h"
#include "remote/reply_buffers.h"
#include "remote/server.h"
#include "remote/worker.pb.h"

namespace dsc::kernels {
class JpegSeekCache;
}  // namespace dsc::kernels

namespace dsc::remote {

// gRPC's status codes, which the data path sends too (remote/data.h).
enum class Code : uint32_t {
  kOk = 0,
  kCancelled = 1,
  kInvalidArgument = 3,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kInternal = 13,
  kUnauthenticated = 16,
};

struct Outcome {
  Code code = Code::kOk;
  std::string message;
  bool ok() const { return code == Code::kOk; }
};

// A ProcessReply as the transport sends it: `head` (remote/codec.h) then the images' bytes, if any.
struct Reply {
  std::string head;
  ReplyMemory images;
};

class WorkerService {
 public:
  // Opens the files and starts the decode threads; throws dsc::Error when it cannot.
  explicit WorkerService(const ServeOptions& o);
  ~WorkerService();

  // The data path's port and ticket (remote/data.h), given to authenticated clients in Hello. Set
  // before any call.
  void SetDataPath(uint16_t port, const std::string& ticket);

  // Whether a call may go on: `token` is what the client sent (null: none). Constant time.
  Outcome Authenticate(const std::string* token) const;
  // Whether a data connection's first bytes are the ticket. Constant time.
  bool TicketOk(const std::string& got) const;

  // The handshake, for an authenticated client.
  Outcome Hello(const HelloRequest& req, HelloReply* rep) const;
  void Status(StatusReply* rep);

  // Turns an authenticated client's request into its reply and hands it to `send` while its memory is
  // still counted against the limits. `peer` names the client's connection (for --max-in-flight);
  // `cancelled` says whether it went away; `data_path`: the request came on the data path (counted
  // apart). A request is counted as answered when `send` succeeds.
  Outcome Process(const ProcessRequest& req, const std::string& peer, bool data_path, const std::function<bool()>& cancelled,
                  const std::function<Outcome(Reply&)>& send);

 private:
  struct FileEntry {
    std::string path;
    std::unique_ptr<Dataset> plain;
    // The client's LoaderOptions::verify picks the verifying view; opened on first use, since most runs
    // never ask for it and each view maps the file again.
    std::unique_ptr<Dataset> verified;
    DatasetOptions verified_options;  // verify, and the URL cache of `plain`
    std::once_flag verified_once;
    Dataset* Verified();
    // JPEG entry points for crops (kernels/jpeg_seek.h): they depend on the file's bytes alone, so
    // every spec shares them; a quarter of --max-memory-mb at most, whatever the clients ask.
    std::shared_ptr<kernels::JpegSeekCache> seek;
  };

  std::shared_ptr<const SampleWork> Work(uint32_t file, const WorkSpec& spec, std::string* key);
  void CheckScratch(const LoaderOptions& o, uint32_t w, uint32_t h) const;
  Outcome Admit(const std::string& peer, uint64_t bytes);
  void Leave(const std::string& peer, uint64_t bytes);
  Outcome Cancelled();
  void GiveBackWhenIdle();

  const ServeOptions o_;
  DecodePool pool_;
  std::shared_ptr<ReplyBuffers> buffers_ = std::make_shared<ReplyBuffers>();
  std::deque<FileEntry> files_;  // FileEntry holds a once_flag: never moved
  std::atomic<uint64_t> calls_{0};
  uint16_t data_port_ = 0;
  std::string ticket_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const SampleWork>> works_;
  std::map<std::string, uint32_t> per_peer_;
  uint32_t in_flight_ = 0;
  uint64_t reserved_ = 0, requests_ = 0, cancelled_ = 0, data_requests_ = 0;
  bool used_ = false, stop_ = false;  // used_: calls ended since the last give-back
  std::chrono::steady_clock::time_point last_leave_;
  std::condition_variable idle_cv_;
  std::thread janitor_;  // runs GiveBackWhenIdle; joined by the destructor, before any member goes
};

}  // namespace dsc::remote
