// Bad sources and failing machines: errors naming the file, no partial output, limits checked from
// headers before decoding.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <png.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <chrono>

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

#include "format/error.h"
#include "format/layout.h"
#include "kernels/jpeg_codec.h"
#include "kernels/jpeg_decoder.h"
#include "reader/dataset.h"
#include "reader/decode_rgb.h"
#include "tests/cifar_fixtures.h"
#include "tests/test_util.h"
#include "tests/writer_helpers.h"
#include "writer/build.h"
#include "writer/source.h"

namespace dsc::test {
namespace {

namespace fs = std::filesystem;
using format::Encoding;

TEST(Errors, TheOutputMustNotBeTheSourceOrOneOfItsSamples) {
  // The finished file replaced what the build had read: a manifest, or an image of the tree.
  auto root = SubsetTree(1);
  auto files = TreeFiles(root);
  auto dir = ScratchDir();
  const std::string m = files[0].first + "\t0\n";
  WriteFile(dir + "/list.tsv", m.data(), m.size());
  const std::string image = files[3].first;
  const auto before = ReadFile(image);
  auto expect_refused = [&](const std::string& src, const std::string& out, const std::string& said) {
    try {
      writer::Build(src, out, Opts());
      ADD_FAILURE() << "built " << src << " into " << out;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(said), std::string::npos) << e.what();
    }
  };
  expect_refused(dir + "/list.tsv", dir + "/list.tsv", "list.tsv: is the source itself");
  EXPECT_EQ(ReadFile(dir + "/list.tsv"), std::vector<uint8_t>(m.begin(), m.end()));
  expect_refused(root, image, ": is the source's sample " + image);
  // ... also by another name (a hard link) for the same file
  fs::create_hard_link(image, dir + "/alias.beton");
  expect_refused(root, dir + "/alias.beton", "alias.beton: is the source's sample " + image);
  EXPECT_EQ(ReadFile(image), before);
}

TEST(Errors, MachineFailuresAreNotSampleErrors) {
  // --skip-invalid skips bad samples; out of file descriptors (or memory, or an I/O error) is the
  // machine's failure: skipping on it gave a different file each run.
  auto dir = ScratchDir();
  WriteFile(dir + "/f.jpg", "x", 1);
  EXPECT_THROW(
      {
        try {
          writer::ReadWholeFile(dir + "/missing.jpg");
        } catch (const writer::EnvironmentError&) {
          ADD_FAILURE() << "a missing file is the sample's error";
        }
      },
      Error);
  // No descriptor free: the soft limit at the lowest free one.
  struct rlimit was;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &was), 0);
  const int lowest = ::dup(0);
  ASSERT_GE(lowest, 0);
  ::close(lowest);
  struct rlimit tight = was;
  tight.rlim_cur = rlim_t(lowest);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
  std::exception_ptr caught;
  try {
    writer::ReadWholeFile(dir + "/f.jpg");
  } catch (...) {
    caught = std::current_exception();  // looked at with descriptors again: UBSan's type check needs one
  }
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &was), 0);
  ASSERT_TRUE(caught) << "read with no descriptor free";
  std::string said;
  bool machine = false;
  try {
    std::rethrow_exception(caught);
  } catch (const writer::EnvironmentError& e) {
    machine = true;
    said = e.what();
  } catch (const std::exception& e) {
    said = e.what();
  }
  EXPECT_TRUE(machine) << said;
  EXPECT_NE(said.find("f.jpg: cannot open: Too many open files"), std::string::npos) << said;
}

