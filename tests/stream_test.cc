// Streaming dsc files (and FFCV's) from a real nginx on loopback (docs/streaming.md): batches identical
// to a local read, a bounded cache, a second run from the cache, a server that goes away and comes
// back, a file replaced on the server, and errors that name the URL and the block.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "format/error.h"
#include "reader/digest.h"
#include "reader/loader.h"
#include "stream/url_source.h"
#include "format/ffcv.h"
#include "format/file_view.h"
#include "reader/file_source.h"
#include "tests/fuzz/fixup_checksums.h"
#include "tests/nginx_server.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc {
namespace {

namespace fs = std::filesystem;
using test::NginxServer;

#define SKIP_WITHOUT_NGINX()                                                                                   \
  if (NginxServer::Binary().empty()) GTEST_SKIP() << "nginx is not installed (apt-get install nginx-light): " \
                                                     "the streaming tests need a real HTTP server"

constexpr uint64_t kBlock = 64 << 10;  // small blocks: a few MB of CIFAR make dozens of them

// 1,500 real CIFAR-10 training images (150 per class) in 64 KiB blocks, in `dir`.
std::string BuildCifar(const std::string& dir, int per_class = 150, const std::string& name = "cifar.beton",
                       const std::string& encoding = "default", uint64_t block = kBlock) {
  writer::BuildOptions o;
  o.block_size = block;
  o.encode.encoding = encoding;
  o.log = [](const std::string&) {};
  const std::string out = dir + "/" + name;
  writer::Build(test::SubsetTree(per_class), out, o);
  return out;
}

// Sum of the sizes of the block files under a cache folder.
uint64_t CachedBlockBytes(const std::string& dir) {
  uint64_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file(ec) && e.path().filename().string().rfind("block-", 0) == 0) n += e.file_size(ec);
  return n;
}

// How many times each "METHOD URI RANGE" was asked for, in the server's requests from the `from`-th on.
std::map<std::string, int> RangesAsked(const NginxServer& server, size_t from = 0) {
  std::map<std::string, int> asked;
  const auto log = server.Requests();
  for (size_t i = from; i < log.size(); ++i) ++asked[log[i].substr(0, log[i].rfind(' ', log[i].rfind(' ') - 1))];
  return asked;
}

LoaderOptions CifarOptions(Order order, const std::string& cache, uint64_t budget) {
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.batch_size = 100;
  o.threads = 2;
  o.order = order;
  o.seed = 11;
  o.cache_dir = cache;
  o.cache_budget = budget;
  return o;
}

// Per-epoch digests of `epochs` epochs; `between(loader, batch index)` runs after each batch.
std::vector<std::string> Digests(const std::string& path, const LoaderOptions& o, int epochs,
                                 const std::function<void(const Loader&, uint64_t)>& after = {}) {
  Loader loader(path, o);
  std::vector<std::string> out;
  for (int e = 0; e < epochs; ++e) {
    BatchDigest d;
    uint64_t k = 0;
    for (const Batch& b : loader.epoch(uint64_t(e))) {
      d.Add(b);
      if (after) after(loader, k++);
    }
    out.push_back(d.Hex());
  }
  return out;
}

TEST(Stream, CifarBatchesMatchLocalAndSecondRunUsesCache) {
  SKIP_WITHOUT_NGINX();
  const std::string served = test::ScratchDir("-served"), cache = test::ScratchDir("-cache");
  const std::string file = BuildCifar(served);
  NginxServer server(served);
  const std::string url = server.Url("cifar.beton");
  const uint64_t size = fs::file_size(file);
  for (Order order : {Order::kQuasiRandom, Order::kRandom}) {
    SCOPED_TRACE(order == Order::kQuasiRandom ? "quasi_random" : "random");
    const auto local = Digests(file, CifarOptions(order, "", 256 << 20), 2);
    fs::remove_all(cache);
    const size_t before = server.Requests().size();
    EXPECT_EQ(Digests(url, CifarOptions(order, cache, 256 << 20), 2), local);
    // Cold: each block fetched once for both epochs (the cache holds the file), plus the header and tail.
    uint64_t fetched = 0;
    for (size_t i = before; i < server.Requests().size(); ++i) fetched += std::stoull(server.Requests()[i].substr(server.Requests()[i].rfind(' ') + 1));
    EXPECT_LE(fetched, size + size / 20) << "bytes fetched for a " << size << "-byte file";
    EXPECT_GE(fetched, size - 4096 - 64);
    // A second run: the header page alone comes from the server, the rest from the cache.
    const size_t mid = server.Requests().size();
    EXPECT_EQ(Digests(url, CifarOptions(order, cache, 256 << 20), 1)[0], local[0]);
    const auto log = server.Requests();
    ASSERT_EQ(log.size(), mid + 1) << "a run on a warm cache sent more than the header request; last: " << log.back();
    EXPECT_NE(log.back().find("bytes=0-4095 206"), std::string::npos) << log.back();
  }
}

