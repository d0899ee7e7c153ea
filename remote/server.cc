#include "remote/server.h"

#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>
#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <system_error>
#include <thread>

#include "format/bytes.h"
#include "format/error.h"
#include "kernels/cpu.h"
#include "reader/dataset.h"
#include "reader/huge_pages.h"
#include "reader/sample_work.h"
#include "remote/data.h"
#include "remote/wire.h"
#include "remote/worker.grpc.pb.h"

namespace dsc::remote {

namespace {

// Processors (and their scratch) a decode thread keeps, one per recent spec.
constexpr size_t kProcessorsPerThread = 4;
// Samples a decode thread takes at once: a request split evenly among the threads, in pieces of at most
// this many (small JPEGs in one piece are decoded as one group, SampleProcessor::PrepareChunk; a
// cancelled call stops after the piece in hand).
constexpr uint32_t kMaxPiece = 64;

// Constant-time comparison: the time taken does not tell how much of a guess was right.
bool SameToken(const std::string& a, const std::string& b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() != b.size();
  for (size_t i = 0; i < n; ++i)
    diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

// One Process call's work, split over the decode pool.
struct Call {
  const Dataset* ds = nullptr;
  std::shared_ptr<const SampleWork> work;
  std::string key;  // the processors' cache key: file, verify, spec
  uint64_t seed = 0, epoch = 0;
  const uint32_t* samples = nullptr;
  uint8_t* images = nullptr;
  uint8_t* params = nullptr;
  uint8_t* forms = nullptr;  // spec.planes: each sample's SampleForm
  std::atomic<bool> cancelled{false};
  std::mutex mu;
  std::condition_variable cv;
  uint32_t pending = 0;  // pieces not yet done
  std::string error;
};

struct Piece {
  Call* call;
  uint32_t from, to;
};

// The decode threads. Each keeps a few SampleProcessors (by file and spec), as a loader thread keeps one.
class Pool {
 public:
  explicit Pool(int n) {
    try {
      for (int i = 0; i < n; ++i) threads_.emplace_back([this] { Loop(); });
    } catch (const std::system_error& e) {  // those started must stop before the members go
      Stop();
      throw Error("cannot start " + std::to_string(n) + " decode threads (" + e.what() +
                  "): use --threads with fewer, or raise the process or address-space limit");
    }
  }
  ~Pool() { Stop(); }
  size_t size() const { return threads_.size(); }

  // Runs the call's samples and returns when all are done (or skipped after cancellation).
  void Run(Call* c, uint32_t count, const std::function<bool()>& cancelled) {
    const uint32_t per = std::max<uint32_t>(1, std::min<uint32_t>(kMaxPiece, (count + uint32_t(size()) - 1) / uint32_t(size())));
    {
      std::lock_guard<std::mutex> l(mu_);
      for (uint32_t f = 0; f < count; f += per) {
        queue_.push_back({c, f, std::min(count, f + per)});
        ++c->pending;
      }
    }
    cv_.notify_all();
    std::unique_lock<std::mutex> l(c->mu);
    while (!c->cv.wait_for(l, std::chrono::milliseconds(20), [&] { return c->pending == 0; }))
      if (!c->cancelled.load() && cancelled()) c->cancelled.store(true);  // pieces not started are skipped
  }

 private:
  void Stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  struct Cached {
    std::shared_ptr<const SampleWork> work;
    std::unique_ptr<SampleProcessor> proc;
  };

  void Loop() {
    std::map<std::string, Cached> procs;
    while (true) {
      Piece p;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        p = queue_.front();
        queue_.pop_front();
      }
      Call* c = p.call;
      std::string error;
      if (!c->cancelled.load()) {
        auto it = procs.find(c->key);
        if (it == procs.end()) {
          if (procs.size() >= kProcessorsPerThread) procs.clear();
          it = procs.emplace(c->key, Cached{c->work, c->work->NewProcessor(*c->ds, false)}).first;
        }
        const size_t bytes = c->work->sample_bytes();
        constexpr uint32_t kPrefetchAhead = 4;  // the samples are shuffled: their index entries lie anywhere
        it->second.proc->PrepareChunk(c->samples + p.from, p.to - p.from, nullptr);  // as the loader's threads
        for (uint32_t i = p.from; i < p.to && !c->cancelled.load(); ++i) {
          if (i + kPrefetchAhead < p.to) c->ds->PrefetchEntry(c->samples[i + kPrefetchAhead]);
          kernels::SampleParams sp;
          SampleForm form = SampleForm::kRgb;
          try {
            it->second.proc->Process(c->samples[i], c->seed, c->epoch, c->images + bytes * i, nullptr, &sp, nullptr,
                                     c->forms ? &form : nullptr);
          } catch (const std::exception& e) {
            if (error.empty()) error = e.what();
          }
          PutParams(sp, c->params + kParamBytes * i);
          if (c->forms) c->forms[i] = uint8_t(form);
        }
      }
      std::lock_guard<std::mutex> l(c->mu);
      if (!error.empty() && c->error.empty()) c->error = error;
      if (--c->pending == 0) c->cv.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Piece> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// The reply's image memory, recycled, in huge pages as the loader's batches (reader/huge_pages.h):
// each reply writes megabytes afresh. A buffer comes back when gRPC has sent its slice (that can be
// after the call returned, so each holds the pool alive); at most kIdleBytes wait for reuse. Mapped,
// not from the heap, so that an idle worker can give them back (DropIdle).
class ReplyBuffers : public std::enable_shared_from_this<ReplyBuffers> {
 public:
  grpc::Slice Get(size_t bytes) {
    if (bytes < kHugePageBytes) return grpc::Slice(bytes);  // no whole huge page for a small reply
    Buf* b = nullptr;
    {
      std::lock_guard<std::mutex> l(mu_);
      for (size_t i = 0; i < idle_.size(); ++i)
        if (idle_[i]->cap >= bytes) {
          b = idle_[i];
          idle_bytes_ -= b->cap;
          idle_.erase(idle_.begin() + long(i));
          break;
        }
    }
    if (!b) {
      auto fresh = std::make_unique<Buf>();
      fresh->p = MapHugePages(bytes, &fresh->cap);
      if (!fresh->p) throw std::bad_alloc();
      b = fresh.release();
    }
    b->owner = shared_from_this();
    return grpc::Slice(b->p, bytes, &ReplyBuffers::Return, b);
  }
  ~ReplyBuffers() { DropIdle(); }
  // Frees the buffers waiting for reuse (an idle worker gives its memory back).
  void DropIdle() {
    std::lock_guard<std::mutex> l(mu_);
    for (Buf* b : idle_) UnmapHugePages(b->p, b->cap), delete b;
    idle_.clear();
    idle_bytes_ = 0;
  }

 private:
  static constexpr size_t kIdleBytes = size_t(64) << 20;
  struct Buf {
    std::shared_ptr<ReplyBuffers> owner;
    void* p = nullptr;
    size_t cap = 0;
  };
  static void Return(void* user) {
    Buf* b = static_cast<Buf*>(user);
    std::shared_ptr<ReplyBuffers> owner = std::move(b->owner);
    std::lock_guard<std::mutex> l(owner->mu_);
    if (owner->idle_bytes_ + b->cap > kIdleBytes) {
      UnmapHugePages(b->p, b->cap);
      delete b;
      return;
    }
    owner->idle_bytes_ += b->cap;
    owner->idle_.push_back(b);
  }
  std::mutex mu_;
  std::vector<Buf*> idle_;
  size_t idle_bytes_ = 0;
};

// Protobuf's wire format, for the replies built by hand.
void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) out->push_back(char(uint8_t(v) | 0x80)), v >>= 7;
  out->push_back(char(v));
}
void PutVarintField(uint32_t field, uint64_t v, std::string* out) {
  PutVarint(uint64_t(field) << 3, out);
  PutVarint(v, out);
}
void PutBytesField(uint32_t field, const void* p, size_t n, std::string* out) {
  PutVarint((uint64_t(field) << 3) | 2, out);
  PutVarint(n, out);
  out->append(static_cast<const char*>(p), n);
}

class WorkerService final : public Worker::Service {
 public:
  explicit WorkerService(const ServeOptions& o)
      : o_(o), pool_(o.threads > 0 ? o.threads : kernels::UsableCores()) {
    for (const auto& f : o.files) {
      files_.emplace_back();
      files_.back().path = f;
      files_.back().plain = std::make_unique<Dataset>(f);
    }
    // Process takes and gives raw bytes (a sync handler, as the others): the reply's images are
    // decoded straight into the slice gRPC sends, with no protobuf copy and no zero-filling first.
    MarkMethodStreamed(1, new grpc::internal::StreamedUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
                              [this](grpc::ServerContext* ctx, grpc::ServerUnaryStreamer<grpc::ByteBuffer, grpc::ByteBuffer>* s) {
                                return RawProcess(ctx, s);
                              }));
    janitor_ = std::thread([this] { GiveBackWhenIdle(); });
  }
  ~WorkerService() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    idle_cv_.notify_all();
    janitor_.join();
  }

