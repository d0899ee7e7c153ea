// The dsc program as a user runs it: exit codes, messages, info --json, verify, export.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "format/checksum.h"
#include "format/layout.h"
#include "format/meta.h"
#include "reader/info.h"
#include "tests/test_util.h"
#include "writer/atomic_file.h"
#include "writer/file_builder.h"

namespace dsc::test {
namespace {

namespace fs = std::filesystem;

uint64_t JsonNumber(const std::string& json, const std::string& key) {
  const auto m = RegexSearch(json, "\"" + key + "\": ([0-9]+)");
  return m.empty() ? ~0ull : std::stoull(m[1]);
}

TEST(Cli, UsageErrorsExitTwo) {
  std::string out;
  EXPECT_EQ(RunDsc("", &out), 2);
  EXPECT_EQ(RunDsc("frobnicate", &out), 2);
  EXPECT_EQ(RunDsc("build onlyone", &out), 2);
  EXPECT_EQ(RunDsc("build a b --no-such-flag", &out), 2);
  // Out-of-range values are usage errors too, as in the other commands (they exited 1).
  for (const std::string bad : {"--quality 500", "--subsampling 411", "--block-size 3", "--threads -2", "--encoding foo",
                                "--split val", "--center-crop 2", "--restart-interval 0", "--jpeg-tables x"}) {
    EXPECT_EQ(RunDsc("build " + SubsetTree(1) + " /tmp/dsc-never-written.beton " + bad, &out), 2) << bad << ": " << out;
    EXPECT_NE(out.find(bad.substr(0, bad.find(' '))), std::string::npos) << out;
  }
  EXPECT_FALSE(fs::exists("/tmp/dsc-never-written.beton"));
  // A value that does not parse is named by its flag (cxxopts said only "Argument 'x' failed to parse").
  const std::vector<std::pair<std::string, std::string>> unparsed = {
      {"build a b --threads x", "--threads x"}, {"generate g --classes 1.5", "--classes 1.5"},
      {"export a --count=1e3", "--count 1e3"}};
  for (const auto& [cmd, said] : unparsed) {
    EXPECT_EQ(RunDsc(cmd, &out), 2) << cmd << ": " << out;
    EXPECT_NE(out.find(said + ": not a value " + said.substr(0, said.find(' ')) + " takes"), std::string::npos) << cmd << ": " << out;
  }
  // The loader's flags say the option table's reason (reader/option_table.h), naming the flag as typed.
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"bench a --batch-size=-4", "--batch-size -4: out of range [1, 1048576]"},
      {"bench a --threads auto --prefetch auto", "--prefetch auto: not an integer"}};  // not the earlier flag that takes the text
  for (const auto& [cmd, said] : refused) {
    EXPECT_EQ(RunDsc(cmd, &out), 2) << cmd << ": " << out;
    EXPECT_NE(out.find(said), std::string::npos) << cmd << ": " << out;
  }
  EXPECT_EQ(RunDsc("bench /nonexistent.beton --remote-chunk 4", &out), 2) << out;  // it was ignored
  EXPECT_NE(out.find("--remote-chunk needs --remote"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("--version", &out), 0);
  EXPECT_NE(out.find("dsc "), std::string::npos);
  EXPECT_EQ(RunDsc("build --help", &out), 0);
  EXPECT_NE(out.find("--encoding"), std::string::npos);
}

TEST(Cli, BuildInfoVerifyExport) {
  auto root = SubsetTree(20);
  auto dir = ScratchDir();
  std::string out;
  ASSERT_EQ(RunDsc("build " + root + " " + dir + "/f.beton --quiet", &out), 0) << out;
  ASSERT_EQ(RunDsc("info " + dir + "/f.beton --json", &out), 0) << out;
  EXPECT_EQ(JsonNumber(out, "samples"), 200u);
  EXPECT_NE(out.find("\"label_counts\": [20, 20, 20, 20, 20, 20, 20, 20, 20, 20]"), std::string::npos) << out;
  // sections tile the file: each starts where the previous ended, the last ends at the file size
  uint64_t expect = 0;
  std::vector<std::string> names;
  for (const auto& m : RegexFindAll(out, "\\{\"name\": \"([a-z]+)\", \"offset\": ([0-9]+), \"size\": ([0-9]+)")) {
    EXPECT_EQ(std::stoull(m[2]), expect) << m[1];
    expect += std::stoull(m[3]);
    names.push_back(m[1]);
  }
  EXPECT_EQ(expect, fs::file_size(dir + "/f.beton"));
  EXPECT_EQ(names, (std::vector<std::string>{"header", "data", "index", "meta", "blocks", "footer"}));
  ASSERT_EQ(RunDsc("info " + dir + "/f.beton", &out), 0);
  EXPECT_NE(out.find("airplane"), std::string::npos);

  ASSERT_EQ(RunDsc("verify " + dir + "/f.beton --decode", &out), 0) << out;
  EXPECT_NE(out.find("OK"), std::string::npos);

  ASSERT_EQ(RunDsc("export " + dir + "/f.beton --index 195 --count 5 --out " + dir + "/look", &out), 0) << out;
  auto png = ReadFile(dir + "/look/00000199.png");
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png[1], 'P');
  auto labels = ReadFile(dir + "/look/labels.tsv");
  EXPECT_NE(std::string(labels.begin(), labels.end()).find("00000199.png\t199\t9\ttruck"), std::string::npos);
  // A range the file does not have is a usage error (exit 2), as --count 0 is.
  EXPECT_EQ(RunDsc("export " + dir + "/f.beton --index 199 --count 5 --out " + dir + "/bad", &out), 2);
  EXPECT_NE(out.find("--index 199 --count 5 is out of range: the file has 200 samples"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("export " + dir + "/f.beton --count 0 --out " + dir + "/bad", &out), 2);
  EXPECT_NE(out.find("--count 0: nothing to export"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir + "/bad"));
}

// A valid file without samples (the writer's own builder, nothing added): its sizes are "none", not
// the UINT32_MAX a running minimum starts from.
TEST(Cli, InfoOfAFileWithoutSamples) {
  auto dir = ScratchDir();
  const std::string path = dir + "/empty.beton";
  {
    writer::AtomicFile f(path);
    writer::FileBuilder b(&f, 8192, false);
    format::Meta m;
    m.fields = {{format::FieldType::kImage, "image", {}}, {format::FieldType::kLabel, "label", {"a"}}};
    b.Finish(m);
    f.Commit();
  }
  std::string out;
  ASSERT_EQ(RunDsc("verify " + path, &out), 0) << out;
  ASSERT_EQ(RunDsc("info " + path, &out), 0) << out;
  EXPECT_NE(out.find("image size: none"), std::string::npos) << out;
  EXPECT_EQ(out.find("4294967295"), std::string::npos) << out;
  ASSERT_EQ(RunDsc("info " + path + " --json", &out), 0) << out;
  EXPECT_NE(out.find("\"image_size\": null"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("export " + path + " --out " + dir + "/x", &out), 2) << out;  // no range of it can be asked for: a usage error
  EXPECT_NE(out.find("the file has 0 samples"), std::string::npos) << out;
}

// JSON is UTF-8: bytes of a name that are not (Linux file names are bytes) must not make the whole
// document unreadable (Python's json.loads of `dsc info --json` raised UnicodeDecodeError).
TEST(Cli, JsonIsUtf8WhateverTheNamesHold) {
  const std::string bad[] = {"\xff", "\x80", "\xc0\xaf" /* overlong '/' */, "\xed\xa0\x80" /* a surrogate */,
                             "\xf4\x90\x80\x80" /* past U+10FFFF */, "\xe2\x82" /* cut short */};
  for (const std::string& b : bad) {
    const std::string j = JsonString("a" + b + "z");
    EXPECT_TRUE(format::IsUtf8(j)) << j;
    EXPECT_EQ(j.front(), '"');
    EXPECT_NE(j.find("a\xEF\xBF\xBD"), std::string::npos) << j;  // U+FFFD where the bad bytes were
    EXPECT_NE(j.find("z\""), std::string::npos) << j;            // and the text after them kept
  }
  EXPECT_EQ(JsonString("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "\"\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");  // valid: as is
  EXPECT_EQ(JsonString("q\"b\\n\n\x01"), "\"q\\\"b\\\\n\\n\\u0001\"");

  auto root = SubsetTree(20);
  auto dir = ScratchDir();
  const std::string file = dir + "/x\xff.beton";
  std::string out;
  ASSERT_EQ(RunDsc("build " + root + " '" + file + "' --quiet", &out), 0) << out;
  for (const std::string& cmd : {"info '" + file + "' --json", "bench '" + file + "' --epochs 1 --batch-size 32 --json"}) {
    ASSERT_EQ(RunDsc(cmd, &out), 0) << out;
    const size_t open = out.find('{');
    ASSERT_NE(open, std::string::npos) << out;
    EXPECT_TRUE(format::IsUtf8(out.substr(open))) << cmd;
    EXPECT_NE(out.find("x\xEF\xBF\xBD.beton\""), std::string::npos) << out;
  }
}

TEST(Cli, BenchReportsJsonAndWritesATrace) {
  auto root = SubsetTree(20);
  auto dir = ScratchDir();
  std::string out;
  ASSERT_EQ(RunDsc("build " + root + " " + dir + "/f.beton --quiet", &out), 0) << out;
  ASSERT_EQ(RunDsc("bench " + dir + "/f.beton --epochs 3 --batch-size 32 --json --trace " + dir + "/t.json", &out), 0) << out;
  for (const char* key : {"images_per_second", "threads", "images_decoded", "peak_anon_rss_bytes"})
    EXPECT_NE(JsonNumber(out, key), ~0ull) << key << " missing in " << out;
  EXPECT_GT(JsonNumber(out, "images_per_second"), 0u);
  EXPECT_EQ(JsonNumber(out, "images_decoded"), 3u * 7 * 32) << "7 padded batches of 32 per epoch, decoded every epoch";
  EXPECT_NE(out.find("\"epochs\": ["), std::string::npos);
  EXPECT_NE(out.find("\"verdict\""), std::string::npos);
  auto trace = ReadFile(dir + "/t.json");
  const std::string t(trace.begin(), trace.end());
  EXPECT_NE(t.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(t.find("\"name\": \"decode\""), std::string::npos);
  EXPECT_NE(t.find("wait for batch"), std::string::npos);
  ASSERT_EQ(RunDsc("bench " + dir + "/f.beton --epochs 1 --batch-size 32 --threads auto --consumer-ms 1", &out), 0) << out;
  EXPECT_NE(out.find("autotune:"), std::string::npos) << out;
  EXPECT_NE(out.find("verdict:"), std::string::npos) << out;
  // The controller's count per epoch (final threads, the batch it settled at) in --json.
  ASSERT_EQ(RunDsc("bench " + dir + "/f.beton --epochs 2 --batch-size 32 --threads auto:2 --consumer-ms 1 --consumer-spin --json", &out), 0)
      << out;
  EXPECT_NE(out.find("\"autotune\": true"), std::string::npos) << out;
  EXPECT_EQ(JsonNumber(out, "max_threads"), 2u) << out;
  EXPECT_GE(JsonNumber(out, "threads"), 1u) << out;
  EXPECT_LE(JsonNumber(out, "threads"), 2u) << out;
  EXPECT_LT(JsonNumber(out, "settled_batch"), 7u) << out;
  EXPECT_NE(JsonNumber(out, "thread_changes"), ~0ull) << out;
  EXPECT_EQ(RunDsc("bench " + dir + "/f.beton --threads autox", &out), 2) << out;
  EXPECT_EQ(RunDsc("bench " + dir + "/f.beton --preset nope", &out), 2);
  EXPECT_EQ(RunDsc("bench " + dir + "/f.beton --consumer-spin", &out), 2);  // was ignored
  EXPECT_NE(out.find("--consumer-spin needs --consumer-ms"), std::string::npos) << out;
  // A rank whose batches are padding only delivers no image: no CPU figure per image (it said 0.0 us).
  ASSERT_EQ(RunDsc("build " + SubsetTree(1) + " " + dir + "/ten.beton --quiet", &out), 0) << out;
  ASSERT_EQ(RunDsc("bench " + dir + "/ten.beton --epochs 1 --batch-size 1 --world-size 16 --rank 15 --json", &out), 0) << out;
  EXPECT_NE(out.find("\"cpu_us_per_image\": null"), std::string::npos) << out;
  ASSERT_EQ(RunDsc("bench " + dir + "/ten.beton --epochs 1 --batch-size 1 --world-size 16 --rank 15", &out), 0) << out;
  EXPECT_NE(out.find("CPU time per delivered image: none delivered"), std::string::npos) << out;
  // Byte counts: digits and a unit only ("-1" was 2^64 - 1), and no shift past 64 bits (it wrapped to 0).
  for (const char* bad : {"-1", "17179869184G", "12X", "M"}) {
    EXPECT_EQ(RunDsc("bench " + dir + "/f.beton --order quasi_random --cache-budget " + bad, &out), 2) << bad;
    EXPECT_NE(out.find(std::string("--cache-budget ") + bad + ": "), std::string::npos) << out;
  }
  // An unwritable trace is known before the epochs run (it was reported after all of them).
  EXPECT_EQ(RunDsc("bench " + dir + "/f.beton --epochs 1 --trace /nonexistent/t.json", &out), 1);
  EXPECT_NE(out.find("/nonexistent/t.json: cannot write the trace"), std::string::npos) << out;
  EXPECT_EQ(out.find("epoch 0"), std::string::npos) << out;
  // Each epoch's lines come out as the epoch ends, also through a pipe: stamped by a reader, the first
  // line arrives well before the last (they came together, at exit).
  ASSERT_EQ(RunShell(std::string(DSC_BINARY) + " bench " + dir + "/f.beton --epochs 3 --batch-size 32 --threads 1 --consumer-ms 60 | "
                     "while IFS= read -r l; do echo \"$(date +%s%N) $l\"; done",
                     &out), 0) << out;
  std::vector<double> at;
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l);)
    if (l.find(" epoch ") != std::string::npos) at.push_back(std::stod(l.substr(0, l.find(' '))) / 1e9);
  ASSERT_EQ(at.size(), 3u) << out;
  EXPECT_GT(at[2] - at[0], 0.5) << "7 batches x 60 ms of consumer an epoch: the lines of epochs 0 and 2 came together";
}

// Runs dsc directly (no shell, so wait4 measures dsc itself); returns the exit code, the output, the
// peak RSS in MiB and the wall time in seconds. Arguments are split on spaces.
int RunDscMeasured(const std::string& args, std::string* out, double* rss_mib, double* secs) {
  std::vector<std::string> words{DSC_BINARY};
  std::istringstream in(args);
  for (std::string w; in >> w;) words.push_back(w);
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  out->clear();
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out->append(buf, size_t(n));
  ::close(fds[0]);
  int st = 0;
  struct rusage ru = {};
  ::wait4(pid, &st, 0, &ru);
  *secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *rss_mib = double(ru.ru_maxrss) / 1024;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// An index claiming a 65535x65535 image (checksums intact) once made export allocate 12.6 GB before
// the decoder noticed. Export and verify --decode must refuse before allocating: by the pixel limit,
// and, with the limit raised, by the payload's own header disagreeing with the index.
#ifdef DSC_EXACT_HEAP_SOURCE
constexpr double kRssBoundMib = 1024;  // sanitizer builds: ASan alone takes ~385 MiB; the bug took 12,900
#else
constexpr double kRssBoundMib = 300;
#endif

TEST(Cli, HostileIndexDimensionsFailFastAndSmall) {
  auto dir = ScratchDir();
  std::string out;
  for (const std::string enc : {"jpeg", "raw-zstd"}) {
    SCOPED_TRACE(enc);
    const std::string good = dir + "/" + enc + ".beton", bad = dir + "/" + enc + "-bad.beton";
    ASSERT_EQ(RunDsc("build " + SubsetTree(1) + " " + good + " --quiet --encoding " + enc, &out), 0) << out;
    ForgeDimensions(good, bad, 3, 65535, 65535);
    const std::string export_args = "export " + bad + " --index 3 --count 1 --ppm --out " + dir + "/x-" + enc;
    for (const std::string& args : {export_args, export_args + " --max-pixels 5000000000",
                                    "verify " + bad + " --decode", "verify " + bad + " --decode --max-pixels 5000000000"}) {
      SCOPED_TRACE(args);
      double rss = 0, secs = 0;
      EXPECT_EQ(RunDscMeasured(args, &out, &rss, &secs), 1) << out;
      EXPECT_NE(out.find(bad + ": sample 3: "), std::string::npos) << out;
      EXPECT_NE(out.find("65535x65535"), std::string::npos) << out;
      EXPECT_LT(rss, kRssBoundMib) << "MiB peak RSS";
      EXPECT_LT(secs, 10);
    }
    fs::remove_all(dir + "/x-" + enc);
    EXPECT_EQ(RunDsc(export_args, &out), 1);
    EXPECT_NE(out.find("--max-pixels"), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(dir + "/x-" + enc)) << "nothing is written for a refused range";
    EXPECT_EQ(RunDsc(export_args + " --max-pixels 5000000000", &out), 1);
    EXPECT_NE(out.find("index says 65535x65535"), std::string::npos) << out;
    // Plain verify compares every payload's header with its entry too (it passed: the checksums hold).
    EXPECT_EQ(RunDsc("verify " + bad, &out), 1) << out;
    EXPECT_NE(out.find(bad + ": sample 3: " + (enc == "jpeg" ? "JPEG header says" : "zstd frame holds")), std::string::npos) << out;
    EXPECT_NE(out.find("index says 65535x65535"), std::string::npos) << out;
    EXPECT_NE(out.find(bad + ": DAMAGED (1 problem)"), std::string::npos) << out;
    EXPECT_EQ(RunDsc("verify " + good, &out), 0) << out;
  }
}

// A sample that fails to decode in the middle of a range leaves no partial export: samples 0..2
// decode, 3 lies about its size, and neither the output folder nor a staging folder remains.
TEST(Cli, ExportOfARangeWithABadSampleWritesNothing) {
  auto dir = ScratchDir();
  std::string out;
  const std::string good = dir + "/good.beton", bad = dir + "/bad.beton";
  // JPEG: the index cannot know a payload's real size, only its decode finds the lie.
  ASSERT_EQ(RunDsc("build " + SubsetTree(1) + " " + good + " --quiet --encoding jpeg", &out), 0) << out;
  ForgeDimensions(good, bad, 3, 33, 32);
  EXPECT_EQ(RunDsc("export " + bad + " --index 0 --count 6 --out " + dir + "/look", &out), 1) << out;
  EXPECT_NE(out.find(bad + ": sample 3: "), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir + "/look")) << "partial output left behind";
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".dsc-export-"), std::string::npos) << "left behind: " << e.path();
  // The folders it created on the way go too.
  EXPECT_EQ(RunDsc("export " + bad + " --index 0 --count 6 --out " + dir + "/nest/x/look", &out), 1) << out;
  EXPECT_FALSE(fs::exists(dir + "/nest")) << "created folders left behind";
  // An existing empty folder stays, empty.
  fs::create_directories(dir + "/empty");
  EXPECT_EQ(RunDsc("export " + bad + " --index 0 --count 6 --out " + dir + "/empty", &out), 1) << out;
  EXPECT_TRUE(fs::is_directory(dir + "/empty"));
  EXPECT_TRUE(fs::is_empty(dir + "/empty"));
  // A folder with files is refused before any decode (an earlier export's images would sit there
  // unlisted in the new labels.tsv); its files stay.
  fs::create_directories(dir + "/mine");
  WriteFile(dir + "/mine/keep.txt", std::vector<uint8_t>{'k'});
  EXPECT_EQ(RunDsc("export " + good + " --index 0 --count 6 --out " + dir + "/mine", &out), 1) << out;
  EXPECT_NE(out.find("not empty"), std::string::npos) << out;
  EXPECT_EQ(std::distance(fs::directory_iterator(dir + "/mine"), fs::directory_iterator()), 1);
  WriteFile(dir + "/plain", std::vector<uint8_t>{'k'});
  EXPECT_EQ(RunDsc("export " + good + " --out " + dir + "/plain", &out), 1) << out;
  EXPECT_NE(out.find("not a folder"), std::string::npos) << out;
  // The same range of the intact file exports completely into the empty folder.
  ASSERT_EQ(RunDsc("export " + good + " --index 0 --count 6 --out " + dir + "/empty", &out), 0) << out;
  EXPECT_EQ(std::distance(fs::directory_iterator(dir + "/empty"), fs::directory_iterator()), 7) << "6 images, labels";
}

