#include "tests/test_util.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <turbojpeg.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <thread>

#include "format/layout.h"
#include "tests/fuzz/fixup_checksums.h"
#include "writer/build.h"

namespace dsc::test {

namespace fs = std::filesystem;

std::string CifarJpegRoot() { return std::string(DSC_TESTDATA) + "/cifar10"; }

std::vector<std::string> CifarTestJpegs(size_t n) {
  std::vector<std::string> files;
  for (const auto& f : std::filesystem::recursive_directory_iterator(CifarJpegRoot() + "/test"))
    if (f.is_regular_file()) files.push_back(f.path());
  std::sort(files.begin(), files.end());
  files.resize(std::min(n, files.size()));
  return files;
}

CifarFiles BuildCifarFiles(const std::string& tag) {
  const std::string dir = ScratchDir(tag);
  writer::BuildOptions o;
  o.log = [](const std::string&) {};
  CifarFiles f{dir + "/train.beton", dir + "/test.beton"};
  writer::Build(CifarJpegRoot() + "/train", f.train, o);
  writer::Build(CifarJpegRoot() + "/test", f.test, o);
  return f;
}

std::string PhotosTree(const std::string& archive) {
  const std::string dir = std::string(DSC_TESTDATA) + "/photos500";
  std::error_code ec;
  if (!fs::exists(dir + "/.unpacked", ec)) {
    const std::string tmp = dir + ".tmp." + std::to_string(::getpid());
    const std::string cmd = "rm -rf '" + tmp + "' && mkdir -p '" + tmp + "' && zstd -dc '" + archive + "' | tar -x -C '" +
                            tmp + "' && touch '" + tmp + "/.unpacked'";
    if (std::system(cmd.c_str()) == 0) fs::rename(tmp, dir, ec);  // fails when another process won the race
    fs::remove_all(tmp, ec);
    if (!fs::exists(dir + "/.unpacked", ec)) return "";
  }
  return dir + "/imagenet-photos-500";
}

std::string ScratchDir(const std::string& tag) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  // Outside a test (suite set-up) the folder is per process: ctest runs each test as its own process,
  // in parallel, and they must not share a folder.
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "suite-" + std::to_string(::getpid());
  std::replace(name.begin(), name.end(), '/', '_');
  fs::path dir = fs::path(DSC_TESTDATA) / "scratch" / (name + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void RemoveScratch(const std::string& dir) { fs::remove_all(dir); }

std::string SubsetTree(int per_class, const std::string& split, bool with_split_folders) {
  fs::path root = fs::path(ScratchDir("-tree-" + split + std::to_string(per_class))) / "tree";
  fs::path base = with_split_folders ? root / split : root;
  for (const auto& cls : fs::directory_iterator(fs::path(CifarJpegRoot()) / split)) {
    std::vector<fs::path> files;
    for (const auto& f : fs::directory_iterator(cls.path())) files.push_back(f.path());
    std::sort(files.begin(), files.end());
    fs::create_directories(base / cls.path().filename());
    for (int i = 0; i < per_class && i < int(files.size()); ++i)
      fs::create_symlink(files[size_t(i)], base / cls.path().filename() / files[size_t(i)].filename());
  }
  return root.string();
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), std::streamsize(size));
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::vector<uint8_t> ReferenceDecode(const std::vector<uint8_t>& jpeg, int* pw, int* ph, int flags) {
  tjhandle h = tjInitDecompress();
  int w = 0, hh = 0, sub = 0, cs = 0;
  std::vector<uint8_t> out;
  if (tjDecompressHeader3(h, jpeg.data(), jpeg.size(), &w, &hh, &sub, &cs) == 0) {
    out.resize(size_t(w) * hh * 3);
    if (tjDecompress2(h, jpeg.data(), jpeg.size(), out.data(), w, 0, hh, TJPF_RGB, flags) != 0) out.clear();
  }
  tjDestroy(h);
  if (pw) *pw = w;
  if (ph) *ph = hh;
  return out;
}

double Psnr(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size() || a.empty()) return 0;
  double se = 0;
  for (size_t i = 0; i < a.size(); ++i) se += double(int(a[i]) - int(b[i])) * (int(a[i]) - int(b[i]));
  if (se == 0) return 99;
  return 10 * std::log10(255.0 * 255.0 / (se / double(a.size())));
}