  // The generated protobuf handler is replaced by RawProcess (the constructor).
  grpc::Status Process(grpc::ServerContext*, const ProcessRequest*, ProcessReply*) override {
    return grpc::Status(grpc::StatusCode::INTERNAL, "internal: the protobuf Process handler is not in use");
  }

  grpc::Status RawProcess(grpc::ServerContext* ctx, grpc::ServerUnaryStreamer<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
    grpc::ByteBuffer in;
    if (!stream->Read(&in)) return grpc::Status(grpc::StatusCode::INTERNAL, "no request");
    ProcessRequest req;
    if (!grpc::SerializationTraits<ProcessRequest>::Deserialize(&in, &req).ok())
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed request");
    if (auto s = Authenticate(ctx); !s.ok()) return s;
    return DoProcess(&req, ctx->peer(), false, [ctx] { return ctx->IsCancelled(); }, [stream](const grpc::Slice* parts, size_t n) {
      const grpc::ByteBuffer rep(parts, n);
      return stream->Write(rep) ? grpc::Status::OK : grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    });
  }

  // The data path's port and ticket (remote/data.h), given to authenticated clients in Hello. Set
  // before the server starts.
  void SetDataPath(uint16_t port, const std::string& ticket) {
    data_port_ = port;
    ticket_ = ticket;
  }

