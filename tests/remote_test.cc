// Remote workers end to end on loopback: real `dsc serve` processes on ephemeral ports, the loader's
// gRPC executor (dsc::remote), and every epoch's digest against a purely local run's: remote only,
// local + remote, typed fields, FFCV files, each sample's wire form, malformed and oversized replies.
// (Workers that die, stall or restart, security, hostile input and the data path: remote_faults_test.cc.)
// Each test is bounded in time.
#include <gtest/gtest.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <cstdio>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <png.h>
#include <turbojpeg.h>
#include "format/bytes.h"
#include "reader/digest.h"
#include "reader/loader.h"
#include "remote/client.h"
#include "remote/data.h"
#include "remote/wire.h"
#include "remote/worker.grpc.pb.h"
#include "tests/remote_fixtures.h"
#include "tests/test_util.h"
#include "writer/build.h"
#include "writer/writer.h"


namespace dsc::test {
namespace {

TEST(Remote, RemoteOnlyAndMixedEqualLocal) {
  Worker a({Built().cifar, "--threads", "1"}), b({Built().cifar, Built().other, "--threads", "1"});
  {
    Loader l(Built().cifar, Remote({&a, &b}, 0));
    EXPECT_EQ(Digests(l, 3), Local());
    EXPECT_EQ(RemoteSamples(l), 3u * 13 * 32);  // 13 batches of 32 (the last padded), all remote
  }
  {
    Loader l(Built().cifar, Remote({&a}, 1));
    EXPECT_EQ(Digests(l, 3), Local());
  }
  {  // compressed wire
    LoaderOptions o = Remote({&a}, 0);
    o.remote.compression = true;
    Loader l(Built().cifar, o);
    EXPECT_EQ(Digests(l, 3), Local());
  }
}

// Typed fields travel too: a file with boxes and a mask, decoded by a worker, gives the batches (images,
// boxes mapped through each crop, masks cropped with their image) the local loader gives.
// Two epochs of `path` with RandomResizedCrop(24) on top of `o`: a loader whose only worker is a `dsc
// serve` of the file gives the local loader's digests, every sample decoded by the worker.
void ExpectRemoteRandomCropsEqualLocal(const std::string& path, LoaderOptions o) {
  o.augment.crop = kernels::CropMode::kRandomResized;
  o.augment.out_w = o.augment.out_h = 24;
  LoaderOptions local = o;
  local.remote = RemoteOptions();
  Loader l0(path, local);
  const auto want = Digests(l0, 2);
  Worker a({path, "--threads", "1"});
  LoaderOptions remote = o;
  remote.remote = Remote({&a}, 0).remote;
  Loader l1(path, remote);
  EXPECT_EQ(Digests(l1, 2), want);
  EXPECT_EQ(RemoteSamples(l1), 2 * l1.batches_per_epoch() * uint64_t(o.batch_size));
}

TEST(Remote, TypedFieldsMasksAndFurtherImagesEqualLocal) {
  const std::string path = Built().dir + "/typed.beton";
  {
    Writer w(path, {ImageField("image"), LabelField("label"), VarArrayField("boxes", format::DType::kFloat32, {4}),
                    VarArrayField("cls", format::DType::kInt32), MaskField("mask"), ImageField("side")});
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(SubsetTree(10)))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (size_t i = 0; i < files.size(); ++i) {
      std::ifstream f(files[i], std::ios::binary);
      std::vector<uint8_t> jpeg((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      std::vector<uint8_t> mask(32 * 32);
      for (size_t p = 0; p < mask.size(); ++p) mask[p] = uint8_t((i + p % 32 / 8 + p / 32 / 8) % 4);
      const float boxes[8] = {1, 2, 10, 12, float(i % 16), 8, 14, 20};
      const int32_t cls[2] = {int32_t(i % 3), 7};
      dsc::Sample v;
      v.SetImage("image", std::move(jpeg));
      v.SetLabel("label", int32_t(i % 10));
      v.SetArray<float>("boxes", boxes, 8);
      v.SetArray<int32_t>("cls", cls, 2);
      v.SetMask("mask", std::move(mask), 32, 32);
      std::vector<uint8_t> side(size_t(20 + i % 3) * 12 * 3, uint8_t(i));  // a further image of another size
      for (size_t p = 0; p < side.size(); ++p) side[p] = uint8_t(p * 7 + i);
      v.SetPixels("side", std::move(side), 20 + int(i % 3), 12);
      w.Add(std::move(v));
    }
    w.Close();
  }
  LoaderOptions o = Base();
  o.boxes = {"boxes", "cls"};
  ExpectRemoteRandomCropsEqualLocal(path, o);  // 100 samples: 4 batches of 32 (the last padded), all remote
  o.boxes.clear();
  o.image = "side";  // the option travels: the worker decodes the further image
  ExpectRemoteRandomCropsEqualLocal(path, o);
  o.image.clear();
  o.channels = 1;  // one channel travels finished
  ExpectRemoteRandomCropsEqualLocal(path, o);
}

// FFCV's own files (written by FFCV's writer) through a worker: its classification file and the one
// with every field type give the local loader's batches, typed fields included.
TEST(Remote, FfcvFilesEqualLocal) {
  const std::string d = ScratchDir("-remote-ffcv");
  ASSERT_EQ(std::system(("zstd -dc " + std::string(DSC_FFCV_SAMPLES) + " | tar -x -C " + d).c_str()), 0);
  for (const char* name : {"cifar-test-smart.beton", "allfields.beton"}) {
    const std::string path = d + "/ffcv-samples/" + name;
    SCOPED_TRACE(name);
    ExpectRemoteRandomCropsEqualLocal(path, Base());
  }
}

// A deferred transform list (the GPU path's Batch::steps) with remote workers: the steps are drawn by
// the client from each sample's stream, and a crop's flip leads them, as for the local loader.
TEST(Remote, DeferredTransformListEqualsLocal) {
  LoaderOptions o = Base();
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.defer_augment = true;
  o.augment.flip = true;
  o.transforms = "rand_augment(2,9),random_erasing(0.5)";
  ExpectRemoteRandomCropsEqualLocal(Built().cifar, o);
}

// `dsc bench` with remote-only workers: the workers did every sample (the padded last batch's too, so
// the share is 1, not 416/400), and the verdict names them instead of the idle local stages.
TEST(Remote, BenchNamesRemoteWorkersAsTheBound) {
  Worker a({Built().cifar, "--threads", "1"});
  std::string out;
  ASSERT_EQ(RunDsc("bench " + Built().cifar + " --remote " + a.address() + " --local-threads 0 --epochs 2 --batch-size 32", &out), 0) << out;
  EXPECT_NE(out.find("remote workers did 100.0% of the samples"), std::string::npos) << out;
  EXPECT_NE(out.find("verdict: input-bound on the remote workers"), std::string::npos) << out;
  ASSERT_EQ(RunDsc("bench " + Built().cifar + " --remote " + a.address() + " --local-threads 0 --epochs 2 --batch-size 32 --json", &out), 0) << out;
  EXPECT_NE(out.find("\"remote_share\": 1,"), std::string::npos) << out;
}

// Two epochs of `file`: each epoch's digest after its batches' params; the remote workers' samples and
// wire bytes are added to *samples and *wire. With `resize`, epoch 1 is at 16x20 (set_output_size).
std::vector<std::string> TwoEpochs(const std::string& file, const LoaderOptions& o, uint64_t* samples, uint64_t* wire,
                                   bool resize = false) {
  Loader l(file, o);
  std::vector<std::string> d;
  for (uint64_t e = 0; e < 2; ++e) {
    if (e == 1 && resize) l.set_output_size(16, 20);
    BatchDigest g;
    for (const Batch& b : l.epoch(e)) {
      g.Add(b);
      d.emplace_back(reinterpret_cast<const char*>(b.params), b.size * sizeof(kernels::SampleParams));
    }
    d.push_back(g.Hex());
  }
  for (const auto& w : l.remote_stats()) *samples += w.samples, *wire += w.wire_bytes;
  return d;
}

// CIFAR-size images in every form a sample travels in (reader/executor.h SampleForm): JPEGs at 4:2:0
// (as stored), gray, 4:4:4, 4:2:2 and 4:4:0 (re-encoded with TurboJPEG), and PNGs (raw payloads, RGB
// rows), interleaved so that every reply mixes them.
std::string MixedFormsFile() {
  namespace fs = std::filesystem;
  static const std::string file = [] {
    const std::string dir = ScratchDir("-remote-forms"), tree = dir + "/tree";
    tjhandle tj = tjInitTransform(), enc = tjInitCompress();
    int i = 0;
    for (const auto& cls : fs::directory_iterator(SubsetTree(6))) {
      fs::create_directories(fs::path(tree) / cls.path().filename());
      for (const auto& f : fs::directory_iterator(cls.path())) {
        const std::vector<uint8_t> jpg = ReadFile(f.path().string());
        const std::string out = (fs::path(tree) / cls.path().filename() / f.path().stem()).string();
        unsigned char* buf = nullptr;
        unsigned long len = 0;
        int w = 0, h = 0;
        const std::vector<uint8_t> px = ReferenceDecode(jpg, &w, &h);
        switch (i++ % 6) {
          case 0:
            WriteFile(out + ".jpg", jpg);
            break;
          case 1: {
            tjtransform xf{};
            xf.options = TJXOPT_GRAY;
            if (tjTransform(tj, jpg.data(), jpg.size(), 1, &buf, &len, &xf, 0) != 0) throw Error(tjGetErrorStr2(tj));
            break;
          }
          case 5: {
            png_image img{};
            img.version = PNG_IMAGE_VERSION;
            img.width = unsigned(w);
            img.height = unsigned(h);
            img.format = PNG_FORMAT_RGB;
            if (!png_image_write_to_file(&img, (out + ".png").c_str(), 0, px.data(), 0, nullptr)) throw Error(img.message);
            break;
          }
          default: {
            const int sub[] = {TJSAMP_444, TJSAMP_422, TJSAMP_440};
            if (tjCompress2(enc, px.data(), w, 0, h, TJPF_RGB, &buf, &len, sub[(i - 1) % 6 - 2], 90, 0) != 0)
              throw Error(tjGetErrorStr2(enc));
          }
        }
        if (buf) WriteFile(out + ".jpg", buf, len), tjFree(buf);
      }
    }
    tjDestroy(tj);
    tjDestroy(enc);
    writer::BuildOptions o;
    o.log = [](const std::string&) {};
    writer::Build(tree, dir + "/forms.beton", o);
    return dir + "/forms.beton";
  }();
  return file;
}

// With RemoteOptions::planes, float outputs of images the loader decodes to planes travel as the
// planes (half of RGB's bytes at 4:2:0), each sample in its own form within one reply, plain and
// zstd-compressed: the batches equal a local run's, and the wire carries less than RGB rows, which
// travel without the option.
TEST(Remote, JpegsTravelAsTheirPlanesAndEqualLocal) {
  const std::string mixed = MixedFormsFile();
  Worker a({Built().cifar, mixed, "--threads", "1"});
  for (const std::string& file : {Built().cifar, mixed}) {
    for (const DType dtype : {DType::kFloat32, DType::kFloat16}) {
      for (const bool compression : {false, true}) {
        SCOPED_TRACE(file + (dtype == DType::kFloat16 ? " float16" : " float32") + (compression ? " zstd" : ""));
        auto run = [&](LoaderOptions o, uint64_t* samples, uint64_t* wire) {
          o.dtype = dtype;
          o.layout = dtype == DType::kFloat16 ? Layout::kNHWC : Layout::kNCHW;
          o.remote.compression = compression;
          return TwoEpochs(file, o, samples, wire);
        };
        uint64_t n = 0, wire = 0;
        LoaderOptions local = Base();
        local.remote = RemoteOptions();
        const auto want = run(local, &n, &wire);
        LoaderOptions rows = Remote({&a}, 0);
        EXPECT_FALSE(rows.remote.transport.planes);  // the default
        if (!compression) {  // RGB rows: 3,072 bytes and the parameters a sample
          EXPECT_EQ(run(rows, &n, &wire), want);
          EXPECT_GT(wire, n * (3072 + 52));
          n = wire = 0;
        }
        LoaderOptions planes = rows;
        planes.remote.transport.planes = true;
        const auto got = run(planes, &n, &wire);
        EXPECT_EQ(got, want);
        ASSERT_GT(n, 0u);
        // RGB rows are 3,072 bytes and the parameters 52 a sample. At 4:2:0 the planes are 1,536; the
        // mixed file's forms average 2,133 (the padded last batch's repeats move that a little).
        const uint64_t low = file == mixed ? 2000 : 1536, high = file == mixed ? 2300 : 1600;
        if (!compression) {
          EXPECT_GT(wire, n * (low + 52));
          EXPECT_LT(wire, n * (high + 52));
        } else {
          EXPECT_LT(wire, n * (low + 52));
        }
      }
    }
  }
}

// Records each sample's form and byte count as a remote executor hands the sample over.
struct FormSink final : SampleSink {
  std::vector<std::pair<SampleForm, size_t>> got;
  void Take(uint32_t, SampleForm form, const BytePiece* pieces, size_t n) override {
    size_t size = 0;
    for (size_t i = 0; i < n; ++i) size += pieces[i].size;
    got.emplace_back(form, size);
  }
};

// One request for samples 0..count-1 of `path` as finished, unnormalised uint8 (as the loader asks for
// float outputs), through a real executor connected to `address`, into `sink`.
RunResult RunUint8(const std::string& address, const std::string& path, uint32_t count, bool planes,
                   SampleSink* sink, std::string* why) {
  LoaderOptions o = Base();
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.augment.normalize = false;
  Dataset ds(path);
  RemoteContext ctx;
  ctx.path = path;
  ctx.file_size = ds.view().header().file_size;
  ctx.header_checksum = ds.view().header().header_checksum;
  ctx.options = o;
  ctx.width = ctx.height = 32;
  ctx.max_request_samples = count;
  ctx.planes = planes;
  ctx.run_fingerprint = RunIdentity::Of(ds, o).Fingerprint();
  const auto ex = remote::Connector()(address, o.remote, ctx);
  if (ex->Connect(10000, why) != ConnectResult::kReady) return RunResult::kRetry;
  std::vector<uint32_t> samples(count);
  for (uint32_t i = 0; i < count; ++i) samples[i] = i;
  std::vector<uint8_t> images(size_t(count) * 3 * 32 * 32);
  std::vector<kernels::SampleParams> params(count);
  ChunkTask t;
  t.samples = samples.data();
  t.count = count;
  t.width = t.height = 32;
  t.images = images.data();
  t.params = params.data();
  t.sink = sink;
  return ex->Run(t, 20000, why);
}

// A worker picks each sample's form by what saves bytes: a JPEG with subsampled chroma travels as its
// planes (4:2:0, 4:2:2, 4:4:0), a gray one as its luma, a 4:4:4 JPEG (as large as RGB) and a PNG as
// RGB rows; each form checked against the JPEG's own header (TurboJPEG), each sample's bytes against
// its form.
TEST(Remote, EachSampleTravelsInItsSmallerForm) {
  const std::string mixed = MixedFormsFile();
  Worker a({mixed, "--threads", "1"});
  Dataset ds(mixed);
  const uint32_t count = uint32_t(std::min<uint64_t>(ds.size(), 48));
  FormSink sink;
  std::string why;
  ASSERT_EQ(RunUint8(a.address(), mixed, count, /*planes=*/true, &sink, &why), RunResult::kOk) << why;
  ASSERT_EQ(sink.got.size(), count);
  tjhandle tj = tjInitDecompress();
  std::map<SampleForm, int> seen;
  int full_chroma = 0;
  std::vector<uint8_t> scratch;
  for (uint32_t i = 0; i < count; ++i) {
    const Payload pl = ds.ReadPayload(i, &scratch);
    int w = 0, h = 0, sub = -1, space = 0;
    SampleForm want = SampleForm::kRgb;
    if (ds.entry(i).encoding == uint8_t(format::Encoding::kJpeg)) {
      ASSERT_EQ(tjDecompressHeader3(tj, pl.data, static_cast<unsigned long>(pl.size), &w, &h, &sub, &space), 0);
      switch (sub) {
        case TJSAMP_GRAY: want = SampleForm::kGray; break;
        case TJSAMP_420: want = SampleForm::kYcc420; break;
        case TJSAMP_422: want = SampleForm::kYcc422; break;
        case TJSAMP_440: want = SampleForm::kYcc440; break;
        default: want = SampleForm::kRgb, full_chroma += sub == TJSAMP_444;  // as many bytes as RGB
      }
    }
    EXPECT_EQ(int(sink.got[i].first), int(want)) << "sample " << i << " (TurboJPEG sampling " << sub << ")";
    EXPECT_EQ(sink.got[i].second, SampleFormBytes(sink.got[i].first, 32, 32)) << "sample " << i;
    ++seen[want];
  }
  tjDestroy(tj);
  // The file holds every kind: the test saw each route.
  for (SampleForm f : {SampleForm::kRgb, SampleForm::kGray, SampleForm::kYcc420, SampleForm::kYcc422, SampleForm::kYcc440})
    EXPECT_GT(seen[f], 0) << "no sample of form " << int(f) << " among the first " << count;
  EXPECT_GT(full_chroma, 0) << "no 4:4:4 JPEG among the first " << count;
}

// A worker whose replies are whatever `reply` makes of the request's sample count.
class ScriptedReplies final : public remote::Worker::Service {
 public:
  std::function<void(uint32_t, remote::ProcessReply*)> reply;
  grpc::Status Hello(grpc::ServerContext*, const remote::HelloRequest*, remote::HelloReply* r) override {
    r->set_protocol(remote::kProtocol);
    r->set_dsc_version(remote::DscVersion());
    r->set_jpeg_version(remote::JpegVersion());
    r->set_threads(1);
    r->set_max_samples(remote::kMaxRequestSamples);
    return grpc::Status::OK;
  }
  grpc::Status Process(grpc::ServerContext*, const remote::ProcessRequest* q, remote::ProcessReply* r) override {
    reply(uint32_t(q->samples_size()), r);
    return grpc::Status::OK;
  }
};

// Sample forms from a worker are checked before any sample reaches the loader: an unknown form, a
// count that is not the request's, forms the loader did not ask for, or images of another size than
// the forms add up to are a malformed reply (the chunk goes elsewhere); well-formed planes reach the
// sink at their own sizes.
TEST(Remote, MalformedSampleFormsAreRefused) {
  ScriptedReplies service;
  grpc::ServerBuilder sb;
  int port = 0;
  sb.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  sb.RegisterService(&service);
  const auto server = sb.BuildAndStart();
  ASSERT_TRUE(server && port > 0);
  constexpr uint32_t kCount = 4;
  const size_t planes420 = 32 * 32 + 2 * 16 * 16;
  // A reply of kCount samples with these forms and this many image bytes.
  auto make = [&](const std::string& forms, size_t images) {
    return [forms, images](uint32_t count, remote::ProcessReply* r) {
      r->set_images_size(images);
      r->set_params(std::string(size_t(count) * remote::kParamBytes, '\0'));
      r->set_forms(forms);
      r->set_images(std::string(images, '\x80'));
    };
  };
  const std::string address = "127.0.0.1:" + std::to_string(port);
  auto run = [&](bool planes, std::string* why, FormSink* sink) {
    return RunUint8(address, Built().cifar, kCount, planes, sink, why);
  };
  const std::string ycc420(kCount, char(SampleForm::kYcc420));
  struct Bad {
    std::function<void(uint32_t, remote::ProcessReply*)> reply;
    bool planes;
    std::string says;
  };
  const Bad bad[] = {
      {make(std::string(kCount - 1, char(SampleForm::kYcc420)) + char(7), 3 * planes420 + 3072), true, "sample form 7"},
      {make(ycc420.substr(1), 3 * planes420), true, "forms of 3 bytes"},
      {make(ycc420, kCount * planes420), false, "sample forms not asked for"},
      {make(ycc420, kCount * 3072), true, "images of 12288 bytes, expected 6144"},
  };
  for (const Bad& b : bad) {
    service.reply = b.reply;
    std::string why;
    FormSink sink;
    EXPECT_EQ(run(b.planes, &why, &sink), RunResult::kRetry) << b.says;
    EXPECT_NE(why.find("malformed reply (" + b.says), std::string::npos) << why;
    EXPECT_TRUE(sink.got.empty()) << b.says;
  }
  // Mixed forms, well formed: each sample at its own size, in order.
  const std::string mixed = {char(SampleForm::kYcc420), char(SampleForm::kRgb), char(SampleForm::kGray),
                             char(SampleForm::kYcc422)};
  service.reply = make(mixed, planes420 + 3072 + 1024 + 2048);
  std::string why;
  FormSink sink;
  ASSERT_EQ(run(true, &why, &sink), RunResult::kOk) << why;
  const std::vector<std::pair<SampleForm, size_t>> want = {
      {SampleForm::kYcc420, planes420}, {SampleForm::kRgb, 3072}, {SampleForm::kGray, 1024}, {SampleForm::kYcc422, 2048}};
  EXPECT_EQ(sink.got, want);
  server->Shutdown();
}

// A crop preset with float32 output, resized between epochs (set_output_size): batches travel as
// uint8 (a quarter of the float bytes) and equal a local run's, params included.
TEST(Remote, CropPresetResizedShipsUint8AndEqualsLocal) {
  Worker a({Built().cifar, "--threads", "1"});
  auto run = [&](LoaderOptions o, uint64_t* samples, uint64_t* wire) {
    o.augment = LoaderOptions::ImagenetTrain().augment;
    o.augment.out_w = o.augment.out_h = 24;
    o.augment.cutout = 6;
    return TwoEpochs(Built().cifar, o, samples, wire, /*resize=*/true);
  };
  uint64_t n = 0, wire = 0;
  LoaderOptions local = Base();
  local.remote = RemoteOptions();
  const auto want = run(local, &n, &wire);
  const auto got = run(Remote({&a}, 0), &n, &wire);
  EXPECT_EQ(got, want);
  ASSERT_EQ(n, 2u * 13 * 32);
  // Epoch 0 at 24x24, epoch 1 at 16x20: uint8 is 1728 and 960 bytes a sample, float32 four times that.
  EXPECT_LT(wire, 13u * 32 * (1728 + 960) * 5 / 4);
  EXPECT_GT(wire, 13u * 32 * (1728 + 960));
}

// A worker that answers every request with 64 MiB of images, far more than any request needs (a
// broken or hostile worker).
class OversizedReplies final : public remote::Worker::Service {
 public:
  grpc::Status Hello(grpc::ServerContext*, const remote::HelloRequest*, remote::HelloReply* r) override {
    r->set_protocol(remote::kProtocol);
    r->set_dsc_version(remote::DscVersion());
    r->set_jpeg_version(remote::JpegVersion());
    r->set_threads(1);
    r->set_max_samples(remote::kMaxRequestSamples);
    return grpc::Status::OK;
  }
  grpc::Status Process(grpc::ServerContext*, const remote::ProcessRequest*, remote::ProcessReply* r) override {
    r->set_images_size(64u << 20);
    r->mutable_images()->assign(64u << 20, '\0');
    return grpc::Status::OK;
  }
};

// The loader accepts replies up to what its largest request can need (it took any size, so a worker
// could make it allocate without bound), and a set_output_size that grows the samples past that gets
// a channel for the new size.
TEST(Remote, AReplyLargerThanTheRequestNeedsIsRefusedUnread) {
  OversizedReplies service;
  grpc::ServerBuilder sb;
  int port = 0;
  sb.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  sb.RegisterService(&service);
  sb.SetMaxSendMessageSize(-1);
  const auto server = sb.BuildAndStart();
  ASSERT_TRUE(server && port > 0);
  LoaderOptions o = Base();
  RemoteContext ctx;
  ctx.path = Built().cifar;
  ctx.options = o;
  ctx.width = ctx.height = 32;
  ctx.max_request_samples = 16;
  const auto ex = remote::Connector()("127.0.0.1:" + std::to_string(port), o.remote, ctx);
  std::string why;
  ASSERT_EQ(ex->Connect(10000, &why), ConnectResult::kReady) << why;
  std::vector<uint32_t> samples(16);
  for (uint32_t i = 0; i < 16; ++i) samples[i] = i;
  std::vector<uint8_t> images(size_t(16) * 3 * 32 * 32 * sizeof(float));
  std::vector<kernels::SampleParams> params(16);
  ChunkTask t;
  t.samples = samples.data();
  t.count = 16;
  t.width = t.height = 32;
  t.images = images.data();
  t.params = params.data();
  EXPECT_EQ(ex->Run(t, 20000, &why), RunResult::kRetry);
  EXPECT_NE(why.find("a reply larger than a request of 16 samples can need"), std::string::npos) << why;
  EXPECT_LT(ex->wire_bytes(), 1u << 20) << "the 64 MiB reply was received";
  server->Shutdown();

  // A real worker, the output grown from 24x24 to 96x96 (16x the bytes) between epochs: every sample
  // still comes from the worker, equal to a local run's.
  Worker a({Built().cifar, "--threads", "1"});
  auto run = [&](LoaderOptions lo, uint64_t* remote_samples) {
    lo.augment = LoaderOptions::ImagenetTrain().augment;
    lo.augment.out_w = lo.augment.out_h = 24;
    Loader l(Built().cifar, lo);
    l.set_output_size(24, 24);
    std::vector<std::string> d = Digests(l, 1);
    l.set_output_size(96, 96);
    BatchDigest g;
    for (const Batch& b : l.epoch(1)) g.Add(b);
    d.push_back(g.Hex());
    *remote_samples = RemoteSamples(l);
    return d;
  };
  LoaderOptions local = Base();
  local.remote = RemoteOptions();
  uint64_t n = 0;
  const auto want = run(local, &n);
  EXPECT_EQ(run(Remote({&a}, 0), &n), want);
  EXPECT_EQ(n, 2u * 13 * 32) << "samples decoded by the worker over the two epochs";
}

// Replies of 2 MiB and more come from the worker's recycled buffers (2 MiB pages): finished float32
// batches of 200 samples (2.4 MiB a request, two per epoch of the 400) over
// three epochs, two requests in flight, equal a local run's.
TEST(Remote, LargeRepliesFromRecycledBuffersEqualLocal) {
  Worker a({Built().cifar, "--threads", "1"});
  LoaderOptions local = Base();
  local.remote = RemoteOptions();
  local.batch_size = 200;
  Loader l0(Built().cifar, local);
  const auto want = Digests(l0, 3);
  LoaderOptions o = Remote({&a}, 0);
  o.batch_size = 200;
  o.remote.transport.chunk = 200;
  o.remote.transport.ship_uint8 = false;  // float32 on the wire: 12,288 bytes a sample
  Loader l(Built().cifar, o);
  EXPECT_EQ(Digests(l, 3), want);
  uint64_t wire = 0;
  for (const auto& w : l.remote_stats()) wire += w.wire_bytes;
  EXPECT_GT(wire, 3u * 400 * 12288);  // the float bytes did travel
}

// A field of /proc/PID/status in KiB ("VmRSS", "VmHWM").

}  // namespace
}  // namespace dsc::test