// 40 classes of the photos, shrunk to 200 px, in 64 KiB blocks (a few photos each), in `dir`.
std::string BuildPhotos(const std::string& dir, const std::string& jpeg_tables = "shared") {
  const std::string photos = test::PhotosTree(DSC_PHOTOS);
  EXPECT_FALSE(photos.empty());
  const std::string tree = test::ScratchDir("-tree");
  int n = 0;
  for (const auto& cls : fs::directory_iterator(photos)) {
    if (!cls.is_directory() || n >= 40) continue;
    fs::create_directory_symlink(cls.path(), tree + "/" + cls.path().filename().string());
    ++n;
  }
  writer::BuildOptions bo;
  bo.block_size = 64 << 10;
  bo.encode.max_resolution = 200;
  bo.jpeg_tables = jpeg_tables;
  bo.log = [](const std::string&) {};
  writer::Build(tree, dir + "/photos.beton", bo);
  return dir + "/photos.beton";
}

LoaderOptions PhotoOptions(const std::string& cache) {
  LoaderOptions o = LoaderOptions::ImagenetTrain();
  o.augment.out_w = o.augment.out_h = 64;
  o.batch_size = 8;
  o.threads = 2;
  o.order = Order::kQuasiRandom;
  o.cache_dir = cache;
  o.cache_budget = 3 * kBlock;  // less than half the file
  return o;
}

TEST(Stream, PhotosMatchLocal) {
  SKIP_WITHOUT_NGINX();
  const std::string served = test::ScratchDir("-served");
  const std::string file = BuildPhotos(served);
  NginxServer server(served);
  const LoaderOptions o = PhotoOptions(test::ScratchDir("-cache"));
  ASSERT_GT(fs::file_size(file), 2 * o.cache_budget);
  EXPECT_EQ(Digests(server.Url("photos.beton"), o, 2), Digests(file, o, 2));
  EXPECT_LE(CachedBlockBytes(o.cache_dir), o.cache_budget);
}

TEST(Stream, CacheBudgetBelowFileSizeHolds) {
  SKIP_WITHOUT_NGINX();
  const std::string served = test::ScratchDir("-served"), cache = test::ScratchDir("-cache");
  const std::string file = BuildCifar(served);
  NginxServer server(served);
  const uint64_t budget = 3 * kBlock;
  ASSERT_GT(fs::file_size(file), 2 * budget);
  for (Order order : {Order::kQuasiRandom, Order::kRandom}) {
    const auto local = Digests(file, CifarOptions(order, "", 256 << 20), 1);
    uint64_t most = 0;
    const auto streamed = Digests(server.Url("cifar.beton"), CifarOptions(order, cache, budget), 1,
                                  [&](const Loader&, uint64_t) { most = std::max(most, CachedBlockBytes(cache)); });
    EXPECT_EQ(streamed, local);
    EXPECT_GT(most, 0u);
    EXPECT_LE(most, budget);
    EXPECT_LE(CachedBlockBytes(cache), budget);
  }
  // Below two blocks, streaming cannot work: a clear error, before any batch.
  try {
    Loader l(server.Url("cifar.beton"), CifarOptions(Order::kRandom, cache, kBlock));
    FAIL() << "a one-block budget was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cache_budget"), std::string::npos) << e.what();
  }
}

// The bench's geometry shrunk: 5 samples a block (raw 32x32 in 16 KiB blocks), batches of 16 (up to
// 16 blocks each), quasi_random windows of 64 samples (13 blocks), and a budget of 16 blocks: one
// batch's blocks fit, the ring's (prefetch 3: four batches, across two windows) do not. Blocks fetched
// for batches ahead must not be evicted before their use: prefetches wait for room, and each block
// comes once.
TEST(Stream, BudgetBelowTheRingFetchesEachBlockOnce) {
  SKIP_WITHOUT_NGINX();
  const std::string served = test::ScratchDir("-served"), cache = test::ScratchDir("-cache");
  constexpr uint64_t kSmall = 16 << 10;
  const std::string file = BuildCifar(served, 150, "cifar.beton", "raw", kSmall);
  NginxServer server(served);
  const uint64_t size = fs::file_size(file), budget = 16 * kSmall;
  ASSERT_GT(size, 10 * budget);
  LoaderOptions local = CifarOptions(Order::kQuasiRandom, "", 256 << 20), streamed = CifarOptions(Order::kQuasiRandom, cache, budget);
  local.batch_size = streamed.batch_size = 16;
  const size_t before = server.Requests().size();
  uint64_t most = 0;
  EXPECT_EQ(Digests(server.Url("cifar.beton"), streamed, 1, [&](const Loader&, uint64_t) { most = std::max(most, CachedBlockBytes(cache)); }),
            Digests(file, local, 1));
  uint64_t fetched = 0;
  const auto log = server.Requests();
  for (size_t i = before; i < log.size(); ++i) fetched += std::stoull(log[i].substr(log[i].rfind(' ') + 1));
  // The goal is 1.05x; here only the epoch's padding fetches its first blocks again (1.013x), so a
  // budget that counts blocks by content rather than by their pages in the cache shows.
  EXPECT_LE(fetched, size + size / 40) << "bytes fetched in one epoch of a " << size << "-byte file, budget " << budget;
  EXPECT_LE(most, budget);
}