  // One data connection's requests, one at a time, until the client closes it or the worker stops
  // (then an idle connection ends at once, and one in a call ends after sending its reply).
  void ServeData(int fd, const std::string& peer, const std::atomic<bool>& stopping, const std::function<bool()>& give_up) {
    constexpr auto kReadTime = std::chrono::seconds(10);  // for the ticket, and for a request once begun
    std::string got(kTicketBytes, '\0');
    if (!RecvAll(fd, got.data(), got.size(), Clock::now() + kReadTime, give_up).empty() || !SameToken(got, ticket_)) return;
    auto frame = [&](uint32_t code, uint64_t n, uint8_t* head) {
      le::put32(head, code);
      le::put64(head + 4, n);
    };
    auto send_error = [&](const grpc::Status& st) {
      std::string m = st.error_message().substr(0, kMaxErrorBytes);
      uint8_t head[kReplyHeadBytes];
      frame(uint32_t(st.error_code()), m.size(), head);
      iovec parts[2] = {{head, sizeof head}, {m.data(), m.size()}};
      return SendAll(fd, parts, 2, Clock::now() + std::chrono::seconds(30), give_up).empty();
    };
    std::string bytes;
    for (;;) {
      uint8_t len[4];
      // Idle between requests for as long as the client keeps the connection.
      if (!RecvAll(fd, len, 4, Clock::time_point::max(), [&] { return stopping.load(); }).empty()) return;
      const uint32_t n = le::get32(len);
      if (n == 0 || n > kMaxRequestBytes) {
        send_error(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a request of " + std::to_string(n) + " bytes"));
        return;
      }
      bytes.resize(n);
      if (!RecvAll(fd, bytes.data(), n, Clock::now() + kReadTime, give_up).empty()) return;
      ProcessRequest req;
      if (!req.ParseFromString(bytes)) {
        send_error(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed request"));
        return;
      }
      bool sent = false, sent_ok = false;
      const grpc::Status st = DoProcess(&req, peer, true, [fd] { return PeerGone(fd); }, [&](const grpc::Slice* parts, size_t k) {
        sent = true;
        uint8_t head[kReplyHeadBytes];
        uint64_t total = 0;
        iovec io[4];
        for (size_t i = 0; i < k; ++i) io[i + 1] = {const_cast<uint8_t*>(parts[i].begin()), parts[i].size()}, total += parts[i].size();
        frame(0, total, head);
        io[0] = {head, sizeof head};
        sent_ok = SendAll(fd, io, k + 1, Clock::now() + std::chrono::seconds(30), give_up).empty();
        return sent_ok ? grpc::Status::OK : grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
      });
      if (sent ? !sent_ok : !send_error(st)) return;
    }
  }

  grpc::Status Hello(grpc::ServerContext* ctx, const HelloRequest* req, HelloReply* rep) override {
    if (auto s = Authenticate(ctx); !s.ok()) return s;
    rep->set_protocol(kProtocol);
    rep->set_dsc_version(o_.report_version.empty() ? DscVersion() : o_.report_version);
    rep->set_jpeg_version(JpegVersion());
    rep->set_threads(uint32_t(pool_.size()));
    rep->set_max_samples(kMaxRequestSamples);
    if (data_port_) rep->set_data_port(o_.report_data_port ? o_.report_data_port : data_port_), rep->set_data_ticket(ticket_);
    if (req->protocol() != kProtocol || req->dsc_version() != DscVersion() || req->jpeg_version() != JpegVersion())
      return rep->set_file_id(0), grpc::Status::OK;  // the client compares versions and explains
    for (size_t i = 0; i < files_.size(); ++i) {
      const auto& h = files_[i].plain->view().header();
      if (h.file_size == req->file_size() && h.header_checksum == req->header_checksum()) {
        uint32_t w, hgt;
        try {
          // The scratch limit too: options every Process call would refuse are refused here, where the
          // client makes it an error, not a worker that fails each batch and is reconnected forever.
          const LoaderOptions o = FromSpec(req->spec(), &w, &hgt);
          CheckScratch(o, w, hgt);
        } catch (const std::exception& e) {
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string("options refused: ") + e.what());
        }
        rep->set_file_id(uint32_t(i));
        return grpc::Status::OK;
      }
    }
    // Status messages travel as metadata (8 KiB by default, else the client sees only that limit):
    // a few served paths, and the client's path cut short.
    std::string served;
    for (size_t i = 0; i < o_.files.size() && i < 4; ++i) served += (i ? ", " : "") + Clip(o_.files[i]);
    if (o_.files.size() > 4) served += " and " + std::to_string(o_.files.size() - 4) + " more";
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "serves no file with the identity of " + Clip(req->path()) + " (size " + std::to_string(req->file_size()) +
                            ", header checksum " + std::to_string(req->header_checksum()) + "); it serves " + served);
  }