TEST(Errors, ABuildOutOfDescriptorsStopsEvenWithSkipInvalid) {
  // The build itself, not only the error's class: with --skip-invalid, samples that could not be opened
  // for want of a descriptor were skipped and the file written without them. Every limit from "nothing
  // opens" up to "everything opens" either stops the build or writes every sample.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the build reads its error with no descriptor free: UBSan's vptr check needs one";
#endif
  auto root = SubsetTree(1);
  auto dir = ScratchDir();
  writer::BuildOptions o = Opts("default", 1);
  o.skip_invalid = true;
  std::vector<std::string> logged;
  o.log = [&](const std::string& m) { logged.push_back(m); };
  struct rlimit was;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &was), 0);
  const int lowest = ::dup(0);
  ASSERT_GE(lowest, 0);
  ::close(lowest);
  int written = 0, stopped = 0;
  for (int extra = 0; extra <= 8; ++extra) {
    const std::string out = dir + "/t" + std::to_string(extra) + ".beton";
    logged.clear();
    struct rlimit tight = was;
    tight.rlim_cur = rlim_t(lowest + extra);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
    std::exception_ptr caught;
    writer::BuildReport rep;
    try {
      rep = writer::Build(root, out, o);
    } catch (...) {
      caught = std::current_exception();
    }
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &was), 0);
    for (const auto& m : logged) EXPECT_EQ(m.find("skipped"), std::string::npos) << "limit +" << extra << ": " << m;
    if (caught) {
      ++stopped;
      EXPECT_FALSE(fs::exists(out)) << "limit +" << extra;
    } else {
      ++written;
      EXPECT_EQ(rep.skipped, 0u) << "limit +" << extra;
      EXPECT_EQ(Dataset(out).size(), TreeFiles(root).size()) << "limit +" << extra;
    }
  }
  EXPECT_GT(stopped, 0) << "no limit was tight enough to matter";
  EXPECT_GT(written, 0) << "no limit was loose enough to build";
}

TEST(Errors, EncoderThreadsThatCannotStartAreAnErrorNotAHang) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer runtimes reserve terabytes of address space: no address-space limit applies";
#else
  // A build whose threads could not all start (an address-space or process limit) hung in the pool's
  // constructor: the started threads waited on a condition variable being destroyed.
  auto root = SubsetTree(1);
  auto dir = ScratchDir();
  const int rc = RunForked(30, [&] {
    if (!LimitAddressSpace(48 << 20)) return 99;  // room for a few 8 MiB stacks
    writer::BuildOptions o = Opts();
    o.threads = 64;
    try {
      writer::Build(root, dir + "/t.beton", o);
      return 3;  // every thread started: the limit was too loose to show anything
    } catch (const Error& e) {
      const bool named = std::string(e.what()).find("cannot start 64 encoder threads") != std::string::npos;
      if (!named) std::fprintf(stderr, "said: %s\n", e.what());
      return named ? 0 : 4;
    } catch (...) {
      return 5;
    }
  });
  EXPECT_NE(rc, -1) << "the build hung when its threads could not start";
  EXPECT_EQ(rc, 0) << "3: all threads started; 4: another error; 5: not a dsc::Error; 128+: a signal";
  EXPECT_FALSE(fs::exists(dir + "/t.beton"));
#endif
}