TEST(Stream, ServerStoppedMidEpochRecovers) {
  SKIP_WITHOUT_NGINX();
  const std::string served = test::ScratchDir("-served"), cache = test::ScratchDir("-cache");
  const std::string file = BuildCifar(served);
  NginxServer server(served);
  const auto local = Digests(file, CifarOptions(Order::kRandom, "", 256 << 20), 1);
  std::thread restart;
  const auto streamed = Digests(server.Url("cifar.beton"), CifarOptions(Order::kRandom, cache, 4 * kBlock), 1,
                                [&](const Loader&, uint64_t k) {
                                  if (k != 3) return;
                                  server.Stop();  // mid-epoch, with blocks still to fetch
                                  restart = std::thread([&] {
                                    std::this_thread::sleep_for(std::chrono::milliseconds(400));
                                    server.Start();
                                  });
                                });
  restart.join();
  EXPECT_EQ(streamed, local);
}

TEST(Stream, FileReplacedOnServerIsAnError) {
  SKIP_WITHOUT_NGINX();
  const std::string served = test::ScratchDir("-served"), cache = test::ScratchDir("-cache");
  BuildCifar(served);
  const std::string other = BuildCifar(test::ScratchDir("-other"), 140);  // another file of similar size
  NginxServer server(served);
  const std::string url = server.Url("cifar.beton");
  std::string message;
  uint64_t batches = 0;
  try {
    Digests(url, CifarOptions(Order::kRandom, cache, 4 * kBlock), 1, [&](const Loader&, uint64_t k) {
      batches = k + 1;
      if (k == 2) fs::rename(other, served + "/cifar.beton");  // atomically, as a deploy would
    });
  } catch (const Error& e) {
    message = e.what();
  }
  ASSERT_FALSE(message.empty()) << "the epoch finished on a file replaced mid-run (" << batches << " batches)";
  EXPECT_NE(message.find(url), std::string::npos) << message;
  EXPECT_TRUE(test::RegexSearch(message, "block [0-9]+").size() == 1) << message;
  EXPECT_NE(message.find("changed on the server"), std::string::npos) << message;
  // A new run opens the new file under its own cache key: its batches are the new file's.
  const auto fresh = Digests(url, CifarOptions(Order::kRandom, cache, 4 * kBlock), 1);
  EXPECT_EQ(fresh, Digests(served + "/cifar.beton", CifarOptions(Order::kRandom, "", 4 * kBlock), 1));
}