bool LimitAddressSpace(uint64_t headroom) {
  std::ifstream st("/proc/self/status");
  std::string line;
  uint64_t kib = 0;
  while (std::getline(st, line))
    if (line.rfind("VmSize:", 0) == 0) kib = std::stoull(line.substr(7));
  const struct rlimit as = {rlim_t(kib * 1024 + headroom), rlim_t(kib * 1024 + headroom)};
  return kib > 0 && ::setrlimit(RLIMIT_AS, &as) == 0;
}

int RunForked(int seconds, const std::function<int()>& body) {
  std::fflush(nullptr);  // nothing buffered twice
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  for (int i = 0; i < seconds * 100 && ::waitpid(pid, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (::waitpid(pid, &status, WNOHANG) == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int RunShell(const std::string& cmd, std::string* output) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int st = ::pclose(p);
  if (output) *output = std::move(out);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int RunDsc(const std::string& args, std::string* output) {
  return RunShell(std::string(DSC_BINARY) + " " + args + " 2>&1", output);
}

namespace {
// Rewrites sample i's index entry with `edit` and recomputes every checksum.
void ForgeEntry(const std::string& from, const std::string& to, uint64_t i,
                const std::function<void(dsc::format::IndexEntry*)>& edit) {
  using namespace dsc::format;
  auto b = ReadFile(from);
  uint8_t* idx = b.data() + DecodeHeader(b.data()).sections[kIndex].offset;
  IndexEntry e = DecodeIndexEntry(idx + i * kIndexEntrySize);
  edit(&e);
  EncodeIndexEntry(e, idx + i * kIndexEntrySize);
  fuzz::FixupChecksums(b.data(), b.size());
  WriteFile(to, b);
}
}  // namespace

void ForgeDimensions(const std::string& from, const std::string& to, uint64_t i, uint16_t w, uint16_t h) {
  ForgeEntry(from, to, i, [&](dsc::format::IndexEntry* e) {
    e->width = w;
    e->height = h;
  });
}

void ForgeChannels(const std::string& from, const std::string& to, uint64_t i, uint8_t channels) {
  ForgeEntry(from, to, i, [&](dsc::format::IndexEntry* e) { e->channels = channels; });
}

std::map<std::string, double> TraceSummary(const std::string& path) {
  const std::string cmd = "/usr/bin/python3 " + std::string(DSC_TEST_SCRIPTS) + "/trace_summary.py '" + path + "'";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::map<std::string, double> out;
  if (!p) return out;
  char line[4096];
  while (std::fgets(line, sizeof line, p)) {
    std::vector<std::string> f;
    std::string cur;
    for (const char* c = line; *c && *c != '\n'; ++c) {
      if (*c == '\t') {
        f.push_back(cur);
        cur.clear();
      } else {
        cur += *c;
      }
    }
    f.push_back(cur);
    if (f.size() != 6) continue;
    const std::string key = f[0] + "/" + f[1] + "/" + f[2] + "/" + f[3];
    out[key] = std::stod(f[4]);
    if (!f[5].empty()) out[key + "#last"] = std::stod(f[5]);
  }
  if (::pclose(p) != 0) out.clear();
  return out;
}

namespace {

std::vector<std::string> Groups(const std::smatch& m) {
  std::vector<std::string> g;
  for (const auto& sub : m) g.push_back(sub.str());
  return g;
}

}  // namespace

std::vector<std::string> RegexSearch(const std::string& text, const std::string& pattern) {
  std::smatch m;
  return std::regex_search(text, m, std::regex(pattern)) ? Groups(m) : std::vector<std::string>{};
}

std::vector<std::vector<std::string>> RegexFindAll(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  std::vector<std::vector<std::string>> all;
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) all.push_back(Groups(*it));
  return all;
}

bool RegexMatch(const std::string& text, const std::string& pattern) { return std::regex_match(text, std::regex(pattern)); }

}  // namespace dsc::test