  grpc::Status Status(grpc::ServerContext* ctx, const StatusRequest*, StatusReply* rep) override {
    if (auto s = Authenticate(ctx); !s.ok()) return s;
    std::lock_guard<std::mutex> l(mu_);
    rep->set_in_flight(in_flight_);
    rep->set_reserved_bytes(reserved_);
    rep->set_requests(requests_);
    rep->set_cancelled(cancelled_);
    rep->set_data_requests(data_requests_);
    return grpc::Status::OK;
  }

  // A ProcessReply in protobuf's wire format, fields in number order: a small head (compressed,
  // images_size, sample_error, params, forms, the images field's key and length), then the images slice.
  // Written while its memory is still counted (Admit / Leave). The caller has authenticated the client;
  // `cancelled` says whether it went away, `send` sends the reply's parts (at most 3); `data_path`: the
  // request came on the data path (counted apart).
  grpc::Status DoProcess(const ProcessRequest* req, const std::string& peer, bool data_path, const std::function<bool()>& cancelled,
                         const std::function<grpc::Status(const grpc::Slice*, size_t)>& send) {
    const uint64_t n = calls_.fetch_add(1) + 1;
    if (o_.die_after && n > o_.die_after) ::raise(SIGKILL);  // test hook: as kill -9
    if (o_.fail_after && n > o_.fail_after) return grpc::Status(grpc::StatusCode::INTERNAL, "failing on purpose (--fail-after)");
    if (req->file_id() >= files_.size())
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unknown file id " + std::to_string(req->file_id()));
    FileEntry& f = files_[req->file_id()];
    if (req->header_checksum() != f.plain->view().header().header_checksum)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "file id " + std::to_string(req->file_id()) + " is another file");
    const uint32_t count = uint32_t(req->samples_size());
    if (req->samples_size() > int(kMaxRequestSamples))
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::to_string(req->samples_size()) + " samples in one request; at most " +
                                                                  std::to_string(kMaxRequestSamples));
    for (uint32_t i = 0; i < count; ++i)
      if (req->samples(int(i)) >= f.plain->size())
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "sample " + std::to_string(req->samples(int(i))) + " is past the file's " +
                                                                    std::to_string(f.plain->size()));
    std::shared_ptr<const SampleWork> work;
    std::string key;
    try {
      work = Work(req->file_id(), req->spec(), &key);
    } catch (const std::exception& e) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string("options refused: ") + e.what());
    }
    const uint64_t image_bytes = uint64_t(work->sample_bytes()) * count;
    const uint64_t reserve = image_bytes * (req->compress() ? 2 : 1) + uint64_t(kParamBytes) * count;
    if (auto s = Admit(peer, reserve); !s.ok()) return s;
    struct Release {
      WorkerService* s;
      std::string peer;
      uint64_t bytes;
      ~Release() { s->Leave(peer, bytes); }
    } release{this, peer, reserve};
    if (o_.stall_after && n > o_.stall_after) {  // test hook: until the client gives up, or stall_ms
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(o_.stall_ms ? o_.stall_ms : 3600000);
      while (!cancelled() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (cancelled()) {
        std::lock_guard<std::mutex> l(mu_);
        ++cancelled_;
        return grpc::Status::CANCELLED;
      }
    }

    Call c;
    try {
      c.ds = req->spec().verify() ? f.Verified() : f.plain.get();
    } catch (const std::exception& e) {
      return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
    }
    c.work = work;
    c.key = key;
    c.seed = req->seed();
    c.epoch = req->epoch();
    c.samples = req->samples().data();
    std::vector<uint8_t> raw;  // compressed replies: the images before zstd
    grpc::Slice images;
    if (req->compress()) {
      raw.resize(image_bytes);
      c.images = raw.data();
    } else {
      try {
        images = buffers_->Get(size_t(image_bytes));  // uninitialised; ours alone until sent
      } catch (const std::bad_alloc&) {  // the client retries elsewhere; this worker keeps serving
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "cannot allocate " + std::to_string(image_bytes) + " bytes for a reply");
      }
      c.images = const_cast<uint8_t*>(images.begin());
    }
    std::vector<uint8_t> params(size_t(kParamBytes) * count), forms;
    c.params = params.data();
    // Planes only where the request's processors write finished uint8 NHWC (what a client that finishes
    // float batches asks for).
    if (req->spec().planes() && work->writes_forms()) {
      forms.resize(count);
      c.forms = forms.data();
    }
    pool_.Run(&c, count, cancelled);
    if (c.cancelled.load()) {
      std::lock_guard<std::mutex> l(mu_);
      ++cancelled_;
      return grpc::Status::CANCELLED;
    }
    std::string head;
    if (!c.error.empty()) {
      PutBytesField(3, c.error.data(), c.error.size(), &head);
      const grpc::Slice one(head);
      return send(&one, 1);
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
      if (req->compress()) raw.resize(size_t(at));
      else images = images.sub(0, size_t(at));
    }
    if (req->compress()) {
      grpc::Slice z(ZSTD_compressBound(raw.size()));
      const size_t n = ZSTD_compress(const_cast<uint8_t*>(z.begin()), z.size(), raw.data(), raw.size(), 1);
      if (ZSTD_isError(n)) return grpc::Status(grpc::StatusCode::INTERNAL, ZSTD_getErrorName(n));
      images = z.sub(0, n);
      PutVarintField(1, 1, &head);
    }
    PutVarintField(2, sent_bytes, &head);
    PutBytesField(4, params.data(), params.size(), &head);
    if (c.forms) PutBytesField(5, forms.data(), forms.size(), &head);
    PutVarint((6 << 3) | 2, &head);
    PutVarint(images.size(), &head);
    const grpc::Slice parts[2] = {grpc::Slice(head), images};
    const grpc::Status st = send(parts, 2);
    std::lock_guard<std::mutex> l(mu_);
    if (st.ok()) ++requests_, data_requests_ += data_path;
    return st;
  }

 private:
  struct FileEntry {
    std::string path;
    std::unique_ptr<Dataset> plain;
    // The client's LoaderOptions::verify picks the verifying view; opened on first use, since most runs
    // never ask for it and each view maps the file again.
    std::unique_ptr<Dataset> verified;
    std::once_flag verified_once;
    Dataset* Verified() {
      std::call_once(verified_once, [this] { verified = std::make_unique<Dataset>(path, DatasetOptions{true, false}); });
      return verified.get();
    }
  };

  grpc::Status Authenticate(grpc::ServerContext* ctx) const {
    if (o_.token.empty()) return grpc::Status::OK;
    const auto& md = ctx->client_metadata();
    const auto it = md.find(kTokenKey);
    const std::string got = it == md.end() ? std::string() : std::string(it->second.data(), it->second.size());
    if (it == md.end() || !SameToken(got, o_.token))
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, it == md.end() ? "this worker needs a token (--token-file)" : "wrong token");
    return grpc::Status::OK;
  }

  // The SampleWork of a (file, spec), shared by calls that send the same spec.
  std::shared_ptr<const SampleWork> Work(uint32_t file, const WorkSpec& spec, std::string* key) {
    *key = std::to_string(file) + ":" + SpecKey(spec);
    std::lock_guard<std::mutex> l(mu_);
    auto it = works_.find(*key);
    if (it != works_.end()) return it->second;
    uint32_t w, h;
    const LoaderOptions o = FromSpec(spec, &w, &h);
    CheckScratch(o, w, h);
    if (works_.size() >= 16) works_.clear();  // calls in progress keep theirs alive
    auto work = std::make_shared<const SampleWork>(o, w, h);
    works_.emplace(*key, work);
    return work;
  }

  // Each pool thread keeps the processors of its last few specs, with scratch the size of their
  // output (an output sample and a resized image): bounded by --max-memory-mb like the replies, so
  // that specs naming huge outputs cannot make the worker hold gigabytes between calls.
  void CheckScratch(const LoaderOptions& o, uint32_t w, uint32_t h) const {
    const uint64_t scratch = uint64_t(w) * h * 3 * (DTypeSize(o.dtype) + 1);
    const uint64_t most = scratch * kProcessorsPerThread * pool_.size();
    if (most > o_.max_memory)
      throw Error("a " + std::to_string(w) + "x" + std::to_string(h) + " output needs up to " + std::to_string(most >> 20) +
                  " MiB of scratch on this worker's " + std::to_string(pool_.size()) + " threads, over its --max-memory-mb " +
                  std::to_string(o_.max_memory >> 20));
  }

  static std::string Clip(const std::string& s) { return s.size() <= 256 ? s : s.substr(0, 256) + "..."; }

  grpc::Status Admit(const std::string& peer, uint64_t bytes) {
    std::lock_guard<std::mutex> l(mu_);
    if (in_flight_ >= o_.max_calls)
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "busy: " + std::to_string(o_.max_calls) + " calls in flight (--max-calls)");
    if (per_peer_[peer] >= o_.max_in_flight)
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "more than " + std::to_string(o_.max_in_flight) + " calls in flight from " + peer);
    if (reserved_ + bytes > o_.max_memory)
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "a reply of " + std::to_string(bytes) + " bytes is over the worker's memory limit (" +
                                                                    std::to_string(o_.max_memory - reserved_) + " bytes free)");
    ++per_peer_[peer];
    ++in_flight_;
    reserved_ += bytes;
    return grpc::Status::OK;
  }

  void Leave(const std::string& peer, uint64_t bytes) {
    std::lock_guard<std::mutex> l(mu_);
    if (--per_peer_[peer] == 0) per_peer_.erase(peer);
    --in_flight_;
    reserved_ -= bytes;
    used_ = true;
    last_leave_ = std::chrono::steady_clock::now();
  }

  // The heap keeps freed reply memory for the next calls (Serve's malloc settings): once no call has
  // run for kIdleGiveBack, give it and the idle reply buffers back, so that a worker between clients
  // holds its base memory, not its busiest moment's.
  void GiveBackWhenIdle() {
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

  const ServeOptions o_;
  Pool pool_;
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

// The data path's listening socket and connections (remote/data.h): a thread accepts, and each
// connection has a thread of its own, at most `max_connections` of them (more are closed at once).
class DataPort {
 public:
  using Handler = std::function<void(int fd, const std::string& peer, const std::atomic<bool>& stopping,
                                     const std::function<bool()>& give_up)>;
  DataPort(int listen_fd, size_t max_connections, Handler serve)
      : fd_(listen_fd), max_(max_connections), serve_(std::move(serve)) {
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~DataPort() {
    BeginStop();
    acceptor_.join();
    for (auto& c : conns_) c.thread.join();
    ::close(fd_);
  }
  // Idle connections end now; a call in progress sends its reply, unless that takes over 10 s.
  void BeginStop() {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_.load()) return;
    stop_at_ = Clock::now();
    stopping_.store(true);
    ::shutdown(fd_, SHUT_RDWR);  // new connections are refused now, not left waiting
  }

 private:
  struct Conn {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  void Accept() {
    const std::function<bool()> give_up = [this] {
      std::lock_guard<std::mutex> l(mu_);
      return stopping_.load() && Clock::now() - stop_at_ > std::chrono::seconds(10);
    };
    while (!stopping_.load()) {
      for (auto it = conns_.begin(); it != conns_.end();) {
        if (it->done->load()) it->thread.join(), it = conns_.erase(it);
        else ++it;
      }
      sockaddr_storage from{};
      socklen_t len = sizeof from;
      const int c = ::accept4(fd_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (c < 0) {
        pollfd p{fd_, POLLIN, 0};
        ::poll(&p, 1, 100);
        continue;
      }
      if (conns_.size() >= max_) {
        ::close(c);
        continue;
      }
      char host[64] = "?";
      uint16_t port = 0;
      if (from.ss_family == AF_INET) {
        const auto* a = reinterpret_cast<const sockaddr_in*>(&from);
        ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host), port = ntohs(a->sin_port);
      } else if (from.ss_family == AF_INET6) {
        const auto* a = reinterpret_cast<const sockaddr_in6*>(&from);
        ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host), port = ntohs(a->sin6_port);
      }
      const std::string peer = std::string("data:") + host + ":" + std::to_string(port);
      auto done = std::make_shared<std::atomic<bool>>(false);
      try {
        conns_.push_back({std::thread([this, c, peer, done, give_up] {
                            serve_(c, peer, stopping_, give_up);
                            ::close(c);
                            done->store(true);
                          }),
                          done});
      } catch (const std::system_error&) {  // no thread: the client retries elsewhere
        ::close(c);
      }
    }
  }

  const int fd_;
  const size_t max_;
  const Handler serve_;
  std::mutex mu_;
  std::atomic<bool> stopping_{false};
  Clock::time_point stop_at_;
  std::vector<Conn> conns_;  // the acceptor's alone until it is joined
  std::thread acceptor_;
};

std::string HostOf(const std::string& listen) {
  if (!listen.empty() && listen[0] == '[') return listen.substr(0, listen.find(']') + 1);
  return listen.substr(0, listen.rfind(':'));
}

}  // namespace

