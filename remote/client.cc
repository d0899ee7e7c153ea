#include "remote/client.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <zstd.h>

#include <malloc.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "format/bytes.h"
#include "format/error.h"
#include "reader/option_table.h"
#include "remote/codec.h"
#include "remote/data.h"
#include "remote/wire.h"
#include "remote/worker.grpc.pb.h"

namespace dsc::remote {

namespace {

[[noreturn]] void Bad(const std::string& address, const std::string& why) {
  throw OptionError("invalid loader option remote = " + address + ": " + why);
}

// A remote worker's address: HOST:PORT, [IPV6]:PORT, or a gRPC target with a scheme (dns:, unix:,
// ipv4:, ipv6:), passed on as is. Checked here because gRPC takes a port past 65535 modulo 2^16 and
// ignores text after it.
void CheckAddress(const std::string& a) {
  if (a.empty()) Bad("''", "an empty address: each worker is HOST:PORT");
  for (const char* scheme : {"dns:", "unix:", "unix-abstract:", "ipv4:", "ipv6:"})
    if (a.rfind(scheme, 0) == 0) return;
  size_t colon;
  if (a[0] == '[') {
    const size_t close = a.find(']');
    if (close == std::string::npos || close + 1 >= a.size() || a[close + 1] != ':')
      Bad(a, "an IPv6 worker is [ADDRESS]:PORT");
    colon = close + 1;
  } else {
    colon = a.rfind(':');
    if (colon == std::string::npos) Bad(a, "needs HOST:PORT");
    if (a.find(':') != colon) Bad(a, "an IPv6 worker goes in brackets: [ADDRESS]:PORT");
    if (colon == 0) Bad(a, "needs a host before the port");
  }
  if (!IsPort(a.substr(colon + 1), /*allow_zero=*/false)) Bad(a, "the port must be 1 to 65535");
}

constexpr const char* kProcessMethod = "/dsc.remote.Worker/Process";

grpc::ChannelArguments ChannelArgs(int max_receive) {
  grpc::ChannelArguments a;
  // A photo batch is far above gRPC's 4 MiB default; the most a request of this loader needs instead,
  // so that a broken or hostile worker cannot make the loader receive (allocate) more.
  a.SetMaxReceiveMessageSize(max_receive);
  a.SetMaxSendMessageSize(16 << 20);
  // A channel of its own per connection, reconnecting fast: the loader does its own back-off.
  a.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  a.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  a.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  a.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Read buffers below malloc's mmap threshold: gRPC's default grows them to megabytes, which malloc
  // maps fresh for every read, and the page faults cost more CPU than the copy itself.
  a.SetInt(GRPC_ARG_TCP_READ_CHUNK_SIZE, 64 << 10);
  a.SetInt(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, 64 << 10);
  return a;
}

class GrpcExecutor : public RemoteExecutor {
 public:
  GrpcExecutor(const std::string& address, const RemoteOptions& o, const RemoteContext& c)
      : address_(address), token_(o.token), tls_root_(o.tls_root), compress_(o.compression), data_path_(o.transport.data_path), ctx_(c) {
    ToSpec(c.options, c.width, c.height, &spec_);
    spec_.set_planes(c.planes);
  }
  ~GrpcExecutor() override {
    for (int fd : idle_) ::close(fd);
  }

  const std::string& address() const override { return address_; }