// A few hundred bytes whose SOF claims 13000x13000 pixels (within --max-pixels) made --reencode allocate
// ~510 MB of pixels (and the restart transcode its coefficients) before the data ran out. Any Huffman
// JPEG codes at least one bit per 8x8 block, so the header alone shows this one cannot hold its image.
TEST(Errors, ATinyJpegClaimingAHugeImageIsRefusedFromItsHeader) {
  auto root = SubsetTree(1);
  auto dir = ScratchDir();
  const std::string victim = TreeFiles(root)[3].first;
  std::vector<uint8_t> b = ReadFile(victim);
  size_t sof = 2;
  while (sof + 9 < b.size() && !(b[sof] == 0xFF && b[sof + 1] == 0xC0)) ++sof;
  ASSERT_LT(sof + 9, b.size()) << "no SOF0 in " << victim;
  for (size_t k : {sof + 5, sof + 7}) b[k] = 13000 >> 8, b[k + 1] = 13000 & 0xFF;  // height, width
  fs::remove(victim);  // a symlink to the real file: replace the link, not the file
  WriteFile(victim, b);
  std::string why;
  EXPECT_TRUE(kernels::JpegShorterThanItsSize(b.data(), b.size(), 13000, 13000, &why));
  EXPECT_FALSE(kernels::JpegShorterThanItsSize(b.data(), b.size(), 32, 32, &why));  // its real size fits
  for (bool reencode : {false, true}) {
    auto body = [&] {
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
      if (!LimitAddressSpace(256 << 20)) return 99;  // the pixels of 13000x13000 would not fit
#endif
      writer::BuildOptions o = Opts();
      o.threads = 1;
      o.encode.reencode = reencode;
      try {
        writer::Build(root, dir + "/t.beton", o);
        return 3;
      } catch (const Error& e) {
        const std::string m = e.what();
        const bool named = m.find(victim) != std::string::npos && m.find("declares 13000x13000 pixels") != std::string::npos;
        if (!named) std::fprintf(stderr, "said: %s\n", e.what());
        return named ? 0 : 4;
      } catch (...) {
        return 5;
      }
    };
    const int rc = RunForked(60, body);
    EXPECT_EQ(rc, 0) << "reencode " << reencode << ": 3 built; 4: another error; 5: not a dsc::Error; 128+: a signal";
    EXPECT_FALSE(fs::exists(dir + "/t.beton"));
  }
  // --skip-invalid skips it, named, and stores the rest.
  auto o = Opts();
  o.skip_invalid = true;
  auto rep = writer::Build(root, dir + "/s.beton", o);
  EXPECT_EQ(rep.skipped, 1u);
  EXPECT_EQ(Dataset(dir + "/s.beton").size(), TreeFiles(root).size() - 1);
}

// An allocation that fails inside libjpeg is the machine failing, not the image: it stops the build
// even with --skip-invalid (libjpeg's "Insufficient memory" was a corrupt JPEG, and the build skipped a
// valid image by the moment's memory).
TEST(Errors, ACodecOutOfMemoryStopsTheBuildEvenWithSkipInvalid) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer runtimes reserve terabytes of address space: no address-space limit applies";
#else
  auto dir = ScratchDir();
  const std::string root = dir + "/tree";
  fs::create_directories(root + "/a");
  // 8192x8192 of one colour: a small file whose coefficients (restart transcode) take ~192 MiB, far
  // more than the free memory earlier tests may leave cached in this process.
  const int side = 8192;
  std::vector<uint8_t> rgb(size_t(side) * side * 3, 90);
  tjhandle tj = tjInitCompress();
  unsigned char* jpg = nullptr;
  unsigned long size = 0;
  ASSERT_EQ(tjCompress2(tj, rgb.data(), side, 0, side, TJPF_RGB, &jpg, &size, TJSAMP_420, 90, 0), 0);
  WriteFile(root + "/a/big.jpg", jpg, size);
  tjFree(jpg);
  tjDestroy(tj);
  rgb = {};
  const std::string small = TreeFiles(SubsetTree(1))[0].first;
  fs::copy_file(small, root + "/a/small.jpg");
  auto build = [&](const std::string& out) {
    writer::BuildOptions o = Opts();
    o.threads = 1;
    o.skip_invalid = true;
    return writer::Build(root, out, o);
  };
  ASSERT_EQ(build(dir + "/free.beton").skipped, 0u);  // both images are valid
  const int rc = RunForked(60, [&] {
    if (!LimitAddressSpace(24 << 20)) return 99;
    try {
      const auto rep = build(dir + "/t.beton");
      return rep.skipped ? 3 : 6;  // built: skipped the valid image (the defect), or the limit did not bite
    } catch (const Error& e) {
      const std::string m = e.what();
      const bool named = m.find("big.jpg: out of memory") != std::string::npos;
      if (!named) std::fprintf(stderr, "said: %s\n", e.what());
      return named ? 0 : 4;
    } catch (...) {
      return 5;
    }
  });
  EXPECT_EQ(rc, 0) << "3: the valid image skipped; 4: another error; 5: not a dsc::Error; 6: the limit did not bite";
  EXPECT_FALSE(fs::exists(dir + "/t.beton"));