// --out on another filesystem than the folder it is named from (a symlink, a mount point): the
// staging folder used to be a sibling of the name as written, and the final rename failed (EXDEV).
TEST(Cli, ExportThroughASymlinkToAnotherFilesystem) {
  auto dir = ScratchDir();
  struct stat here {}, shm {};
  if (::stat(dir.c_str(), &here) != 0 || ::stat("/dev/shm", &shm) != 0 || here.st_dev == shm.st_dev)
    GTEST_SKIP() << "/dev/shm is not another filesystem here";
  const std::string target = "/dev/shm/dsc-cli-test-" + std::to_string(::getpid());
  fs::remove_all(target);
  fs::create_directories(target);
  fs::create_symlink(target, dir + "/link");
  std::string out;
  ASSERT_EQ(RunDsc("build " + SubsetTree(1) + " " + dir + "/f.beton --quiet", &out), 0) << out;
  const int rc = RunDsc("export " + dir + "/f.beton --count 3 --out " + dir + "/link", &out);
  const size_t files = std::distance(fs::directory_iterator(target), fs::directory_iterator());
  fs::remove_all(target);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(files, 4u) << "3 images and labels.tsv";
}

// Class names come from folder names: a tab or newline in one must not break labels.tsv's rows.
TEST(Cli, ExportEscapesNamesInLabelsTsv) {
  auto dir = ScratchDir();
  const std::string src = SubsetTree(1);
  for (const std::string cls : {"cat\tdog", "line\nbreak", "back\\slash"}) {
    fs::create_directories(dir + "/tree/" + cls);
    for (const auto& e : fs::directory_iterator(src + "/airplane")) {
      fs::copy_file(e.path(), dir + "/tree/" + cls + "/" + e.path().filename().string());
      break;
    }
  }
  std::string out;
  ASSERT_EQ(RunDsc("build " + dir + "/tree " + dir + "/f.beton --quiet", &out), 0) << out;
  ASSERT_EQ(RunDsc("export " + dir + "/f.beton --count 3 --out " + dir + "/look", &out), 0) << out;
  std::ifstream in(dir + "/look/labels.tsv");
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, '\t');) cols.push_back(c);
    ASSERT_EQ(cols.size(), 4u) << line;
    names.push_back(cols[3]);
  }
  ASSERT_EQ(names.size(), 4u) << "a header and 3 rows";
  std::sort(names.begin() + 1, names.end());
  EXPECT_EQ(names[1], "back\\\\slash");
  EXPECT_EQ(names[2], "cat\\tdog");
  EXPECT_EQ(names[3], "line\\nbreak");
}