  ConnectResult Connect(int timeout_ms, std::string* why) override {
    std::shared_ptr<grpc::ChannelCredentials> creds =
        tls_root_.empty() ? grpc::InsecureChannelCredentials()
                          : grpc::SslCredentials(grpc::SslCredentialsOptions{tls_root_, "", ""});
    const int limit = ReplyLimit(ctx_.max_request_samples, ctx_.width, ctx_.height);
    auto channel = grpc::CreateCustomChannel(address_, creds, ChannelArgs(limit));
    auto stub = Worker::NewStub(channel);
    HelloRequest req;
    req.set_protocol(kProtocol);
    req.set_dsc_version(DscVersion());
    req.set_jpeg_version(JpegVersion());
    req.set_file_size(ctx_.file_size);
    req.set_header_checksum(ctx_.header_checksum);
    req.set_path(ctx_.path);
    *req.mutable_spec() = spec_;
    req.set_run_fingerprint(ctx_.run_fingerprint);
    grpc::ClientContext cc;
    cc.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
    if (!token_.empty()) cc.AddMetadata(kTokenKey, token_);
    HelloReply rep;
    const grpc::Status st = stub->Hello(&cc, req, &rep);
    const std::string who = "remote worker " + address_;
    if (!st.ok()) {
      const auto code = st.error_code();
      *why = who + ": " + st.error_message();
      if (code == grpc::StatusCode::UNAUTHENTICATED || code == grpc::StatusCode::FAILED_PRECONDITION ||
          code == grpc::StatusCode::PERMISSION_DENIED || code == grpc::StatusCode::INVALID_ARGUMENT) {
        return ConnectResult::kRefused;
      }
      *why = who + " is unreachable (" + st.error_message() + ")";
      // A TLS worker closes a plaintext connection without a word: say what that usually means.
      if (tls_root_.empty() && st.error_message().find("Socket closed") != std::string::npos)
        *why += "; if it serves TLS, give the CA of its certificate (--tls-root, RemoteOptions::tls_root)";
      return ConnectResult::kUnreachable;
    }
    if (rep.protocol() != kProtocol || rep.dsc_version() != DscVersion() || rep.jpeg_version() != JpegVersion()) {
      *why = who + " runs protocol " + std::to_string(rep.protocol()) + ", dsc " + rep.dsc_version() + ", libjpeg-turbo " +
             std::to_string(rep.jpeg_version()) + "; this loader protocol " + std::to_string(kProtocol) + ", dsc " +
             DscVersion() + ", libjpeg-turbo " + std::to_string(JpegVersion()) + ": its bytes could differ";
      return ConnectResult::kRefused;
    }
    std::lock_guard<std::mutex> l(mu_);
    stub_ = std::make_shared<grpc::GenericStub>(channel);
    creds_ = creds;
    limit_ = limit;
    file_id_ = rep.file_id();
    max_samples_ = std::max<uint32_t>(1, rep.max_samples());
    // The data path: a plaintext worker that offers it, at HOST:PORT. Connections to the worker as it
    // was before this handshake are not used again.
    ++generation_;
    for (int fd : idle_) ::close(fd);
    idle_.clear();
    data_port_ = 0;
    if (data_path_ && tls_root_.empty() && rep.data_port() > 0 && rep.data_port() < 65536 &&
        rep.data_ticket().size() == kTicketBytes && !HostOfAddress(address_).empty()) {
      data_port_ = uint16_t(rep.data_port());
      ticket_ = rep.data_ticket();
    }
    return ConnectResult::kReady;
  }