std::string ValidateServeOptions(const ServeOptions& o, std::string* warning) {
  if (o.files.empty()) return "name at least one dsc file to serve";
  if (o.listen.find(':') == std::string::npos) return "--listen needs ADDR:PORT, not '" + o.listen + "'";
  if (o.tls_cert.empty() != o.tls_key.empty()) return "--tls-cert and --tls-key go together";
  if (o.threads < 0 || o.threads > 1024) return "--threads must be 0 (all cores) to 1024";
  if (o.max_calls < 1 || o.max_calls > 4096) return "--max-calls must be 1 to 4096";
  if (o.data_port > 65535) return "--data-port must be 0 (any free port) to 65535";
  if (o.data_port && (!o.data_path || !o.tls_cert.empty()))
    return "--data-port is for a plaintext worker's data path (not with --grpc-only or TLS)";
  if (!IsPort(o.listen.substr(o.listen.rfind(':') + 1), /*allow_zero=*/true))
    return "--listen " + o.listen + ": the port must be 0 (any free port) to 65535";
  if (!IsLoopback(o.listen)) {
    if (o.token.empty())
      return "listening on " + o.listen + " (not loopback) needs --token-file: anyone who can reach the port could use this worker";
    if (o.tls_cert.empty() && !o.insecure_plaintext)
      return "listening on " + o.listen + " (not loopback) needs TLS (--tls-cert, --tls-key), or --insecure-plaintext";
    if (o.tls_cert.empty())
      *warning = "no TLS: the token and the images cross the network in clear (--insecure-plaintext)";
  }
  return "";
}