#endif
}

// cjpeg writes valid JPEGs with sampling factors TurboJPEG 2.1 cannot decode (4x2 luma, mixed
// chroma): the build named them "not a readable JPEG" with TurboJPEG's words; it says what is wrong.
TEST(Errors, AJpegOfUnsupportedSamplingIsNamedAsSuch) {
  auto dir = ScratchDir();
  fs::create_directories(dir + "/tree/a");
  std::string ppm = "P6\n24 16\n255\n";
  for (int i = 0; i < 24 * 16 * 3; ++i) ppm += char(i * 7 % 251);
  WriteFile(dir + "/in.ppm", ppm.data(), ppm.size());
  std::string out;
  ASSERT_EQ(RunShell("cjpeg -sample 4x2 " + dir + "/in.ppm > " + dir + "/tree/a/x.jpg 2>&1", &out), 0) << out;
  try {
    writer::Build(dir + "/tree", dir + "/t.beton", Opts());
    ADD_FAILURE() << "built";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("x.jpg: a JPEG with chroma sampling factors TurboJPEG cannot decode"), std::string::npos) << m;
  }
  EXPECT_FALSE(fs::exists(dir + "/t.beton"));
}

TEST(Errors, CorruptJpegNamesTheFileAndLeavesNoTarget) {
  auto root = SubsetTree(3);
  auto files = TreeFiles(root);
  auto bad = files[5].first;
  auto bytes = ReadFile(bad);
  fs::remove(bad);  // replace the symlink with a truncated copy
  bytes.resize(bytes.size() / 2);
  WriteFile(bad, bytes);
  auto dir = ScratchDir();
  WriteFile(dir + "/out.beton", "old contents", 12);
  try {
    writer::Build(root, dir + "/out.beton", Opts());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
  EXPECT_EQ(ReadFile(dir + "/out.beton").size(), 12u);  // the previous file is untouched
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  std::vector<std::string> log;
  auto o = Opts();
  o.skip_invalid = true;
  o.log = [&](const std::string& s) { log.push_back(s); };
  auto rep = writer::Build(root, dir + "/out.beton", o);
  EXPECT_EQ(rep.skipped, 1u);
  EXPECT_EQ(rep.samples, files.size() - 1);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find(bad), std::string::npos);
  Dataset ds(dir + "/out.beton");
  EXPECT_EQ(ds.meta().skipped_count, 1u);
}