  RunResult Run(const ChunkTask& t, int deadline_ms, std::string* why) override {
    std::shared_ptr<grpc::GenericStub> stub;
    ProcessRequest req;
    uint16_t data_port;
    uint64_t generation;
    int limit;
    {
      std::lock_guard<std::mutex> l(mu_);
      stub = stub_;
      data_port = data_port_;
      generation = generation_;
      req.set_file_id(file_id_);
      if (!stub || t.count > max_samples_) {
        *why = "remote worker " + address_ + (stub ? " takes fewer samples per request" : " is not connected");
        return RunResult::kRetry;
      }
      // Loader::set_output_size grew the samples past what the channel accepts: a channel for the
      // new size (the worker knows the file by its id, not by the connection).
      const int need = ReplyLimit(std::max(t.count, ctx_.max_request_samples), t.width, t.height);
      if (need > limit_) {
        stub_ = std::make_shared<grpc::GenericStub>(grpc::CreateCustomChannel(address_, creds_, ChannelArgs(need)));
        limit_ = need;
        stub = stub_;
      }
      limit = limit_;
    }
    req.set_header_checksum(ctx_.header_checksum);
    *req.mutable_spec() = spec_;
    if (t.width != spec_.width() || t.height != spec_.height()) {  // Loader::set_output_size
      WorkSpec& s = *req.mutable_spec();
      s.set_width(t.width);
      s.set_height(t.height);  // a crop's output size (FromSpec)
    }
    req.set_seed(t.seed);
    req.set_epoch(t.epoch);
    req.mutable_samples()->Add(t.samples, t.samples + t.count);
    req.set_compress(compress_);
    if (data_port) return RunData(req, t, deadline_ms, data_port, generation, limit, why);
    grpc::ByteBuffer send, reply;
    bool own = false;
    if (!grpc::SerializationTraits<ProcessRequest>::Serialize(req, &send, &own).ok()) {
      *why = "cannot serialise a request";
      return RunResult::kRetry;
    }
    grpc::ClientContext cc;
    cc.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
    if (!token_.empty()) cc.AddMetadata(kTokenKey, token_);
    // A completion queue of this call's own, waited on here: this thread polls the socket and reads the
    // reply itself, rather than gRPC's own threads taking the trainer's cores and handing it over.
    grpc::CompletionQueue cq;
    grpc::Status status;
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> call = stub->PrepareUnaryCall(&cc, kProcessMethod, send, &cq);
    call->StartCall();
    call->Finish(&reply, &status, &cq);
    {
      // TryCancel only works on a started call. The loader sets t.cancel before CancelAll, so a call
      // registered after CancelAll ran sees the flag here.
      std::lock_guard<std::mutex> l(mu_);
      active_.insert(&cc);
      if (t.cancel && t.cancel->load()) cc.TryCancel();
    }
    void* tag = nullptr;
    bool ok = false;
    const bool got = cq.Next(&tag, &ok);  // the call always completes: a deadline, a cancel or a status
    {
      std::lock_guard<std::mutex> l(mu_);
      active_.erase(&cc);
    }
    cq.Shutdown();
    for (void* rest; cq.Next(&rest, &ok);) {
    }
    if (!got) status = grpc::Status(grpc::StatusCode::INTERNAL, "the call's completion queue shut down");
    wire_bytes_.fetch_add(send.Length() + reply.Length());
    if (!status.ok()) {
      *why = "remote worker " + address_ + ": " +
             (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
                  ? "no reply within " + std::to_string(deadline_ms) + " ms"
                  : status.error_message());
      // The worker's per-connection call limit or its memory limit: up, only busy. gRPC's own
      // RESOURCE_EXHAUSTED for a reply over the channel's limit is a broken worker instead.
      if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
          status.error_message().find("larger than max") != std::string::npos) {
        *why = "remote worker " + address_ + ": a reply larger than a request of " + std::to_string(t.count) +
               " samples can need (" + status.error_message() + ")";
        return RunResult::kRetry;
      }
      return status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ? RunResult::kBusy : RunResult::kRetry;
    }
    std::vector<grpc::Slice> slices;  // the reply where gRPC received it
    if (!reply.Dump(&slices).ok()) slices.clear();
    std::vector<BytePiece> pieces;
    for (const grpc::Slice& s : slices) pieces.push_back({s.begin(), s.size()});
    return Read(pieces, t, why);
  }