int Serve(const ServeOptions& o) {
  // Replies are megabytes, allocated and freed per call: keep that memory in the heap instead of
  // mapping fresh pages for each (their page faults cost a worker more than the copies; docs/remote.md).
  // max_memory bounds what it holds.
  mallopt(M_MMAP_THRESHOLD, 512 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // SIGTERM/SIGINT go to one thread that shuts the server down; block them before gRPC starts threads.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  // A reference to the gRPC library that is never given back, so that the server's destructors are
  // not its last user. The library's final shutdown joins its executor threads, and one of them may
  // be in a TCP "backup poller" (started when a large reply filled the socket buffer), which sleeps
  // in 10 s polls that nothing wakes (gRPC 1.51, tcp_posix.cc). A worker that had sent photo batches
  // took 10 s to exit after SIGTERM in about a third of the runs, with nothing left to drain.
  grpc_init();  // after the mask: the library starts threads

  WorkerService service(o);
  grpc::ServerBuilder b;
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (o.tls_cert.empty()) {
    creds = grpc::InsecureServerCredentials();
  } else {
    grpc::SslServerCredentialsOptions so;
    so.pem_key_cert_pairs.push_back({o.tls_key, o.tls_cert});
    creds = grpc::SslServerCredentials(so);
  }
  int port = 0;
  // gRPC sets SO_REUSEPORT: a second worker on a port in use started and took a random share of the
  // connections (a stale worker, or one serving another file, answered some clients and not others).
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  b.AddListeningPort(o.listen, creds, &port);
  b.RegisterService(&service);
  b.SetMaxReceiveMessageSize(1 << 20);  // requests are small: samples and options
  b.SetMaxSendMessageSize(-1);          // replies are bounded by max_memory instead
  // A call holds its gRPC thread while the decode pool works, and gRPC's sync server lets at most
  // MAX_POLLERS (default 2) idle threads live: with a client's calls in flight it made and ended a
  // thread every few requests. Keep enough for one client's calls to come and go without that.
  b.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, int(std::min<uint32_t>(o.max_in_flight, 64)) + 2);
  // Every call holds a thread: bound them, or many connections make thousands (each admitted call also
  // counts against --max-calls; past this, gRPC answers RESOURCE_EXHAUSTED and the client backs off).
  grpc::ResourceQuota quota("dsc-serve");
  quota.SetMaxThreads(int(o.max_calls) + int(std::min<uint32_t>(o.max_in_flight, 64)) + 16);
  b.SetResourceQuota(quota);
  // The data path, for plaintext workers only: its requests and replies would cross the network in
  // clear beside a TLS channel.
  std::unique_ptr<DataPort> data;
  if (o.data_path && o.tls_cert.empty()) {
    std::string host = HostOf(o.listen), error;
    if (!host.empty() && host[0] == '[') host = host.substr(1, host.size() - 2);
    uint16_t data_port = uint16_t(o.data_port);
    const int fd = ListenTcp(host, &data_port, &error);
    if (fd < 0) throw Error("cannot listen on " + o.listen + ": " + error);
    std::string ticket(kTicketBytes, '\0');
    std::random_device rd;
    for (char& ch : ticket) ch = char(rd());
    service.SetDataPath(data_port, ticket);
    data = std::make_unique<DataPort>(fd, size_t(o.max_calls) + std::min<uint32_t>(o.max_in_flight, 64),
                                      [&service](int c, const std::string& peer, const std::atomic<bool>& stopping,
                                                 const std::function<bool()>& give_up) { service.ServeData(c, peer, stopping, give_up); });
  }
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (!server || port == 0) throw Error("cannot listen on " + o.listen + " (address in use or not local?)");
  std::printf("listening on %s:%d\n", HostOf(o.listen).c_str(), port);
  std::fflush(stdout);

  std::thread waiter([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    std::fprintf(stderr, "dsc serve: signal %d: finishing calls in progress\n", sig);
    if (data) data->BeginStop();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
  });
  server->Wait();
  waiter.join();
  data.reset();  // lets data calls in progress send their replies
  return 0;
}

}  // namespace dsc::remote
