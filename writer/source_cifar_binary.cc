// CIFAR-10 / CIFAR-100 "binary version": fixed-size records, so samples are read lazily with pread.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "format/error.h"
#include "writer/source.h"
#include "writer/source_cifar.h"

namespace dsc::writer {

namespace fs = std::filesystem;

std::vector<std::string> ReadNameLines(const std::string& path) {
  std::vector<std::string> names;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) names.push_back(line);
  }
  return names;
}

namespace {

class CifarBinary : public Source {
 public:
  CifarBinary(const std::string& dir, const std::string& split) {
    std::error_code ec;
    const bool hundred = fs::exists(fs::path(dir) / "train.bin", ec) || fs::exists(fs::path(dir) / "test.bin", ec);
    std::vector<std::string> files;
    if (hundred) {
      label_bytes_ = 2;
      files.push_back((fs::path(dir) / (split + ".bin")).string());
      fields_ = {{"fine_label", ReadNameLines((fs::path(dir) / "fine_label_names.txt").string())},
                 {"coarse_label", ReadNameLines((fs::path(dir) / "coarse_label_names.txt").string())}};
    } else {
      label_bytes_ = 1;
      if (split == "test") {
        files.push_back((fs::path(dir) / "test_batch.bin").string());
      } else {
        for (int i = 1;; ++i) {
          auto f = fs::path(dir) / ("data_batch_" + std::to_string(i) + ".bin");
          if (!fs::exists(f, ec)) break;
          files.push_back(f.string());
        }
        if (fs::exists(fs::path(dir) / ("data_batch_" + std::to_string(files.size() + 2) + ".bin"), ec))
          throw Error(dir + ": data_batch_" + std::to_string(files.size() + 1) + ".bin is missing but later batches exist");
      }
      auto names = ReadNameLines((fs::path(dir) / "batches.meta.txt").string());
      fields_ = {{"label", names.empty() ? Cifar10ClassNames() : names}};
    }
    if (files.empty()) throw Error(dir + ": no CIFAR binary batch files for split '" + split + "'");
    record_ = label_bytes_ + kCifarPixels;
    for (const auto& f : files) {
      int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        const int e = errno;
        throw Error(f + ": cannot open: " + std::strerror(e));
      }
      struct stat st;
      ::fstat(fd, &st);
      if (st.st_size == 0 || size_t(st.st_size) % record_ != 0) {
        ::close(fd);
        throw Error(f + ": size " + std::to_string(st.st_size) + " is not a positive multiple of the " +
                    std::to_string(record_) + "-byte CIFAR record (truncated or not a CIFAR binary batch)");
      }
      files_.push_back({f, fd, size_t(st.st_size) / record_});
      total_ += files_.back().records;
    }
  }
  ~CifarBinary() override {
    for (auto& f : files_) ::close(f.fd);
  }

  std::string format() const override { return "cifar-binary"; }
  const std::vector<LabelField>& label_fields() const override { return fields_; }
  size_t size() const override { return total_; }

  void Load(size_t i, SourceItem* out) const override {
    size_t k = 0;
    while (i >= files_[k].records) i -= files_[k++].records;
    const File& f = files_[k];
    uint8_t rec[2 + kCifarPixels];
    const off_t off = off_t(i * record_);
    ssize_t r = ::pread(f.fd, rec, record_, off);
    if (r != ssize_t(record_)) {
      const int e = errno;  // before the message's allocations can touch it
      const std::string where = f.path + ": record " + std::to_string(i) + ": read failed at byte " + std::to_string(off);
      if (r < 0) ThrowFileError(where, e);
      throw Error(where + ": file shrank during the build");
    }
    out->where = f.path + " record " + std::to_string(i);
    out->is_pixels = true;
    out->width = out->height = kCifarSide;
    out->bytes.resize(kCifarPixels);
    CifarPlanarToHwc(rec + label_bytes_, out->bytes.data());
    // CIFAR-100 stores (coarse, fine); the file's first label field is the fine one.
    out->label[0] = label_bytes_ == 2 ? rec[1] : rec[0];
    out->label[1] = label_bytes_ == 2 ? rec[0] : 0;
    for (size_t fi = 0; fi < fields_.size(); ++fi) {
      const auto& cls = fields_[fi].classes;
      if (!cls.empty() && size_t(out->label[fi]) >= cls.size())
        throw Error(out->where + ": " + fields_[fi].name + " " + std::to_string(out->label[fi]) + " is out of range (" +
                    std::to_string(cls.size()) + " classes)");
    }
  }

 private:
  struct File {
    std::string path;
    int fd;
    size_t records;
  };
  size_t label_bytes_ = 1, record_ = 0, total_ = 0;
  std::vector<File> files_;
  std::vector<LabelField> fields_;
};

}  // namespace

std::unique_ptr<Source> OpenCifarBinary(const std::string& dir, const std::string& split) {
  return std::make_unique<CifarBinary>(dir, split);
}

}  // namespace dsc::writer
