// Dataset sources: where the samples of a build come from. A Source lists its samples up front (so the
// count and order are known) and loads any one of them on demand, from any thread.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/error.h"

namespace dsc::writer {

struct LabelField {
  std::string name;                  // "label", "fine_label", "coarse_label"
  std::vector<std::string> classes;  // classes[i] names value i; may be empty
};

// A mask (format 1.2's type 8) that travels with the sample's image: a PNG, or raw pixels.
struct MaskInput {
  std::string field;            // its name, for messages
  int channels = 1;             // the field's: 1 or 3
  bool is_pixels = false;       // true: `bytes` holds width*height*channels values
  int width = 0, height = 0;    // for pixels
  std::vector<uint8_t> bytes;
  std::string where;            // names the file it came from, when it did ("" otherwise)
};

// A further image (format 1.3) of a typed sample: encoded bytes, pixels, or a file read on the
// encode thread; encoded as the sample's first image is.
struct ImageInput {
  bool is_pixels = false;       // true: `bytes` holds width*height*3 RGB pixels
  int width = 0, height = 0;    // for pixels
  std::vector<uint8_t> bytes;
  std::string file;             // non-empty: `bytes` are this file's contents, read by the writer
  std::string where;            // names the sample and field in messages
};

struct SourceItem {
  bool is_pixels = false;       // true: `bytes` holds width*height*3 RGB pixels; false: an encoded file
  int width = 0, height = 0;    // for pixels
  std::vector<uint8_t> bytes;
  int32_t label[2] = {0, 0};
  std::string where;            // names the sample in messages: a path, or "FILE record N"
  std::vector<MaskInput> masks;  // typed files only (dsc::Writer)
  std::vector<ImageInput> images;  // further images, in field order (dsc::Writer)
};

class Source {
 public:
  virtual ~Source() = default;
  virtual std::string format() const = 0;  // "cifar-binary", "cifar-python", "tree", "manifest"
  virtual const std::vector<LabelField>& label_fields() const = 0;
  virtual size_t size() const = 0;
  // Thread-safe. Throws dsc::Error naming the file when the sample cannot be read.
  virtual void Load(size_t i, SourceItem* out) const = 0;
  // Paths of files the source saw but does not use (reported to the user, never silently dropped).
  virtual std::vector<std::string> ignored() const { return {}; }
  // Facts the user should hear that are not errors (a class with no images keeps its label).
  virtual std::vector<std::string> notes() const { return {}; }
  // The listed sample file that is `path` (the same device and inode), or "": a build must not
  // replace a file it reads.
  virtual std::string SampleFileAt(const std::string& path) const { return (void)path, std::string(); }
};

// Source files larger than this are refused (checked with stat before reading): `--max-file-size`.
constexpr uint64_t kDefaultMaxFileSize = uint64_t(1) << 30;

// Opens `path` as `format` ("auto", "cifar-binary", "cifar-python", "tree", "manifest"), selecting
// `split` ("train" or "test"). Throws dsc::Error explaining what was expected.
std::unique_ptr<Source> OpenSource(const std::string& path, const std::string& format, const std::string& split,
                                   uint64_t max_file_size = kDefaultMaxFileSize);

std::unique_ptr<Source> OpenCifarBinary(const std::string& dir, const std::string& split);
std::unique_ptr<Source> OpenCifarPython(const std::string& dir, const std::string& split);
// Image files over `max_file_size` bytes are an error naming them. Symlinked folders in a tree are
// followed, but one that leads back to a folder it is inside (a loop) is an error naming the link.
std::unique_ptr<Source> OpenImageTree(const std::string& dir, const std::string& split,
                                      uint64_t max_file_size = kDefaultMaxFileSize);
std::unique_ptr<Source> OpenManifest(const std::string& file, uint64_t max_file_size = kDefaultMaxFileSize);
// WebDataset shards: one .tar (plain or compressed), a folder of them (sorted by name), or a brace pattern
// "shards-{0000..0099}.tar". Members sharing a key form a sample: KEY.jpg/.jpeg/.png the image, KEY.cls
// the class as decimal text, KEY.json a text field (writer/source_wds.h); other members are listed in
// ignored(). Samples keep shard and member order.
std::unique_ptr<Source> OpenWebDataset(const std::string& spec, uint64_t max_file_size = kDefaultMaxFileSize);
// A tar name or a brace pattern: what `--format auto` takes for WebDataset shards.
bool LooksLikeWebDataset(const std::string& path);

// The CIFAR-10 class names, in label order (used when a download's meta file is missing).
const std::vector<std::string>& Cifar10ClassNames();

// A failure of the machine, not of a sample: out of memory or file descriptors, an I/O error. A build
// stops on it even with --skip-invalid, which would otherwise skip samples by the moment's luck and
// write a different file each run.
class EnvironmentError : public Error {
 public:
  using Error::Error;
};

// `what` + ": " + strerror(err), thrown as EnvironmentError when `err` says the machine failed (EMFILE,
// ENFILE, ENOMEM, ENOBUFS, EAGAIN, EIO), else as Error (the file itself: missing, unreadable, ...).
[[noreturn]] void ThrowFileError(const std::string& what, int err);

// Reads a whole file; throws dsc::Error naming it, also when it is larger than `max_size` (checked
// before anything is allocated).
std::vector<uint8_t> ReadWholeFile(const std::string& path, uint64_t max_size = kDefaultMaxFileSize);

}  // namespace dsc::writer
