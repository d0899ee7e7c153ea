// Shared test helpers: scratch folders, the real CIFAR-10 in the build tree, a reference decoder.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace dsc::test {

// Root of the unpacked real CIFAR-10 ("<root>/train/<class>/NNNN.jpg", "<root>/test/...").
std::string CifarJpegRoot();
// The first n CIFAR-10 test JPEGs by path (sorted), real bytes for writer and loader tests.
std::vector<std::string> CifarTestJpegs(size_t n);
// Whether `text` contains `part` (error messages).
inline bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
// The real CIFAR-10 train and test splits, built with dsc build's defaults into a new scratch folder.
struct CifarFiles {
  std::string train, test;
};
CifarFiles BuildCifarFiles(const std::string& tag);
// A fresh, empty folder for this test (removed at the start of the next run, not at exit). Outside a
// test it is per process; remove it with RemoveScratch when done.
std::string ScratchDir(const std::string& tag = "");
// The real ImageNet photos of `archive` (../shared/data/imagenet-photos-500.tar.zst), unpacked once
// into the build tree; returns the "imagenet-photos-500" folder, or "" when unpacking failed. Test
// processes running at once each unpack privately and rename, so none sees a half-unpacked tree.
std::string PhotosTree(const std::string& archive);
void RemoveScratch(const std::string& dir);
// A class-per-folder tree holding the first `per_class` images of each class of `split`, as symlinks
// to the real files (fast to make; the writer reads through them).
std::string SubsetTree(int per_class, const std::string& split = "train", bool with_split_folders = false);

std::vector<uint8_t> ReadFile(const std::string& path);
void WriteFile(const std::string& path, const void* data, size_t size);
inline void WriteFile(const std::string& path, const std::vector<uint8_t>& v) { WriteFile(path, v.data(), v.size()); }

// Reference decode with TurboJPEG's own API, straight to RGB (flags: TJFLAG_*, e.g. FASTUPSAMPLE).
std::vector<uint8_t> ReferenceDecode(const std::vector<uint8_t>& jpeg, int* w = nullptr, int* h = nullptr, int flags = 0);
double Psnr(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b);

// Copies `from` to `to` with sample i's index entry claiming w x h, every checksum recomputed: only
// the lie about the image remains, as in a file a hostile or buggy writer hands over.
void ForgeDimensions(const std::string& from, const std::string& to, uint64_t i, uint16_t w, uint16_t h);
// The same for sample i's channels field.
void ForgeChannels(const std::string& from, const std::string& to, uint64_t i, uint8_t channels);

// Runs a shell command line; returns its exit code (128 + the signal when killed) and captures its
// stdout (add " 2>&1" for stderr too).
int RunShell(const std::string& cmd, std::string* output = nullptr);

// Runs `body` in a forked child; returns its exit code (body's result), 128 + the signal when one
// killed it, or -1 when it had not ended after `seconds` (it is then killed).
int RunForked(int seconds, const std::function<int()>& body);
// Lets this process's address space grow `headroom` bytes past its present size (room for a few
// thread stacks, say); for a forked child. Not under sanitizers: their runtimes reserve terabytes.
bool LimitAddressSpace(uint64_t headroom);

// Runs the dsc program with arguments; returns the exit code and captures stdout+stderr.
int RunDsc(const std::string& args, std::string* output = nullptr);

// A Chrome trace file read by Python's json module (tests/trace_summary.py): event counts keyed
// "span/GROUP/ROW/NAME" and "counter/GROUP/NAME/value" (the last value under "...#last"). Empty when
// the file does not parse.
std::map<std::string, double> TraceSummary(const std::string& path);

// ECMAScript regular expressions, compiled in test_util.cc only: <regex> costs each file that includes
// it 15 s of Release and ~90 s of ASan+UBSan compile (gcc 12).
// The first match's groups (0: the whole match); empty when nothing matches.
std::vector<std::string> RegexSearch(const std::string& text, const std::string& pattern);
// Every match's groups, in order.
std::vector<std::vector<std::string>> RegexFindAll(const std::string& text, const std::string& pattern);
// Whether the whole text matches.
bool RegexMatch(const std::string& text, const std::string& pattern);

}  // namespace dsc::test