// A PPM written by `dsc export --ppm`: the pixels after the "P6\nW H\n255\n" header.
std::vector<uint8_t> PpmPixels(const std::string& path, int* w, int* h) {
  auto b = ReadFile(path);
  std::string head(b.begin(), b.begin() + std::min<size_t>(b.size(), 64));
  int maxval = 0, used = 0;
  if (std::sscanf(head.c_str(), "P6\n%d %d\n%d\n%n", w, h, &maxval, &used) != 3 || maxval != 255) return {};
  return std::vector<uint8_t>(b.begin() + used, b.end());
}

// What users inspect is what training sees: export (and verify --decode) decode JPEGs with the
// loader's default box upsampling (= TurboJPEG's FASTUPSAMPLE); with --upsampling fancy, the export
// of a pass-through JPEG is bit-for-bit PIL's Image.open(jpg).convert("RGB").
TEST(Cli, ExportDecodesLikeTheLoaderOrLikePil) {
  auto root = SubsetTree(1);  // 10 real CIFAR JPEGs (4:2:0), stored pass-through
  auto dir = ScratchDir();
  std::string out;
  ASSERT_EQ(RunDsc("build " + root + " " + dir + "/f.beton --quiet", &out), 0) << out;
  ASSERT_EQ(RunDsc("export " + dir + "/f.beton --count 10 --ppm --out " + dir + "/box", &out), 0) << out;
  ASSERT_EQ(RunDsc("export " + dir + "/f.beton --count 10 --ppm --upsampling fancy --out " + dir + "/fancy", &out), 0) << out;
  EXPECT_EQ(RunDsc("export " + dir + "/f.beton --upsampling smooth --out " + dir + "/x", &out), 2);
  ASSERT_EQ(RunDsc("verify " + dir + "/f.beton --decode --upsampling fancy", &out), 0) << out;
  // Options of --decode without it were ignored (the file verified as if they were not given).
  EXPECT_EQ(RunDsc("verify " + dir + "/f.beton --upsampling fancy", &out), 2);
  EXPECT_NE(out.find("--upsampling needs --decode"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("verify " + dir + "/f.beton --max-pixels 100", &out), 2);
  EXPECT_EQ(RunDsc("verify " + dir + "/f.beton --decode --max-pixels 0", &out), 2);
  std::vector<std::string> sources;  // the writer's order: sorted paths
  for (auto& e : fs::recursive_directory_iterator(root))
    if (!fs::is_directory(e.path())) sources.push_back(e.path().string());
  std::sort(sources.begin(), sources.end());
  ASSERT_EQ(sources.size(), 10u);
  // PIL's decode of each source, raw RGB, from the system Python.
  std::string script = "from PIL import Image\nimport sys\nfor i, p in enumerate(sys.argv[2:]):\n"
                       "    open(sys.argv[1] + '/%d.rgb' % i, 'wb').write(Image.open(p).convert('RGB').tobytes())\n";
  WriteFile(dir + "/pil.py", script.data(), script.size());
  std::string cmd = "/usr/bin/python3 " + dir + "/pil.py " + dir;
  for (auto& p : sources) cmd += " " + p;
  if (std::system((cmd + " 2>/dev/null").c_str()) != 0) GTEST_SKIP() << "/usr/bin/python3 with PIL is needed";
  int differ = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "/%08zu.ppm", i);
    int w = 0, h = 0;
    auto box = PpmPixels(dir + "/box" + name, &w, &h);
    int rw = 0, rh = 0;
    auto want_box = ReferenceDecode(ReadFile(sources[i]), &rw, &rh, TJFLAG_FASTUPSAMPLE);
    EXPECT_EQ(box, want_box) << "box, sample " << i;
    auto fancy = PpmPixels(dir + "/fancy" + name, &w, &h);
    EXPECT_EQ(fancy, ReadFile(dir + "/" + std::to_string(i) + ".rgb")) << "fancy vs PIL, sample " << i;
    differ += box != fancy;
  }
  EXPECT_GT(differ, 0) << "box and fancy upsampling agree on every image: the test cannot tell them apart";
}

