// The worker's gRPC transport: Worker (remote/worker.proto) over a WorkerService. It reads the token
// from the call's metadata and carries requests and replies; the service decides everything else.
#pragma once
#include <grpcpp/grpcpp.h>

#include "remote/service.h"
#include "remote/worker.grpc.pb.h"

namespace dsc::remote {

class GrpcWorker final : public Worker::Service {
 public:
  explicit GrpcWorker(WorkerService* service);

  grpc::Status Hello(grpc::ServerContext* ctx, const HelloRequest* req, HelloReply* rep) override;
  grpc::Status Status(grpc::ServerContext* ctx, const StatusRequest* req, StatusReply* rep) override;
  // Not in use: Process takes and gives raw bytes (RawProcess), so that a reply's images go from the
  // decode threads' output to the socket with no protobuf copy.
  grpc::Status Process(grpc::ServerContext* ctx, const ProcessRequest* req, ProcessReply* rep) override;

 private:
  grpc::Status RawProcess(grpc::ServerContext* ctx, grpc::ServerUnaryStreamer<grpc::ByteBuffer, grpc::ByteBuffer>* stream);
  Outcome Authenticate(grpc::ServerContext* ctx) const;

  WorkerService* const service_;
};

}  // namespace dsc::remote