  // Run on the data path (remote/data.h): a connection of this executor's (kept between requests), the
  // request, and the reply read into buffers of this call's, then parsed where it lies.
  RunResult RunData(const ProcessRequest& req, const ChunkTask& t, int deadline_ms, uint16_t port, uint64_t generation, int limit,
                    std::string* why) {
    const std::string who = "remote worker " + address_;
    const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(deadline_ms);
    std::string bytes;
    if (!req.SerializeToString(&bytes) || bytes.empty() || bytes.size() > kMaxRequestBytes) {
      *why = "cannot serialise a request";
      return RunResult::kRetry;
    }
    std::string error, ticket;
    int fd = -1;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!idle_.empty()) fd = idle_.back(), idle_.pop_back();
      if (fd >= 0) active_fds_.insert(fd);
      ticket = ticket_;
    }
    if (fd < 0) {
      fd = ConnectTcp(HostOfAddress(address_), port, deadline, &error);
      if (fd < 0) {
        // E.g. a firewall that lets only the gRPC port through: this worker's requests go on gRPC until
        // its next handshake (a worker that died fails there too, and is reconnected as usual).
        bool warn = false;
        {
          std::lock_guard<std::mutex> l(mu_);
          if (generation == generation_) data_port_ = 0;
          warn = !warned_data_;
          warned_data_ = true;
        }
        if (warn)
          std::fprintf(stderr, "dsc: %s: its data port %u cannot be reached (%s); its requests go on gRPC (--data-path=false skips the data port)\n",
                       who.c_str(), unsigned(port), error.c_str());
        return Run(t, deadline_ms, why);
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        active_fds_.insert(fd);
      }
      iovec part{ticket.data(), ticket.size()};
      error = SendAll(fd, &part, 1, deadline);
    }
    {
      // As for a gRPC call: the loader sets t.cancel before CancelAll, which shuts registered sockets.
      std::lock_guard<std::mutex> l(mu_);
      if (t.cancel && t.cancel->load()) ::shutdown(fd, SHUT_RDWR);
    }
    uint8_t head[kReplyHeadBytes];
    uint64_t n = 0;
    uint32_t code = 0;
    std::vector<BytePiece> pieces;
    std::vector<std::unique_ptr<uint8_t[]>> buffers;  // pieces' memory, freed after parsing
    if (error.empty()) {
      uint8_t len[4];
      le::put32(len, uint32_t(bytes.size()));
      iovec parts[2] = {{len, 4}, {bytes.data(), bytes.size()}};
      error = SendAll(fd, parts, 2, deadline);
    }
    if (error.empty()) error = RecvAll(fd, head, sizeof head, deadline);
    if (error.empty()) {
      code = le::get32(head);
      n = le::get64(head + 4);
      if (code != 0 && n > kMaxErrorBytes) error = "an error message of " + std::to_string(n) + " bytes";
      if (code == 0 && n > uint64_t(limit))
        error = "a reply of " + std::to_string(n) + " bytes, larger than a request of " + std::to_string(t.count) + " samples can need";
    }
    if (error.empty()) error = Receive(fd, n, deadline, &buffers, &pieces);
    {
      std::lock_guard<std::mutex> l(mu_);
      active_fds_.erase(fd);
      // An error frame ends the connection too: the worker closes it after a request it refuses.
      if (!error.empty() || code != 0 || generation != generation_ || (t.cancel && t.cancel->load())) ::close(fd);
      else idle_.push_back(fd);
    }
    wire_bytes_.fetch_add(4 + bytes.size() + (error.empty() ? sizeof head + n : 0));
    if (!error.empty()) {
      *why = who + ": " + (error == "timed out" ? "no reply within " + std::to_string(deadline_ms) + " ms" : "data connection: " + error);
      return RunResult::kRetry;
    }
    if (code != 0) {
      std::string message;
      for (const BytePiece& p : pieces) message.append(reinterpret_cast<const char*>(p.data), p.size);
      *why = who + ": " + message;
      // As on gRPC: the worker's call or memory limit means busy, not down.
      return code == uint32_t(grpc::StatusCode::RESOURCE_EXHAUSTED) ? RunResult::kBusy : RunResult::kRetry;
    }
    return Read(pieces, t, why);
  }

  // n bytes from fd into receive buffers of 64 KiB, as pieces. The buffers are the caller's and go back
  // to malloc once the reply is read, so the next reply lands in memory still in cache (as gRPC's read
  // buffers do); buffers kept per thread between replies make the kernel's copy into them dearer.
  static std::string Receive(int fd, uint64_t n, Clock::time_point deadline, std::vector<std::unique_ptr<uint8_t[]>>* buffers,
                             std::vector<BytePiece>* pieces) {
    constexpr size_t kBuffer = 64 << 10;
    size_t at = kBuffer;
    while (n) {
      if (at == kBuffer) buffers->emplace_back(new uint8_t[kBuffer]), at = 0;
      uint8_t* p = buffers->back().get() + at;
      std::string error;
      const size_t k = RecvSome(fd, p, size_t(std::min<uint64_t>(n, kBuffer - at)), deadline, &error);
      if (!k) return error;
      if (!pieces->empty() && pieces->back().data + pieces->back().size == p) pieces->back().size += k;
      else pieces->push_back({p, k});
      at += k, n -= k;
    }
    return "";
  }

  void CancelAll() override {
    std::lock_guard<std::mutex> l(mu_);
    for (grpc::ClientContext* c : active_) c->TryCancel();
    for (int fd : active_fds_) ::shutdown(fd, SHUT_RDWR);
  }

  uint64_t wire_bytes() const override { return wire_bytes_.load(); }

 private:
  // The output's channels (LoaderOptions::channels, resolved by the loader).
  uint32_t Channels() const { return ctx_.options.channels == 1 ? 1 : 3; }

  // The largest reply a request of `samples` samples of w x h can bring: the images (zstd's bound,
  // when compressed), their parameters, a sample error and the message's framing.
  int ReplyLimit(uint64_t samples, uint32_t w, uint32_t h) const {
    const uint64_t images = samples * Channels() * w * h * DTypeSize(ctx_.options.dtype);
    const uint64_t bound = uint64_t(ZSTD_compressBound(size_t(images))) + samples * kParamBytes + (256u << 10);
    return int(std::min<uint64_t>(bound, uint64_t(INT32_MAX)));
  }

  // Reads a ProcessReply, where it lies in the received pieces, into the task's slots. Checked whole
  // before a byte reaches the task: a malformed reply leaves the chunk to another worker.
  RunResult Read(const std::vector<BytePiece>& pieces, const ChunkTask& t, std::string* why) {
    const std::string who = "remote worker " + address_;
    auto bad = [&](const std::string& what) {
      *why = who + ": malformed reply (" + what + ")";
      return RunResult::kRetry;
    };
    ReplyView& v = View();
    if (const std::string e = ParseReply(pieces.data(), pieces.size(), &v); !e.empty()) return bad(e);
    const size_t sample_bytes = size_t(Channels()) * t.width * t.height * DTypeSize(ctx_.options.dtype);
    size_t want = sample_bytes * t.count;
    std::vector<uint8_t>& forms = Forms();  // each sample's SampleForm when the reply has them
    forms.clear();
    auto bytes_of = [&](uint32_t j) {
      return forms.empty() ? sample_bytes : SampleFormBytes(SampleForm(forms[j]), t.width, t.height);
    };
    if (v.params.present && v.params.size != uint64_t(t.count) * kParamBytes)
      return bad("params of " + std::to_string(v.params.size) + " bytes");
    if (v.forms.present) {  // planes were asked for only where a sink finishes the samples
      if (!spec_.planes() || !t.sink) return bad("sample forms not asked for");
      if (v.forms.size != t.count) return bad("forms of " + std::to_string(v.forms.size) + " bytes");
      forms.resize(t.count);
      CopyPieces(v.forms.pieces, forms.data());
      want = 0;
      for (uint32_t j = 0; j < t.count; ++j) {
        if (forms[j] >= kSampleForms) return bad("sample form " + std::to_string(forms[j]));
        want += bytes_of(j);
      }
    }
    if (v.images.present) {
      if (v.images_size != want) return bad("images of " + std::to_string(v.images_size) + " bytes, expected " + std::to_string(want));
      if (!v.compressed && v.images.size != want) return bad("images of " + std::to_string(v.images.size) + " bytes");
    }
    if (!v.sample_error.empty()) {
      *why = who + ": " + v.sample_error;
      return RunResult::kSampleError;
    }
    if (!v.images.present || !v.params.present) return bad("missing images or params");
    uint8_t one[kParamBytes];
    size_t fill = 0, i = 0;
    for (BytePiece p : v.params.pieces) {
      while (p.size) {
        const size_t c = std::min(p.size, kParamBytes - fill);
        std::memcpy(one + fill, p.data, c);
        fill += c, p.data += c, p.size -= c;
        if (fill == kParamBytes) t.params[i++] = GetParams(one), fill = 0;
      }
    }
    if (v.compressed) {
      ZSTD_DCtx* z = Dctx();
      ZSTD_DCtx_reset(z, ZSTD_reset_session_only);
      ZSTD_outBuffer out{t.images, want, 0};
      for (const BytePiece& p : v.images.pieces) {
        ZSTD_inBuffer in{p.data, p.size, 0};
        while (in.pos < in.size) {
          const size_t rc = ZSTD_decompressStream(z, &out, &in);
          if (ZSTD_isError(rc) || (out.pos == out.size && in.pos < in.size && rc != 0)) return bad("bad zstd frame");
        }
      }
      if (out.pos != want) return bad("bad zstd frame");
      for (size_t j = 0, at = 0; t.sink && j < t.count; at += bytes_of(uint32_t(j++))) {
        const BytePiece whole{t.images + at, bytes_of(uint32_t(j))};
        t.sink->Take(uint32_t(j), forms.empty() ? SampleForm::kRgb : SampleForm(forms[j]), &whole, 1);
      }
    } else if (!t.sink) {
      CopyPieces(v.images.pieces, t.images);
    } else {  // each sample to the sink where it lies in the pieces
      uint32_t j = 0;
      size_t filled = 0, size = t.count ? bytes_of(0) : 0;
      std::vector<BytePiece> parts;
      for (BytePiece p : v.images.pieces) {
        while (p.size) {
          const size_t c = std::min(p.size, size - filled);
          parts.push_back({p.data, c});
          filled += c, p.data += c, p.size -= c;
          if (filled == size) {
            t.sink->Take(j, forms.empty() ? SampleForm::kRgb : SampleForm(forms[j]), parts.data(), parts.size());
            parts.clear();
            filled = 0;
            if (++j < t.count) size = bytes_of(j);
          }
        }
      }
    }
    return RunResult::kOk;
  }

  // A parsed reply, kept per calling thread so that its piece lists are allocated once.
  static ReplyView& View() {
    thread_local ReplyView view;
    return view;
  }

  // A reply's sample forms, kept per calling thread (Run is called by several at once).
  static std::vector<uint8_t>& Forms() {
    thread_local std::vector<uint8_t> forms;
    return forms;
  }

  // One decompression context per calling thread (Run is called by several at once).
  static ZSTD_DCtx* Dctx() {
    struct Holder {
      ZSTD_DCtx* z = ZSTD_createDCtx();
      ~Holder() { ZSTD_freeDCtx(z); }
    };
    thread_local Holder h;
    return h.z;
  }

  const std::string address_, token_, tls_root_;
  const bool compress_, data_path_;
  const RemoteContext ctx_;
  WorkSpec spec_;
  std::mutex mu_;
  std::shared_ptr<grpc::GenericStub> stub_;  // holds the channel
  std::shared_ptr<grpc::ChannelCredentials> creds_;
  int limit_ = 0;  // the channel's largest reply (ReplyLimit)
  uint32_t file_id_ = 0, max_samples_ = 1;
  std::set<grpc::ClientContext*> active_;
  // The data path: its port (0: gRPC only) and ticket from the last handshake, and connections, idle
  // or carrying a request (shut down by CancelAll).
  uint16_t data_port_ = 0;
  std::string ticket_;
  uint64_t generation_ = 0;  // handshakes so far
  bool warned_data_ = false;  // that the data port could not be reached
  std::vector<int> idle_;
  std::set<int> active_fds_;
  std::atomic<uint64_t> wire_bytes_{0};
};

}  // namespace

RemoteConnector Connector() {
  // Receive buffers are freed at the top of a thread's heap; with malloc's default 128 KiB trim
  // threshold their pages would go back to the kernel and fault in again for the next reply, costing
  // more CPU than the copy itself. Keep up to 256 MiB instead.
  static const bool tuned = mallopt(M_TRIM_THRESHOLD, 256 << 20) != 0;
  (void)tuned;
  return [](const std::string& address, const RemoteOptions& o, const RemoteContext& c) -> std::unique_ptr<RemoteExecutor> {
    CheckAddress(address);
    return std::make_unique<GrpcExecutor>(address, o, c);
  };
}

// As the option table reads tls_root and token_file, so that a file means the same to every front end.
std::string ReadFile(const std::string& path) { return ReadOptionFile(path); }
std::string ReadTokenFile(const std::string& path) { return dsc::ReadTokenFile(path); }

}  // namespace dsc::remote