TEST(Cli, DamageAndBadInputExitOne) {
  auto root = SubsetTree(5);
  auto dir = ScratchDir();
  std::string out;
  ASSERT_EQ(RunDsc("build " + root + " " + dir + "/f.beton --quiet", &out), 0) << out;
  auto bytes = ReadFile(dir + "/f.beton");
  bytes[4096 + 10] ^= 4;  // inside the first data block
  WriteFile(dir + "/g.beton", bytes);
  EXPECT_EQ(RunDsc("verify " + dir + "/g.beton", &out), 1);
  EXPECT_NE(out.find("data: block 0: checksum mismatch"), std::string::npos) << out;
  // `dsc verify *.beton` checks every file (it checked the first and exited 0); the other commands
  // refuse an argument they would not look at.
  EXPECT_EQ(RunDsc("verify " + dir + "/f.beton " + dir + "/g.beton", &out), 1) << out;
  EXPECT_NE(out.find("f.beton: OK"), std::string::npos) << out;
  EXPECT_NE(out.find("g.beton: DAMAGED"), std::string::npos) << out;
  for (const std::string cmd : {"info", "bench", "export"}) {
    const std::string extra = cmd == "export" ? " --out " + dir + "/ex" : "";
    EXPECT_EQ(RunDsc(cmd + " " + dir + "/f.beton " + dir + "/g.beton" + extra, &out), 2) << cmd << ": " << out;
    EXPECT_NE(out.find("unexpected argument '" + dir + "/g.beton'"), std::string::npos) << cmd << ": " << out;
  }
  EXPECT_EQ(RunDsc("info " + dir + "/nonexistent.beton", &out), 1);
  EXPECT_NE(out.find("nonexistent.beton"), std::string::npos);
  EXPECT_EQ(RunDsc("build " + dir + "/nothing-here " + dir + "/x.beton", &out), 1);
  EXPECT_NE(out.find("nothing-here"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir + "/x.beton"));
  EXPECT_EQ(RunDsc("build " + root + " " + dir + "/y.beton --encoding png", &out), 2);  // a usage error
  EXPECT_NE(out.find("--encoding"), std::string::npos);
  // An FFCV file (same .beton suffix) is read as one, not refused for "bad magic": this one is torn.
  std::vector<uint8_t> ffcv(1 << 16, 0);
  const uint8_t head[24] = {2, 0, 2, 0, 0, 0, 0, 1, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0};  // page 2^24, table at 32768
  std::copy(head, head + 24, ffcv.begin());
  WriteFile(dir + "/ffcv.beton", ffcv);
  for (const std::string cmd : {"info", "verify"}) {
    EXPECT_EQ(RunDsc(cmd + " " + dir + "/ffcv.beton", &out), 1) << cmd;
    EXPECT_NE(out.find("header: allocation table at byte 32768 is not at a page boundary after the data pages"),
              std::string::npos) << out;
  }
}

