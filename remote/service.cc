#include "remote/service.h"

#include <malloc.h>
#include <signal.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include "format/error.h"
#include "kernels/cpu.h"
#include "kernels/jpeg_seek.h"
#include "remote/codec.h"
#include "remote/wire.h"

namespace dsc::remote {

namespace {

// Constant-time comparison: the time taken does not tell how much of a guess was right.
bool SameToken(const std::string& a, const std::string& b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() != b.size();
  for (size_t i = 0; i < n; ++i)
    diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

std::string Clip(const std::string& s) { return s.size() <= 256 ? s : s.substr(0, 256) + "..."; }

Outcome Invalid(const std::string& why) { return {Code::kInvalidArgument, why}; }

}  // namespace

WorkerService::WorkerService(const ServeOptions& o) : o_(o), pool_(o.threads > 0 ? o.threads : kernels::UsableCores()) {
  for (const auto& f : o.files) {
    files_.emplace_back();
    files_.back().path = f;
    const DatasetOptions source{.cache_dir = o.cache_dir, .cache_budget = o.cache_budget};
    files_.back().plain = std::make_unique<Dataset>(f, source);
    files_.back().verified_options = source;
    files_.back().verified_options.verify = true;
  }
  janitor_ = std::thread([this] { GiveBackWhenIdle(); });
}

WorkerService::~WorkerService() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  idle_cv_.notify_all();
  janitor_.join();
}

Dataset* WorkerService::FileEntry::Verified() {
  std::call_once(verified_once, [this] { verified = std::make_unique<Dataset>(path, verified_options); });
  return verified.get();
}

void WorkerService::SetDataPath(uint16_t port, const std::string& ticket) {
  data_port_ = port;
  ticket_ = ticket;
}

Outcome WorkerService::Authenticate(const std::string* token) const {
  if (o_.token.empty()) return {};
  if (!token) return {Code::kUnauthenticated, "this worker needs a token (--token-file)"};
  if (!SameToken(*token, o_.token)) return {Code::kUnauthenticated, "wrong token"};
  return {};
}

bool WorkerService::TicketOk(const std::string& got) const { return SameToken(got, ticket_); }

Outcome WorkerService::Hello(const HelloRequest& req, HelloReply* rep) const {
  rep->set_protocol(kProtocol);
  rep->set_dsc_version(o_.report_version.empty() ? DscVersion() : o_.report_version);
  rep->set_jpeg_version(JpegVersion());
  rep->set_threads(uint32_t(pool_.size()));
  rep->set_max_samples(kMaxRequestSamples);
  if (data_port_) rep->set_data_port(o_.report_data_port ? o_.report_data_port : data_port_), rep->set_data_ticket(ticket_);
  if (req.protocol() != kProtocol || req.dsc_version() != DscVersion() || req.jpeg_version() != JpegVersion())
    return rep->set_file_id(0), Outcome();  // the client compares versions and explains
  for (size_t i = 0; i < files_.size(); ++i) {
    const auto& h = files_[i].plain->view().header();
    if (h.file_size == req.file_size() && h.header_checksum == req.header_checksum()) {
      uint32_t w, hgt;
      try {
        // The scratch limit too: options every Process call would refuse are refused here, where the
        // client makes it an error, not a worker that fails each batch and is reconnected forever.
        const LoaderOptions o = FromSpec(req.spec(), &w, &hgt);
        CheckScratch(o, w, hgt);
      } catch (const std::exception& e) {
        return Invalid(std::string("options refused: ") + e.what());
      }
      rep->set_file_id(uint32_t(i));
      return {};
    }
  }
  // Status messages travel as metadata (8 KiB by default, else the client sees only that limit):
  // a few served paths, and the client's path cut short.
  std::string served;
  for (size_t i = 0; i < o_.files.size() && i < 4; ++i) served += (i ? ", " : "") + Clip(o_.files[i]);
  if (o_.files.size() > 4) served += " and " + std::to_string(o_.files.size() - 4) + " more";
  return {Code::kFailedPrecondition, "serves no file with the identity of " + Clip(req.path()) + " (size " +
                                         std::to_string(req.file_size()) + ", header checksum " +
                                         std::to_string(req.header_checksum()) + "); it serves " + served};
}

void WorkerService::Status(StatusReply* rep) {
  std::lock_guard<std::mutex> l(mu_);
  rep->set_in_flight(in_flight_);
  rep->set_reserved_bytes(reserved_);
  rep->set_requests(requests_);
  rep->set_cancelled(cancelled_);
  rep->set_data_requests(data_requests_);
}

Outcome WorkerService::Process(const ProcessRequest& req, const std::string& peer, bool data_path,
                               const std::function<bool()>& cancelled, const std::function<Outcome(Reply&)>& send) {
  const uint64_t n = calls_.fetch_add(1) + 1;
  if (o_.die_after && n > o_.die_after) ::raise(SIGKILL);  // test hook: as kill -9
  if (o_.fail_after && n > o_.fail_after) return {Code::kInternal, "failing on purpose (--fail-after)"};
  if (req.file_id() >= files_.size()) return Invalid("unknown file id " + std::to_string(req.file_id()));
  FileEntry& f = files_[req.file_id()];
  if (req.header_checksum() != f.plain->view().header().header_checksum)
    return Invalid("file id " + std::to_string(req.file_id()) + " is another file");
  const uint32_t count = uint32_t(req.samples_size());
  if (req.samples_size() > int(kMaxRequestSamples))
    return Invalid(std::to_string(req.samples_size()) + " samples in one request; at most " + std::to_string(kMaxRequestSamples));
  for (uint32_t i = 0; i < count; ++i)
    if (req.samples(int(i)) >= f.plain->size())
      return Invalid("sample " + std::to_string(req.samples(int(i))) + " is past the file's " + std::to_string(f.plain->size()));
  std::shared_ptr<const SampleWork> work;
  std::string key;
  try {
    work = Work(req.file_id(), req.spec(), &key);
  } catch (const std::exception& e) {
    return Invalid(std::string("options refused: ") + e.what());
  }
  const uint64_t image_bytes = uint64_t(work->sample_bytes()) * count;
  const uint64_t reserve = image_bytes * (req.compress() ? 2 : 1) + uint64_t(kParamBytes) * count;
  if (Outcome s = Admit(peer, reserve); !s.ok()) return s;
  struct Release {
    WorkerService* s;
    std::string peer;
    uint64_t bytes;
    ~Release() { s->Leave(peer, bytes); }
  } release{this, peer, reserve};
  if (o_.stall_after && n > o_.stall_after) {  // test hook: until the client gives up, or stall_ms
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(o_.stall_ms ? o_.stall_ms : 3600000);
    while (!cancelled() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (cancelled()) return Cancelled();
  }

  DecodeCall c;
  try {
    c.ds = work->verify() ? f.Verified() : f.plain.get();
  } catch (const std::exception& e) {
    return {Code::kInternal, e.what()};
  }
  c.work = work;
  c.key = key;
  c.seed = req.seed();
  c.epoch = req.epoch();
  c.samples = req.samples().data();
  std::vector<uint8_t> raw;  // compressed replies: the images before zstd
  Reply reply;
  if (req.compress()) {
    raw.resize(image_bytes);
    c.images = raw.data();
  } else {
    try {
      reply.images = buffers_->Get(size_t(image_bytes));  // uninitialised; ours alone until sent
    } catch (const std::bad_alloc&) {  // the client retries elsewhere; this worker keeps serving
      return {Code::kResourceExhausted, "cannot allocate " + std::to_string(image_bytes) + " bytes for a reply"};
    }
    c.images = reply.images.data();
  }
  std::vector<uint8_t> params(size_t(kParamBytes) * count), forms;
  c.params = params.data();
  // Planes only where the request's processors write finished uint8 NHWC (what a client that finishes
  // float batches asks for).
  if (req.spec().planes() && work->writes_forms()) {
    forms.resize(count);
    c.forms = forms.data();
  }
  pool_.Run(&c, count, cancelled);
  if (c.cancelled.load()) return Cancelled();
  if (!c.error.empty()) {
    Reply error{EncodeSampleErrorReply(c.error), {}};
    return send(error);
  }
  uint64_t sent_bytes = image_bytes;
  if (c.forms) {  // each sample's form, packed: a sample never grows, so each moves down or stays
    const uint32_t w = work->width(), h = work->height();
    uint64_t at = 0;
    for (uint32_t i = 0; i < count; ++i) {
      const size_t size = SampleFormBytes(SampleForm(forms[i]), w, h);
      if (at != uint64_t(work->sample_bytes()) * i) std::memmove(c.images + at, c.images + uint64_t(work->sample_bytes()) * i, size);
      at += size;
    }
    sent_bytes = at;
    if (req.compress()) raw.resize(size_t(at));
    else reply.images.Shrink(size_t(at));
  }
  if (req.compress()) {
    reply.images = ReplyMemory::Heap(ZSTD_compressBound(raw.size()));
    const size_t z = ZSTD_compress(reply.images.data(), reply.images.size(), raw.data(), raw.size(), 1);
    if (ZSTD_isError(z)) return {Code::kInternal, ZSTD_getErrorName(z)};
    reply.images.Shrink(z);
  }
  reply.head = EncodeReplyHead(req.compress(), sent_bytes, params.data(), params.size(), c.forms ? forms.data() : nullptr,
                               forms.size(), reply.images.size());
  const Outcome st = send(reply);
  std::lock_guard<std::mutex> l(mu_);
  if (st.ok()) ++requests_, data_requests_ += data_path;
  return st;
}

// The SampleWork of a (file, spec), shared by calls that send the same spec.
std::shared_ptr<const SampleWork> WorkerService::Work(uint32_t file, const WorkSpec& spec, std::string* key) {
  *key = std::to_string(file) + ":" + SpecKey(spec);
  std::lock_guard<std::mutex> l(mu_);
  auto it = works_.find(*key);
  if (it != works_.end()) return it->second;
  uint32_t w, h;
  const LoaderOptions o = FromSpec(spec, &w, &h);
  CheckScratch(o, w, h);
  if (works_.size() >= 16) works_.clear();  // calls in progress keep theirs alive
  FileEntry& f = files_[file];
  if (!f.seek && o.jpeg_index_budget > 0) f.seek = std::make_shared<kernels::JpegSeekCache>(o_.max_memory / 4);
  auto work = std::make_shared<const SampleWork>(o, w, h, f.seek);
  works_.emplace(*key, work);
  return work;
}

// Each pool thread keeps the processors of its last few specs, with scratch the size of their output
// (an output sample and a resized image): bounded by --max-memory-mb like the replies, so that specs
// naming huge outputs cannot make the worker hold gigabytes between calls.
void WorkerService::CheckScratch(const LoaderOptions& o, uint32_t w, uint32_t h) const {
  const uint64_t scratch = uint64_t(w) * h * 3 * (DTypeSize(o.dtype) + 1);
  const uint64_t most = scratch * kProcessorsPerThread * pool_.size();
  if (most > o_.max_memory)
    throw Error("a " + std::to_string(w) + "x" + std::to_string(h) + " output needs up to " + std::to_string(most >> 20) +
                " MiB of scratch on this worker's " + std::to_string(pool_.size()) + " threads, over its --max-memory-mb " +
                std::to_string(o_.max_memory >> 20));
}

Outcome WorkerService::Admit(const std::string& peer, uint64_t bytes) {
  std::lock_guard<std::mutex> l(mu_);
  if (in_flight_ >= o_.max_calls)
    return {Code::kResourceExhausted, "busy: " + std::to_string(o_.max_calls) + " calls in flight (--max-calls)"};
  if (per_peer_[peer] >= o_.max_in_flight)
    return {Code::kResourceExhausted, "more than " + std::to_string(o_.max_in_flight) + " calls in flight from " + peer};
  if (reserved_ + bytes > o_.max_memory)
    return {Code::kResourceExhausted, "a reply of " + std::to_string(bytes) + " bytes is over the worker's memory limit (" +
                                          std::to_string(o_.max_memory - reserved_) + " bytes free)"};
  ++per_peer_[peer];
  ++in_flight_;
  reserved_ += bytes;
  return {};
}

void WorkerService::Leave(const std::string& peer, uint64_t bytes) {
  std::lock_guard<std::mutex> l(mu_);
  if (--per_peer_[peer] == 0) per_peer_.erase(peer);
  --in_flight_;
  reserved_ -= bytes;
  used_ = true;
  last_leave_ = std::chrono::steady_clock::now();
}

Outcome WorkerService::Cancelled() {
  std::lock_guard<std::mutex> l(mu_);
  ++cancelled_;
  return {Code::kCancelled, ""};
}

// The heap keeps freed reply memory for the next calls (Serve's malloc settings): once no call has run
// for kIdleGiveBack, give it and the idle reply buffers back, so that a worker between clients holds
// its base memory, not its busiest moment's.
void WorkerService::GiveBackWhenIdle() {
  constexpr auto kIdleGiveBack = std::chrono::seconds(1);
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    idle_cv_.wait_for(l, std::chrono::milliseconds(250));
    if (stop_ || !used_ || in_flight_ > 0 || std::chrono::steady_clock::now() - last_leave_ < kIdleGiveBack) continue;
    used_ = false;
    l.unlock();
    buffers_->DropIdle();
    malloc_trim(0);
    l.lock();
  }
}

}  // namespace dsc::remote