// FFCV's own files (its writer's output) stream as dsc's do: the local file's batches, the padding
// before the first page never fetched, a second run from the cache, and a file replaced on the server
// an error naming the URL and the page, never its old pages mixed with new ones.
TEST(Stream, FfcvFilesStreamAsTheirLocalCopy) {
  SKIP_WITHOUT_NGINX();
  const std::string served = test::ScratchDir("-ffcv"), cache = test::ScratchDir("-cache");
  ASSERT_EQ(std::system(("zstd -dc " DSC_FFCV_SAMPLES " | tar -x -C " + served).c_str()), 0);
  NginxServer server(served + "/ffcv-samples");
  for (const std::string name : {"cifar-test-smart.beton", "allfields.beton"}) {
    SCOPED_TRACE(name);
    const std::string file = served + "/ffcv-samples/" + name, url = server.Url(name);
    LoaderOptions o = name[0] == 'c' ? LoaderOptions::CifarTrain() : LoaderOptions::ImagenetTest();
    if (name[0] == 'a') o.augment.resize = 40, o.augment.out_w = o.augment.out_h = 32;  // its photos differ in size
    o.batch_size = 50;
    o.threads = 2;
    o.order = Order::kQuasiRandom;
    o.seed = 5;
    o.cache_dir = cache;
    o.cache_budget = 20 << 20;  // two of its 8 MiB pages
    const auto local = Digests(file, o, 2);
    const size_t before = server.Requests().size();
    EXPECT_EQ(Digests(url, o, 2), local);
    const auto lay = [&] {
      auto src = OpenSource(file, {});
      return format::ffcv::File::ReadLayout(src.get());
    }();
    ASSERT_GT(lay.pages, 0u);
    uint64_t fetched = 0;
    const auto log = server.Requests();
    for (size_t i = before; i < log.size(); ++i) {
      fetched += std::stoull(log[i].substr(log[i].rfind(' ') + 1));
      const auto range = test::RegexSearch(log[i], "bytes=([0-9]+)-([0-9]+)");
      ASSERT_EQ(range.size(), 3u) << log[i];
      const uint64_t first = std::stoull(range[1]), last = std::stoull(range[2]);
      EXPECT_FALSE(first < lay.data_start && last >= lay.metadata_end) << "the padding before the first page was fetched: " << log[i];
    }
    const uint64_t size = fs::file_size(file), padding = lay.data_start - lay.metadata_end;
    EXPECT_LE(fetched, size - padding + 4096) << "each page fetched once, and the header, metadata and allocation table";
    const size_t mid = server.Requests().size();
    EXPECT_EQ(Digests(url, o, 1)[0], local[0]);
    ASSERT_EQ(server.Requests().size(), mid + 1) << "a run on a warm cache sent more than the header request";
  }
  // Replaced on the server after opening (one byte of the first page changed, as a rebuild would):
  // reading that page is an error naming the URL and the page, and a new source reads the new bytes.
  const std::string name = "cifar-test-smart.beton", file = served + "/ffcv-samples/" + name, url = server.Url(name);
  auto local = OpenSource(file, {});
  const format::ffcv::Layout lay = format::ffcv::File::ReadLayout(local.get());
  stream::StreamOptions so;
  so.cache_dir = test::ScratchDir("-cache2");
  so.budget = 20 << 20;
  const auto old_src = stream::OpenUrlSource(url, so);
  std::vector<uint8_t> bytes = test::ReadFile(file), scratch;
  bytes[lay.data_start] ^= 0xff;
  test::WriteFile(file + ".new", bytes);
  fs::rename(file + ".new", file);
  std::string message;
  try {
    old_src->Read(lay.data_start, 64, &scratch);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find(url), std::string::npos) << message;
  EXPECT_NE(message.find("page 0"), std::string::npos) << message;
  EXPECT_NE(message.find("changed on the server"), std::string::npos) << message;
  const auto new_src = stream::OpenUrlSource(url, so);
  EXPECT_EQ(new_src->Read(lay.data_start, 1, &scratch)[0], bytes[lay.data_start]);
  // dsc convert of the URL writes the file that converting the local copy writes, byte for byte: the
  // typed conversion (allfields) and the image-and-label one (the CIFAR file, JPEG and raw samples).
  for (const std::string ffcv : {"allfields.beton", name.c_str()}) {
    const std::string out = test::ScratchDir("-convert");
    std::string log;
    ASSERT_EQ(test::RunShell(std::string(DSC_BINARY) + " convert " + server.Url(ffcv) + " " + out + "/url.beton --quiet --cache-dir " +
                                 so.cache_dir + " 2>&1 && " + DSC_BINARY + " convert " + served + "/ffcv-samples/" + ffcv + " " + out +
                                 "/file.beton --quiet 2>&1", &log), 0) << log;
    EXPECT_EQ(test::ReadFile(out + "/url.beton"), test::ReadFile(out + "/file.beton")) << ffcv;
    fs::remove_all(out);
  }
  // A copy cut short (an interrupted download) is named truncated, from the URL as from the disk, by
  // every command; dsc convert writes nothing.
  bytes.resize(12 << 20);
  test::WriteFile(served + "/ffcv-samples/cut.beton", bytes);
  const std::string out = test::ScratchDir("-cut");
  for (const std::string& path : {server.Url("cut.beton"), served + "/ffcv-samples/cut.beton"})
    for (const std::string cmd : {"info", "verify", "convert"}) {
      std::string log;
      EXPECT_EQ(test::RunShell(std::string(DSC_BINARY) + " " + cmd + " " + path + (cmd == "convert" ? " " + out + "/c.beton" : "") +
                                   " --cache-dir " + so.cache_dir + " 2>&1", &log), 1) << cmd << " " << path;
      EXPECT_NE(log.find(path + ": "), std::string::npos) << cmd << ": " << log;
      EXPECT_NE(log.find("truncated: the file is 12582912 bytes, but its header puts the allocation table (written last) at byte 16777216"),
                std::string::npos) << cmd << ": " << log;
    }
  EXPECT_TRUE(fs::is_empty(out));
}

// An FFCV file of many pages (64 KiB each, written as FFCV's writer lays them out by
// tests/ffcv/ffcv_ref.py) converted from its URL within a budget of 8 pages: the converter asks for
// pages ahead and releases those behind, fetches nearly every page once, and writes the local copy's file.
// An FFCV file of scalar fields only has no data pages and can be smaller than the 4 KiB the first
// request asks for: the server's clipped answer is the whole file, and dsc info and verify read it
// from the URL as from the disk, in that one request. A 100-byte cut of it is named truncated.
TEST(Stream, FfcvFilesSmallerThanTheFirstRequestStream) {
  SKIP_WITHOUT_NGINX();
  const std::string served = test::ScratchDir("-served"), cache = test::ScratchDir("-cache");
  // Laid out by hand from docs/ffcv-format.md: header, an IntField and a FloatField, 100 records of
  // 16 bytes, and the (empty) allocation table at the end.
  constexpr uint64_t kSamples = 100, kSize = 24 + 2 * 1041 + kSamples * 16;
  std::vector<uint8_t> b(kSize, 0);
  auto put = [&](size_t at, auto v) { std::memcpy(b.data() + at, &v, sizeof v); };  // little-endian, as FFCV's
  put(0, uint16_t(2)), put(2, uint16_t(2)), put(4, uint32_t(1) << 21), put(8, kSamples), put(16, kSize);
  b[24] = 1, std::memcpy(&b[25], "label", 5);
  b[24 + 1041] = 0, std::memcpy(&b[24 + 1041 + 1], "score", 5);
  for (uint64_t i = 0; i < kSamples; ++i) put(24 + 2 * 1041 + 16 * i, int64_t(i) * 7 - 300), put(24 + 2 * 1041 + 16 * i + 8, double(i) / 4);
  test::WriteFile(served + "/tiny.beton", b);
  test::WriteFile(served + "/cut.beton", std::vector<uint8_t>(b.begin(), b.begin() + 100));
  NginxServer server(served);
  const std::string url = server.Url("tiny.beton");
  for (const std::string cmd : {"info", "verify"}) {
    std::string local, remote;
    ASSERT_EQ(test::RunShell(std::string(DSC_BINARY) + " " + cmd + " " + served + "/tiny.beton 2>&1", &local), 0) << local;
    const size_t before = server.Requests().size();
    ASSERT_EQ(test::RunShell(std::string(DSC_BINARY) + " " + cmd + " " + url + " --cache-dir " + cache + " 2>&1", &remote), 0) << remote;
    EXPECT_EQ(server.Requests().size(), before + 1) << cmd;
    for (size_t at; (at = local.find(served + "/tiny.beton")) != std::string::npos;) local.replace(at, served.size() + 11, url);
    EXPECT_EQ(remote, local) << cmd;
  }
  std::string out;
  EXPECT_EQ(test::RunShell(std::string(DSC_BINARY) + " info " + server.Url("cut.beton") + " --cache-dir " + cache + " 2>&1", &out), 1);
  EXPECT_NE(out.find(server.Url("cut.beton") + ": FFCV file: truncated: the file is 100 bytes, but its header puts the allocation "
                     "table (written last) at byte 3706"), std::string::npos) << out;
}