TEST(Errors, KilledBuildLeavesNothingBehind) {
  auto train = LoadCifar(100, "train"), test = LoadCifar(10, "test");
  auto root = SubsetTree(300);
  auto dir = ScratchDir();
  fs::create_directories(dir + "/out");
  std::mt19937 rng(1234);
  int finished = 0, killed = 0, leftovers = 0;
  for (int trial = 0; trial < 20; ++trial) {
    pid_t pid = ::fork();
    if (pid == 0) {
      auto o = Opts("jpeg", 1);
      o.encode.reencode = true;
      try {
        writer::Build(root, dir + "/out/x.beton", o);
      } catch (...) {
      }
      ::_exit(0);
    }
    ::usleep(useconds_t(rng() % 150000));
    ::kill(pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
    (WIFSIGNALED(st) ? killed : finished) += 1;
    // Either the build finished (a complete, valid file) or no target is there. A kill inside the
    // microseconds between naming the finished file and renaming it may leave one hidden, complete
    // leftover (atomic_file.h); the next writer of the target removes it.
    bool leftover = false;
    for (const auto& e : fs::directory_iterator(dir + "/out")) {
      const std::string name = e.path().filename().string();
      if (name.rfind(".x.beton.dsc-tmp-", 0) == 0) {
        leftover = true;
        ++leftovers;
        continue;
      }
      ASSERT_EQ(name, "x.beton") << "left behind: " << e.path();
      EXPECT_NO_THROW(Dataset(e.path().string(), {.verify = true}));
      fs::remove(e.path());
    }
    if (leftover) {
      writer::Build(root, dir + "/out/x.beton", Opts("raw"));
      for (const auto& e : fs::directory_iterator(dir + "/out"))
        ASSERT_EQ(e.path().filename(), "x.beton") << "the next build left: " << e.path();
      fs::remove(dir + "/out/x.beton");
    }
  }
  std::printf("kill -9 trials: %d killed mid-build, %d finished first, %d left a hidden leftover (removed by the next build)\n",
              killed, finished, leftovers);
  EXPECT_GT(killed, 5);
}

TEST(Errors, FullDiskIsAClearErrorAndLeavesNoTarget) {
  auto root = SubsetTree(30);
  auto dir = ScratchDir();
  // A file-size limit makes every write past 64 KiB fail with EFBIG, as a full disk fails with ENOSPC.
  pid_t pid = ::fork();
  if (pid == 0) {
    struct rlimit lim = {65536, 65536};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    ::signal(SIGXFSZ, SIG_IGN);
    try {
      writer::Build(root, dir + "/x.beton", Opts("raw"));
      ::_exit(3);
    } catch (const Error& e) {
      std::string m = e.what();
      ::_exit(m.find("x.beton") != std::string::npos && m.find("write failed") != std::string::npos ? 0 : 4);
    }
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "3: the build succeeded, 4: the message did not name the file and the write";
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 0);
}

TEST(Errors, RealFullTmpfsIsAClearErrorAndLeavesNothing) {
  auto root = SubsetTree(30);
  auto dir = ScratchDir() + "/small";
  fs::create_directories(dir);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=256k") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno) << "); the RLIMIT_FSIZE test covers the write path";
  std::string msg;
  try {
    writer::Build(root, dir + "/x.beton", Opts("raw"));  // 300 x 3 KiB does not fit in 256 KiB
  } catch (const Error& e) {
    msg = e.what();
  }
  const auto left = std::distance(fs::directory_iterator(dir), fs::directory_iterator());
  ::umount2(dir.c_str(), MNT_DETACH);
  EXPECT_NE(msg.find("x.beton"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No space left on device"), std::string::npos) << msg;
  EXPECT_EQ(left, 0) << "a full disk left files behind";
  // A read-only target directory (root ignores permission bits, so a read-only mount).
  ASSERT_EQ(::mount("tmpfs", dir.c_str(), "tmpfs", MS_RDONLY, "size=64k"), 0) << std::strerror(errno);
  msg.clear();
  try {
    writer::Build(root, dir + "/y.beton", Opts());
  } catch (const Error& e) {
    msg = e.what();
  }
  ::umount2(dir.c_str(), MNT_DETACH);
  EXPECT_NE(msg.find("y.beton"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Read-only file system"), std::string::npos) << msg;
}

TEST(Errors, UnwritableTargetsAndChangingSources) {
  auto root = SubsetTree(2);
  std::string msg;
  try {
    writer::Build(root, "/proc/dsc-test.beton", Opts());
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("/proc/dsc-test.beton"), std::string::npos) << msg;
  try {
    writer::Build(root, "/nonexistent-dir/x.beton", Opts());
    msg.clear();
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("cannot open output directory"), std::string::npos) << msg;
  // A source file that vanishes or changes after it was listed is an error naming it.
  auto src = writer::OpenSource(root, "tree", "train");
  auto files = TreeFiles(root);
  fs::remove(files[3].first);
  writer::SourceItem item;
  try {
    src->Load(3, &item);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(files[3].first), std::string::npos) << e.what();
  }
  fs::remove(files[4].first);
  WriteFile(files[4].first, "different", 9);
  try {
    src->Load(4, &item);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("changed during the build"), std::string::npos) << e.what();
  }
}


// ---- Writer-side image defects (issue 8) -------------------------------------------------------

// A copy of a baseline JPEG whose frame header declares w x h (only the header is ever read).
std::vector<uint8_t> WithJpegSize(std::vector<uint8_t> j, int w, int h) {
  for (size_t i = 2; i + 9 < j.size();) {
    if (j[i] != 0xFF) break;
    if (j[i + 1] >= 0xC0 && j[i + 1] <= 0xC2) {
      j[i + 5] = uint8_t(h >> 8), j[i + 6] = uint8_t(h);
      j[i + 7] = uint8_t(w >> 8), j[i + 8] = uint8_t(w);
      return j;
    }
    i += 2 + (size_t(j[i + 2]) << 8 | j[i + 3]);
  }
  ADD_FAILURE() << "no SOF marker";
  return j;
}

uint32_t Crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
  }
  return ~c;
}

