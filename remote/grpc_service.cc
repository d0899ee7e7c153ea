#include "remote/grpc_service.h"

#include <string>

#include "remote/wire.h"

namespace dsc::remote {

namespace {

static_assert(uint32_t(Code::kCancelled) == uint32_t(grpc::StatusCode::CANCELLED) &&
              uint32_t(Code::kInvalidArgument) == uint32_t(grpc::StatusCode::INVALID_ARGUMENT) &&
              uint32_t(Code::kResourceExhausted) == uint32_t(grpc::StatusCode::RESOURCE_EXHAUSTED) &&
              uint32_t(Code::kFailedPrecondition) == uint32_t(grpc::StatusCode::FAILED_PRECONDITION) &&
              uint32_t(Code::kInternal) == uint32_t(grpc::StatusCode::INTERNAL) &&
              uint32_t(Code::kUnauthenticated) == uint32_t(grpc::StatusCode::UNAUTHENTICATED));

grpc::Status ToGrpc(const Outcome& o) {
  return o.ok() ? grpc::Status::OK : grpc::Status(grpc::StatusCode(o.code), o.message);
}

}  // namespace

GrpcWorker::GrpcWorker(WorkerService* service) : service_(service) {
  // Process is a sync handler, as the others, on raw bytes.
  MarkMethodStreamed(1, new grpc::internal::StreamedUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
                            [this](grpc::ServerContext* ctx, grpc::ServerUnaryStreamer<grpc::ByteBuffer, grpc::ByteBuffer>* s) {
                              return RawProcess(ctx, s);
                            }));
}

Outcome GrpcWorker::Authenticate(grpc::ServerContext* ctx) const {
  const auto& md = ctx->client_metadata();
  const auto it = md.find(kTokenKey);
  if (it == md.end()) return service_->Authenticate(nullptr);
  const std::string got(it->second.data(), it->second.size());
  return service_->Authenticate(&got);
}

grpc::Status GrpcWorker::Hello(grpc::ServerContext* ctx, const HelloRequest* req, HelloReply* rep) {
  if (Outcome s = Authenticate(ctx); !s.ok()) return ToGrpc(s);
  return ToGrpc(service_->Hello(*req, rep));
}

grpc::Status GrpcWorker::Status(grpc::ServerContext* ctx, const StatusRequest*, StatusReply* rep) {
  if (Outcome s = Authenticate(ctx); !s.ok()) return ToGrpc(s);
  service_->Status(rep);
  return grpc::Status::OK;
}

grpc::Status GrpcWorker::Process(grpc::ServerContext*, const ProcessRequest*, ProcessReply*) {
  return grpc::Status(grpc::StatusCode::INTERNAL, "internal: the protobuf Process handler is not in use");
}

grpc::Status GrpcWorker::RawProcess(grpc::ServerContext* ctx, grpc::ServerUnaryStreamer<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
  grpc::ByteBuffer in;
  if (!stream->Read(&in)) return grpc::Status(grpc::StatusCode::INTERNAL, "no request");
  ProcessRequest req;
  if (!grpc::SerializationTraits<ProcessRequest>::Deserialize(&in, &req).ok())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed request");
  if (Outcome s = Authenticate(ctx); !s.ok()) return ToGrpc(s);
  return ToGrpc(service_->Process(req, ctx->peer(), false, [ctx] { return ctx->IsCancelled(); }, [stream](Reply& r) {
    // The images go as a slice over the reply's own memory, given back when gRPC has sent it.
    grpc::Slice parts[2] = {grpc::Slice(r.head), grpc::Slice()};
    size_t n = 1;
    if (r.images) {
      const size_t size = r.images.size();
      uint8_t* data = r.images.data();
      const ReplyMemory::Free free = r.images.free_fn();
      parts[n++] = grpc::Slice(data, size, free, r.images.Detach());
    }
    const grpc::ByteBuffer rep(parts, n);
    return stream->Write(rep) ? Outcome() : Outcome{Code::kCancelled, "the client went away"};
  }));
}

}  // namespace dsc::remote