// dsc info's label counts take memory and lines in proportion to the samples, not to the largest
// label value (a manifest label of 200000000 made it print 200 million lines, 1.5 GB RSS).
TEST(Cli, InfoOfLargeLabelValuesIsSmall) {
  const std::string dir = ScratchDir();
  const std::string jpg = CifarJpegRoot() + "/train/cat/0000.jpg";
  {
    std::ofstream m(dir + "/m.tsv");
    m << jpg << "\t200000000\n" << jpg << "\t0\n" << jpg << "\t200000000\n";
    std::ofstream many(dir + "/many.tsv");
    for (int i = 0; i < 1005; ++i) many << jpg << "\t" << 70000 + 2 * i << "\n";
  }
  std::string out;
  ASSERT_EQ(RunDsc("build " + dir + "/m.tsv " + dir + "/m.beton --quiet", &out), 0) << out;
  ASSERT_EQ(RunDsc("info " + dir + "/m.beton", &out), 0) << out;
  EXPECT_LT(out.size(), 4000u) << out;
  EXPECT_NE(out.find("  200000000                             2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("     0                             1\n"), std::string::npos) << out;
  ASSERT_EQ(RunDsc("info --json " + dir + "/m.beton", &out), 0) << out;
  EXPECT_NE(out.find("\"label_counts\": null, \"label_values\": {\"0\": 1, \"200000000\": 2}"), std::string::npos) << out;
  // Over 1,000 values the text stops and says where the rest is.
  ASSERT_EQ(RunDsc("build " + dir + "/many.tsv " + dir + "/many.beton --quiet", &out), 0) << out;
  ASSERT_EQ(RunDsc("info " + dir + "/many.beton", &out), 0) << out;
  EXPECT_NE(out.find("  71998 "), std::string::npos) << out;  // the 1,000th value
  EXPECT_EQ(out.find("  72000 "), std::string::npos) << out;
  EXPECT_NE(out.find("  ... 5 more label values (dsc info --json lists them all)"), std::string::npos) << out;
  ASSERT_EQ(RunDsc("info --json " + dir + "/many.beton", &out), 0) << out;
  EXPECT_NE(out.find("\"72008\": 1}"), std::string::npos);
}

// dsc generate writes OUT complete or not at all, never into an existing tree, within stated bounds.
TEST(Cli, GenerateWritesAWholeTreeOrNothing) {
  const std::string dir = ScratchDir();
  std::string out, out2;
  ASSERT_EQ(RunDsc("generate " + dir + "/a --classes 2 --train 3 --test 1 --seed 4", &out), 0) << out;
  ASSERT_EQ(RunDsc("generate " + dir + "/b --classes 2 --train 3 --test 1 --seed 4", &out), 0) << out;
  ASSERT_EQ(RunShell("cd " + dir + "/a && find . -type f | sort | xargs cat | md5sum", &out), 0);
  ASSERT_EQ(RunShell("cd " + dir + "/b && find . -type f | sort | xargs cat | md5sum", &out2), 0);
  EXPECT_EQ(out, out2);  // deterministic for a seed
  ASSERT_EQ(RunShell("cd " + dir + "/a && find . -type f | wc -l", &out), 0);
  EXPECT_EQ(std::stoi(out), 8);
  // An existing tree is refused, not mixed with new files (it was: 4 classes then 2 gave a tree of 4).
  EXPECT_EQ(RunDsc("generate " + dir + "/a --classes 1 --train 1 --test 0", &out), 1);
  EXPECT_NE(out.find(dir + "/a exists and is not an empty folder"), std::string::npos) << out;
  ASSERT_EQ(RunShell("cd " + dir + "/a && find . -type f | wc -l", &out), 0);
  EXPECT_EQ(std::stoi(out), 8);
  // A write that fails (file size limit, SIGXFSZ ignored: the write returns EFBIG) leaves nothing.
  EXPECT_EQ(RunShell("trap '' XFSZ; ulimit -f 1; " + std::string(DSC_BINARY) + " generate " + dir + "/c --size 256 --classes 2 --train 2 --test 0 2>&1", &out), 1)
      << out;
  EXPECT_NE(out.find("write failed (nothing written to " + dir + "/c)"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir + "/c"));
  EXPECT_FALSE(fs::exists(dir + "/.c.dsc-generate-partial"));
  // Bad values name the option; bounds hold before anything is written.
  EXPECT_EQ(RunDsc("generate " + dir + "/d --classes 0", &out), 2);
  EXPECT_NE(out.find("--classes 0 is out of range (1..100000)"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("generate " + dir + "/d --classes 100000 --train 2000 --test 0", &out), 2);
  EXPECT_NE(out.find("more than 100000000"), std::string::npos) << out;
  EXPECT_EQ(RunDsc("generate " + dir + "/d --train 0 --test 0", &out), 2);
  EXPECT_NE(out.find("no image to write"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir + "/d"));
  // OUT with a trailing slash (tab completion) is the folder: it once wrote every image, then failed
  // renaming the staging folder onto its own parent.
  ASSERT_EQ(RunDsc("generate " + dir + "/e/ --classes 2 --train 3 --test 1 --seed 4", &out), 0) << out;
  ASSERT_EQ(RunShell("cd " + dir + "/e && find . -type f | sort | xargs cat | md5sum", &out2), 0);
  ASSERT_EQ(RunShell("cd " + dir + "/a && find . -type f | sort | xargs cat | md5sum", &out), 0);
  EXPECT_EQ(out, out2);
  for (const char* here : {".", "..", "./"}) {
    EXPECT_EQ(RunShell("cd " + dir + "/e && " + DSC_BINARY + " generate " + here + " --classes 1 --train 1 --test 0 2>&1", &out), 2) << here;
    EXPECT_NE(out.find("OUT must name a folder to create"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace dsc::test