// A valid PNG whose IHDR declares w x h (CRC fixed up, so only the size is wrong).
std::vector<uint8_t> PngDeclaring(int w, int h) {
  std::vector<uint8_t> px(4 * 4 * 3, 99);
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = img.height = 4;
  img.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&img, nullptr, &size, 0, px.data(), 0, nullptr));
  std::vector<uint8_t> out(size);
  EXPECT_TRUE(png_image_write_to_memory(&img, out.data(), &size, 0, px.data(), 0, nullptr));
  out.resize(size);
  // Signature (8), then IHDR: length (4), "IHDR" (4), width, height, ..., CRC over type + data.
  for (int k = 0; k < 4; ++k) {
    out[16 + k] = uint8_t(uint32_t(w) >> (24 - 8 * k));
    out[20 + k] = uint8_t(uint32_t(h) >> (24 - 8 * k));
  }
  const uint32_t crc = Crc32(&out[12], 17);
  for (int k = 0; k < 4; ++k) out[29 + k] = uint8_t(crc >> (24 - 8 * k));
  return out;
}

// `dsc build SRC OUT ARGS` must fail with exit 1, a message naming `file` and containing `what`,
// and no output file.
void ExpectBuildRefused(const std::string& src, const std::string& args, const std::string& file, const std::string& what) {
  const std::string out = fs::path(src).parent_path().string() + "/refused.beton";
  std::string log;
  EXPECT_EQ(RunDsc("build " + src + " " + out + " --quiet " + args, &log), 1) << log;
  EXPECT_TRUE(Contains(log, file)) << log;
  EXPECT_TRUE(Contains(log, what)) << log;
  EXPECT_FALSE(fs::exists(out));
  for (const auto& e : fs::directory_iterator(fs::path(out).parent_path()))
    EXPECT_FALSE(Contains(e.path().filename().string(), "refused")) << "left behind: " << e.path();
}