TEST(Stream, FfcvConvertFetchesEachPageOnceWithinTheBudget) {
  SKIP_WITHOUT_NGINX();
  const std::string served = test::ScratchDir("-served"), out = test::ScratchDir("-out");
  std::string log;
  ASSERT_EQ(test::RunShell("/usr/bin/python3 -c \"import sys; sys.path.insert(0, '" DSC_SOURCE_DIR "/tests/ffcv'); import ffcv_ref; "
                           "ffcv_ref.tree('" + test::SubsetTree(150) + "', '" + served + "/pages.beton', 1 << 16)\" 2>&1", &log), 0) << log;
  const auto src = OpenSource(served + "/pages.beton", {});
  const format::ffcv::Layout lay = format::ffcv::File::ReadLayout(src.get());
  ASSERT_GT(lay.pages, 16u);
  NginxServer server(served);
  ASSERT_EQ(test::RunShell(std::string(DSC_BINARY) + " convert " + server.Url("pages.beton") + " " + out + "/url.beton --quiet --cache-dir " +
                               out + "/cache --cache-budget " + std::to_string(8 * lay.page_size) + " 2>&1 && " + DSC_BINARY + " convert " +
                               served + "/pages.beton " + out + "/file.beton --quiet 2>&1", &log), 0) << log;
  EXPECT_EQ(test::ReadFile(out + "/url.beton"), test::ReadFile(out + "/file.beton"));
  // The writer's threads load samples out of order within a few pages, so a released page can be asked
  // for again (twice, seen under ASan's timing); never more, and the rest once.
  const auto asked = RangesAsked(server);
  size_t again = 0;
  for (const auto& [range, n] : asked) {
    EXPECT_LE(n, 2) << range;
    again += n > 1;
  }
  EXPECT_LE(again, 3u) << "pages fetched twice";
  EXPECT_EQ(asked.size(), lay.pages + 3) << "the first page, the metadata, the allocation table and each page";
  EXPECT_LE(CachedBlockBytes(out + "/cache"), 8 * lay.page_size);
  // dsc verify reads in one thread, in order: each sample's payload is checked while its page is held,
  // so each page is fetched exactly once.
  for (const std::string extra : {"", " --decode"}) {
    const std::string cache = test::ScratchDir("-verify-cache");
    const size_t before = server.Requests().size();
    ASSERT_EQ(test::RunShell(std::string(DSC_BINARY) + " verify " + server.Url("pages.beton") + " --cache-dir " + cache +
                                 " --cache-budget " + std::to_string(8 * lay.page_size) + extra + " 2>&1", &log), 0) << log;
    EXPECT_NE(log.find("OK (FFCV file: 1500 samples"), std::string::npos) << log;
    const auto verified = RangesAsked(server, before);
    for (const auto& [range, n] : verified) EXPECT_EQ(n, 1) << range << extra;
    EXPECT_EQ(verified.size(), lay.pages + 3) << extra;
    EXPECT_LE(CachedBlockBytes(cache), 8 * lay.page_size) << extra;
  }
}

TEST(Stream, ErrorsNameUrlBlockAndAnswer) {
  SKIP_WITHOUT_NGINX();
  const std::string served = test::ScratchDir("-served"), cache = test::ScratchDir("-cache");
  BuildCifar(served, 20);
  NginxServer server(served);
  stream::StreamOptions so;
  so.cache_dir = cache;
  so.budget = 4 * kBlock;
  so.http.attempts = 2;
  so.http.backoff_ms = 10;
  try {
    stream::OpenUrlSource(server.Url("missing.beton"), so);
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(server.Url("missing.beton") + ": header"), std::string::npos) << m;
    EXPECT_NE(m.find("HTTP 404"), std::string::npos) << m;
  }
  // An empty file: nginx answers 200 with no bytes, which is a short file, not a server without ranges.
  { std::ofstream(served + "/empty.beton"); }
  try {
    stream::OpenUrlSource(server.Url("empty.beton"), so);
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(server.Url("empty.beton") + ": header"), std::string::npos) << m;
    EXPECT_NE(m.find("file is 0 bytes, fewer than the 4096 asked for"), std::string::npos) << m;
  }
  auto src = stream::OpenUrlSource(server.Url("cifar.beton"), so);
  server.Stop();
  std::vector<uint8_t> scratch;
  try {
    src->Read(4096, 100, &scratch);
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(server.Url("cifar.beton") + ": block 0"), std::string::npos) << m;
    EXPECT_NE(m.find("no answer"), std::string::npos) << m;
    EXPECT_NE(m.find("after 2 attempts"), std::string::npos) << m;
  }
}

// dsc verify of a URL asks for blocks ahead of the one it checks and releases each once checked: with
// a budget of three blocks, every block is fetched exactly once and the cache folder stays within it.
TEST(Stream, VerifyFetchesEachBlockOnceWithinTheBudget) {
  SKIP_WITHOUT_NGINX();
  const std::string served = test::ScratchDir("-served"), cache = test::ScratchDir("-cache");
  constexpr uint64_t kSmall = 16 << 10;
  BuildCifar(served, 150, "cifar.beton", "default", kSmall);
  NginxServer server(served);
  stream::StreamOptions so;
  so.cache_dir = cache;
  so.budget = 3 * kSmall;
  auto src = stream::OpenUrlSource(server.Url("cifar.beton"), so);
  const size_t blocks = format::FileView::Open(src.get())->block_count();
  ASSERT_GT(blocks, 8u);  // more than the verifier asks for ahead
  const auto problems = format::VerifyFile(*src);
  EXPECT_TRUE(problems.empty()) << format::Describe(problems.front());
  EXPECT_EQ(stream::CountersOf(*src).blocks_fetched, blocks);
  EXPECT_LE(CachedBlockBytes(cache), so.budget);
}

// dsc verify checks each sample's payload (and with --decode decodes it) while the block pass holds
// its block: with a cache budget of three blocks, every block range is asked for once, not once for
// the blocks and again for the samples, and the cache folder stays within the budget.
TEST(Stream, VerifyCommandFetchesEachBlockOnce) {
  SKIP_WITHOUT_NGINX();
  const std::string served = test::ScratchDir("-served");
  constexpr uint64_t kSmall = 16 << 10;
  const std::string file = BuildCifar(served, 150, "cifar.beton", "default", kSmall);
  NginxServer server(served);
  const size_t blocks = Dataset(file).view().block_count();
  ASSERT_GT(blocks, 8u);
  for (const std::string extra : {"", " --decode", " --decode --decoder gpu-twin"}) {
    const std::string cache = test::ScratchDir("-cache");
    const size_t before = server.Requests().size();
    std::string out;
    ASSERT_EQ(test::RunShell(std::string(DSC_BINARY) + " verify " + server.Url("cifar.beton") + " --cache-dir " + cache +
                                 " --cache-budget " + std::to_string(3 * kSmall) + extra + " 2>&1", &out), 0) << out;
    EXPECT_NE(out.find("OK (1500 samples"), std::string::npos) << out;
    const auto asked = RangesAsked(server, before);
    for (const auto& [range, n] : asked) EXPECT_EQ(n, 1) << range << extra;
    EXPECT_EQ(asked.size(), blocks + 2) << extra;  // the header page, the index copy and each block
    EXPECT_LE(CachedBlockBytes(cache), 3 * kSmall) << extra;
  }
}