TEST(Limits, PixelLimitIsCheckedFromTheHeaderBeforeDecoding) {
  auto dir = ScratchDir();
  const auto cifar = TreeFiles(SubsetTree(1));
  fs::create_directories(dir + "/jpg/a");
  WriteFile(dir + "/jpg/a/big.jpg", WithJpegSize(ReadFile(cifar[0].first), 20000, 20000));
  ExpectBuildRefused(dir + "/jpg", "", dir + "/jpg/a/big.jpg", "400000000 pixels");
  fs::create_directories(dir + "/png/a");
  WriteFile(dir + "/png/a/big.png", PngDeclaring(20000, 20000));
  ExpectBuildRefused(dir + "/png", "", dir + "/png/a/big.png", "400000000 pixels");
  // --max-pixels sets the limit: 32 x 32 = 1024 pixels.
  fs::create_directories(dir + "/small/a");
  fs::copy_file(cifar[0].first, dir + "/small/a/x.jpg");
  ExpectBuildRefused(dir + "/small", "--max-pixels 1023", dir + "/small/a/x.jpg", "--max-pixels");
  fs::create_directories(dir + "/smallpng/a");
  WriteFile(dir + "/smallpng/a/y.png", PngDeclaring(4, 4));
  ExpectBuildRefused(dir + "/smallpng", "--max-pixels 15", dir + "/smallpng/a/y.png", "--max-pixels");
  std::string log;
  EXPECT_EQ(RunDsc("build " + dir + "/small " + dir + "/ok.beton --quiet --max-pixels 1024", &log), 0) << log;
  // Within the limit, but far more rows than its bytes can hold (deflate expands at most 1032:1):
  // refused from the header, where 507 MB were allocated and zero-filled first.
  fs::create_directories(dir + "/thin/a");
  WriteFile(dir + "/thin/a/z.png", PngDeclaring(13000, 13000));
  ExpectBuildRefused(dir + "/thin", "", dir + "/thin/a/z.png", "truncated PNG: 13000x13000 needs");
  fs::create_directories(dir + "/empty/a");
  WriteFile(dir + "/empty/a/e.png", "", 0);
  ExpectBuildRefused(dir + "/empty", "", dir + "/empty/a/e.png", "empty file (0 bytes)");
}

// A lossless progressive rewrite of a 3-component JPEG (libjpeg transcoding, as jpegtran does; its
// -scans takes at most 100): one scan for the DC of all components, then `passes`
// successive-approximation scans for every AC coefficient of every component on its own.
std::vector<uint8_t> ManyScans(const std::vector<uint8_t>& jpeg, int passes) {
  std::vector<jpeg_scan_info> scans;
  scans.push_back({3, {0, 1, 2, 0}, 0, 0, 0, 0});
  for (int c = 0; c < 3; ++c)
    for (int k = 1; k < 64; ++k)
      for (int p = passes - 1; p >= 0; --p) scans.push_back({1, {c, 0, 0, 0}, k, k, p == passes - 1 ? 0 : p + 1, p});
  jpeg_decompress_struct d;
  jpeg_error_mgr de, ce;
  d.err = jpeg_std_error(&de);
  jpeg_create_decompress(&d);
  jpeg_mem_src(&d, jpeg.data(), static_cast<unsigned long>(jpeg.size()));
  jpeg_read_header(&d, TRUE);
  jvirt_barray_ptr* coefs = jpeg_read_coefficients(&d);
  jpeg_compress_struct c;
  c.err = jpeg_std_error(&ce);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  jpeg_mem_dest(&c, &buf, &len);
  jpeg_copy_critical_parameters(&d, &c);
  c.scan_info = scans.data();
  c.num_scans = int(scans.size());
  c.optimize_coding = TRUE;  // progressive AC scans need their own Huffman tables
  jpeg_write_coefficients(&c, coefs);
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  jpeg_finish_decompress(&d);
  jpeg_destroy_decompress(&d);
  std::vector<uint8_t> out(buf, buf + len);
  std::free(buf);
  return out;
}