TEST(Stream, CommandLineTakesUrls) {
  SKIP_WITHOUT_NGINX();
  const std::string served = test::ScratchDir("-served"), cache = test::ScratchDir("-cache");
  BuildCifar(served, 20);
  NginxServer server(served);
  const std::string url = server.Url("cifar.beton");
  std::string out;
  ASSERT_EQ(test::RunShell("DSC_CACHE_DIR=" + cache + " " + DSC_BINARY + " info " + url + " 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("200 samples"), std::string::npos) << out;
  ASSERT_EQ(test::RunShell("DSC_CACHE_DIR=" + cache + " " + DSC_BINARY + " verify " + url + " 2>&1", &out), 0) << out;
  ASSERT_EQ(test::RunShell(std::string(DSC_BINARY) + " bench " + url + " --cache-dir " + cache +
                               " --epochs 1 --batch-size 50 --threads 1 2>&1", &out), 0) << out;
  // dsc export takes the cache folder too: the samples' blocks land there, and the images are the local file's.
  const std::string cache2 = test::ScratchDir("-cache2"), look = test::ScratchDir("-look");
  ASSERT_EQ(test::RunShell(std::string(DSC_BINARY) + " export " + url + " --cache-dir " + cache2 + " --index 7 --count 3 --out " + look +
                               "/url 2>&1 && " + DSC_BINARY + " export " + served + "/cifar.beton --index 7 --count 3 --out " + look + "/file",
                           &out), 0) << out;
  EXPECT_GT(CachedBlockBytes(cache2), 0u);
  for (const char* png : {"/00000007.png", "/00000009.png", "/labels.tsv"})
    EXPECT_EQ(test::ReadFile(look + "/url" + png), test::ReadFile(look + "/file" + png)) << png;
  // dsc train (built with libtorch): both splits from the URL, through its --cache-dir.
  if (test::RunShell(std::string(DSC_BINARY) + " train --help > /dev/null 2>&1") == 0) {
    const std::string cache3 = test::ScratchDir("-cache3");
    ASSERT_EQ(test::RunShell(std::string(DSC_BINARY) + " train " + url + " --test " + url + " --cache-dir " + cache3 +
                                 " --epochs 1 --limit 100 --test-limit 50 --batch-size 50 2>&1", &out), 0) << out;
    EXPECT_NE(out.find("parameter checksum"), std::string::npos) << out;
    EXPECT_GT(CachedBlockBytes(cache3), 0u);
  }
}

// s3rver (npm) on loopback: an S3-compatible store. It checks that the access key exists but not the
// V4 signature itself (its source says so), so the signing is tested against AWS's published
// examples (tests/sigv4_test.cc) and this test covers addressing, ranges, ETags and refusals.
std::string S3rver() {
  for (const char* p : {"/usr/lib/node_modules/s3rver/bin/s3rver.js", "/usr/local/lib/node_modules/s3rver/bin/s3rver.js"})
    if (::access(p, R_OK) == 0 && ::access("/usr/bin/node", X_OK) == 0) return p;
  return "";
}

TEST(Stream, S3Loopback) {
  if (S3rver().empty()) GTEST_SKIP() << "s3rver is not installed (npm install -g s3rver): no S3 loopback test";
  const std::string served = test::ScratchDir("-served"), data = test::ScratchDir("-s3"), cache = test::ScratchDir("-cache");
  const std::string file = BuildCifar(served, 20);
  const std::string port = std::to_string(test::FreeLoopbackPort());
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/usr/bin/node", "node", S3rver().c_str(), "-d", data.c_str(), "-a", "127.0.0.1", "-p", port.c_str(), "--configure-bucket",
            "dsc-test", "-s", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  struct Reap {
    pid_t pid;
    ~Reap() {
      ::kill(pid, SIGTERM);
      int st = 0;
      ::waitpid(pid, &st, 0);
    }
  } reap{pid};
  const std::string endpoint = "http://127.0.0.1:" + port;
  std::string out;
  int rc = 1;
  for (int i = 0; i < 100 && rc != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    rc = test::RunShell("curl -sf --aws-sigv4 aws:amz:us-east-1:s3 --user S3RVER:S3RVER -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -T " + file + " " + endpoint +
                        "/dsc-test/cifar.beton 2>&1", &out);
  }
  ASSERT_EQ(rc, 0) << "could not upload to s3rver: " << out;
  ::setenv("AWS_ENDPOINT_URL", endpoint.c_str(), 1);
  ::setenv("AWS_REGION", "us-east-1", 1);
  ::setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
  const auto local = Digests(file, CifarOptions(Order::kQuasiRandom, "", 256 << 20), 1);
  EXPECT_EQ(Digests("s3://dsc-test/cifar.beton", CifarOptions(Order::kQuasiRandom, cache, 4 * kBlock), 1), local);
  ::setenv("AWS_ACCESS_KEY_ID", "NOT-A-KEY", 1);
  try {
    Loader l("s3://dsc-test/cifar.beton", CifarOptions(Order::kQuasiRandom, cache, 4 * kBlock));
    FAIL() << "wrong credentials were accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("s3://dsc-test/cifar.beton"), std::string::npos) << m;
    EXPECT_NE(m.find("bucket 'dsc-test'"), std::string::npos) << m;
    EXPECT_NE(m.find("HTTP 403"), std::string::npos) << m;
    EXPECT_NE(m.find("InvalidAccessKeyId"), std::string::npos) << m;
  }
}

// dsc serve takes a URL: a CPU machine with no copy of the file decodes for a loader, which gets the
// local run's batches.
TEST(Stream, RemoteWorkerServesAUrl) {
  SKIP_WITHOUT_NGINX();
  std::string out;
  if (test::RunShell(std::string(DSC_BINARY) + " serve --help 2>&1", &out) != 0) GTEST_SKIP() << "dsc was built without gRPC: no dsc serve";
  const std::string served = test::ScratchDir("-served"), cache = test::ScratchDir("-cache");
  const std::string file = BuildCifar(served, 20);
  NginxServer server(served);
  const std::string url = server.Url("cifar.beton"), log = cache + "/serve.log";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("DSC_CACHE_DIR", (cache + "/unused").c_str(), 1);  // --cache-dir wins
    if (!std::freopen(log.c_str(), "w", stdout)) ::_exit(126);
    const std::string worker_cache = cache + "/worker";
    ::execl(DSC_BINARY, DSC_BINARY, "serve", url.c_str(), "--listen", "127.0.0.1:0", "--threads", "1", "--cache-dir", worker_cache.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  struct Reap {
    pid_t pid;
    ~Reap() {
      ::kill(pid, SIGTERM);
      int st = 0;
      ::waitpid(pid, &st, 0);
    }
  } reap{pid};
  std::string address;
  for (int i = 0; i < 200 && address.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!fs::exists(log)) continue;  // the child has not opened it yet
    const std::vector<uint8_t> text = test::ReadFile(log);
    const auto m = test::RegexSearch(std::string(text.begin(), text.end()), "listening on (127\\.0\\.0\\.1:[0-9]+)");
    if (m.size() == 2) address = m[1];
  }
  ASSERT_FALSE(address.empty()) << "dsc serve did not start";
  auto digest = [&](const std::string& args) {
    std::string o;
    EXPECT_EQ(test::RunShell(std::string(DSC_BINARY) + " bench " + args + " --preset cifar-test --batch-size 50 --epochs 1 --digest 2>&1", &o), 0) << o;
    const auto m = test::RegexSearch(o, "epoch 0 digest ([0-9a-f]{32})");
    return m.size() == 2 ? m[1] : "none: " + o;
  };
  EXPECT_EQ(digest(url + " --cache-dir " + cache + "/loader --remote " + address + " --local-threads 0"), digest(file));
  EXPECT_GT(CachedBlockBytes(cache + "/worker"), 0u) << "the worker read the blocks it decoded through its --cache-dir";
  EXPECT_FALSE(fs::exists(cache + "/unused"));
}

// Samples that fail to decode (their bytes damaged, the checksums made right again, so the blocks are
// served and pass) end the epoch with a sample's error, while the other worker waits for a batch the
// readahead will not ask for (past the budget, and the consumer releases no more batches): cancelling
// the job must wake it.
TEST(Stream, SampleErrorEndsTheEpochWithoutHanging) {
  SKIP_WITHOUT_NGINX();
  const std::string served = test::ScratchDir("-served"), cache = test::ScratchDir("-cache");
  const std::string file = BuildPhotos(served, "inline");  // each payload starts with its JPEG's SOI marker
  std::vector<uint8_t> bytes = test::ReadFile(file);
  std::set<uint64_t> victims;  // every third photo
  {
    auto src = OpenMmapSource(file);
    auto view = format::FileView::Open(src.get());
    for (uint64_t i = 0; i < view->sample_count(); i += 3) {
      const format::IndexEntry e = view->entry(i);
      ASSERT_EQ(bytes[e.offset], 0xFF);
      bytes[e.offset] = 0;  // no SOI: not a JPEG
      victims.insert(i);
    }
  }
  fuzz::FixupChecksums(bytes.data(), bytes.size());
  test::WriteFile(file, bytes);
  NginxServer server(served);
  const std::string url = server.Url("photos.beton");
  const int rc = test::RunForked(60, [&] {
    for (Order order : {Order::kQuasiRandom, Order::kRandom}) {
      LoaderOptions o = PhotoOptions(cache);
      o.order = order;
      try {
        Digests(url, o, 1);
        return 11;  // no error
      } catch (const Error& e) {
        const auto m = test::RegexSearch(e.what(), "sample ([0-9]+)");
        if (m.size() != 2 || !victims.count(std::stoull(m[1]))) {
          std::fprintf(stderr, "%s\n", e.what());
          return 12;
        }
      }
    }
    return 0;
  });
  EXPECT_EQ(rc, 0) << (rc == -1 ? "hung" : "");
}

// A cache folder that cannot take a block (here: a file-size limit below one block, the stand-in for a
// full disk that a test can set up without privileges) is an error naming the block and the folder,
// not a crash or a partial block.
TEST(Stream, CacheWriteFailureIsAClearError) {
  SKIP_WITHOUT_NGINX();
  const std::string served = test::ScratchDir("-served"), cache = test::ScratchDir("-cache");
  BuildCifar(served, 20);  // its index copy fits in the limit below, a 64 KiB block does not
  NginxServer server(served);
  const std::string url = server.Url("cifar.beton");
  const int rc = test::RunForked(120, [&] {
    ::signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead of killing the process
    rlimit lim{48 << 10, 48 << 10};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 10;
    try {
      Digests(url, CifarOptions(Order::kRandom, cache, 4 * kBlock), 1);
      return 11;  // no error
    } catch (const Error& e) {
      const std::string m = e.what();
      std::fprintf(stderr, "%s\n", m.c_str());
      if (m.find(url + ": block ") == std::string::npos) return 12;
      if (m.find("cannot write it to the cache directory " + cache) == std::string::npos) return 13;
      return 0;
    }
  });
  EXPECT_EQ(rc, 0);
  for (const auto& e : fs::recursive_directory_iterator(cache))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << "a partial block was left: " << e.path();
}

}  // namespace
}  // namespace dsc