TEST(Limits, ProgressiveScanLimitInTheWriterAndTheLoaderDecoder) {
  auto dir = ScratchDir();
  const auto cifar = TreeFiles(SubsetTree(1));
  const auto ok = ManyScans(ReadFile(cifar[0].first), 1);    // 1 + 189 scans: fine
  const auto bomb = ManyScans(ReadFile(cifar[0].first), 3);  // 1 + 567 scans: over the limit of 500
  const auto want = ReferenceDecode(ReadFile(cifar[0].first));
  ASSERT_EQ(ReferenceDecode(ok), want);  // the same coefficients, only reordered
  // The loader's decoder (libjpeg API).
  kernels::JpegDecoder dec;
  int w = 0, h = 0;
  std::vector<uint8_t> px(32 * 32 * 3);
  ASSERT_TRUE(dec.ReadHeader(ok.data(), ok.size(), &w, &h)) << dec.error();
  ASSERT_TRUE(dec.DecodeRGB(px.data(), 32 * 3)) << dec.error();
  EXPECT_EQ(px, want);
  ASSERT_TRUE(dec.ReadHeader(bomb.data(), bomb.size(), &w, &h)) << dec.error();
  EXPECT_FALSE(dec.DecodeRGB(px.data(), 32 * 3));
  EXPECT_TRUE(Contains(dec.error(), "scans")) << dec.error();
  ASSERT_TRUE(dec.ReadHeader(ok.data(), ok.size(), &w, &h)) << dec.error();  // still usable afterwards
  ASSERT_TRUE(dec.DecodeRGB(px.data(), 32 * 3)) << dec.error();
  EXPECT_EQ(px, want);
  // The writer (TurboJPEG).
  fs::create_directories(dir + "/src/a");
  WriteFile(dir + "/src/a/ok.jpg", ok);
  std::string log;
  EXPECT_EQ(RunDsc("build " + dir + "/src " + dir + "/ok.beton --quiet", &log), 0) << log;
  WriteFile(dir + "/src/a/zbomb.jpg", bomb);
  ExpectBuildRefused(dir + "/src", "", dir + "/src/a/zbomb.jpg", "scans");
}

TEST(Limits, MaxFileSizeIsCheckedBeforeReading) {
  auto dir = ScratchDir();
  const auto cifar = TreeFiles(SubsetTree(1));
  fs::create_directories(dir + "/src/a");
  uint64_t largest = 0;
  std::string largest_name;
  for (int i = 0; i < 3; ++i) {
    const std::string name = dir + "/src/a/" + std::to_string(i) + ".jpg";
    fs::copy_file(cifar[size_t(i)].first, name);
    if (fs::file_size(name) > largest) largest = fs::file_size(name), largest_name = name;
  }
  ExpectBuildRefused(dir + "/src", "--max-file-size " + std::to_string(largest - 1), largest_name, "--max-file-size");
  const std::string m = fs::relative(largest_name, dir).string() + "\t0\n";
  WriteFile(dir + "/list.tsv", m.data(), m.size());
  ExpectBuildRefused(dir + "/list.tsv", "--max-file-size " + std::to_string(largest - 1), "a/", "--max-file-size");
  std::string log;
  EXPECT_EQ(RunDsc("build " + dir + "/src " + dir + "/ok.beton --quiet --max-file-size " + std::to_string(largest), &log), 0) << log;
}

TEST(Limits, SymlinkLoopInATreeIsAnErrorNamingTheLink) {
  auto dir = ScratchDir();
  const auto cifar = TreeFiles(SubsetTree(1));
  fs::create_directories(dir + "/src/a/sub");
  fs::create_directories(dir + "/src/b");
  fs::copy_file(cifar[0].first, dir + "/src/a/x.jpg");
  fs::copy_file(cifar[1].first, dir + "/src/b/y.jpg");
  // A link to another folder that is not an ancestor is followed (its files are samples too).
  fs::create_directory_symlink("../../b", dir + "/src/a/sub/to_b");
  std::string log;
  ASSERT_EQ(RunDsc("build " + dir + "/src " + dir + "/ok.beton --quiet", &log), 0) << log;
  EXPECT_EQ(Dataset(dir + "/ok.beton").size(), 3u);
  fs::create_directory_symlink("..", dir + "/src/a/sub/up");  // a class folder's subfolder links back to the root
  ExpectBuildRefused(dir + "/src", "", dir + "/src/a/sub/up", "symlink loop");
  fs::remove(dir + "/src/a/sub/up");
  fs::create_directory_symlink(".", dir + "/src/b/self");
  // Met first through a/sub/to_b, which is fine: the message names the path that loops.
  ExpectBuildRefused(dir + "/src", "", "b/self: symlink loop", "symlink loop");
}

}  // namespace
}  // namespace dsc::test
