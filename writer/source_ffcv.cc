// An FFCV .beton file as a build source (`dsc convert`): the same samples in the same order, JPEG
// payloads as stored (the build adds restart markers losslessly), raw images as pixels (stored raw).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "format/ffcv.h"
#include "writer/source.h"
#include "writer/source_ffcv.h"

namespace dsc::writer {

namespace {

namespace ffcv = format::ffcv;

// pread, so that loads from many threads share one descriptor and nothing is mapped.
class PreadSource : public format::ByteSource {
 public:
  explicit PreadSource(const std::string& path) : name_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) ThrowFileError(path + ": cannot open", errno);
    struct stat st;
    if (::fstat(fd_, &st) != 0) ThrowFileError(path + ": cannot stat", errno);
    size_ = uint64_t(st.st_size);
  }
  ~PreadSource() override { ::close(fd_); }
  const std::string& name() const override { return name_; }
  uint64_t size() const override { return size_; }
  const uint8_t* Read(uint64_t off, size_t n, std::vector<uint8_t>* scratch) const override {
    CheckRange(off, n);
    scratch->resize(n);
    for (size_t done = 0; done < n;) {
      const ssize_t r = ::pread(fd_, scratch->data() + done, n - done, off_t(off + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) ThrowFileError(name_ + ": read at byte " + std::to_string(off + done), errno);
      if (r == 0) throw Error(name_ + ": file shrank while reading byte " + std::to_string(off + done));
      done += size_t(r);
    }
    return scratch->data();
  }

 private:
  std::string name_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

class FfcvSource : public Source {
 public:
  explicit FfcvSource(const std::string& path) : bytes_(path), file_(ffcv::File::Open(&bytes_)) {
    std::string extra;
    for (size_t k = 0; k < file_->fields().size(); ++k) {
      const ffcv::Field& f = file_->fields()[k];
      if (f.type == ffcv::kRgbImage && image_ < 0) {
        image_ = int(k);
      } else if (f.type == ffcv::kInt && labels_.size() < 2 && ffcv::FitsInt32(*file_, k)) {
        labels_.push_back(k);
        label_fields_.push_back({f.name, {}});
      } else {
        const std::string why = f.type == ffcv::kInt && labels_.size() < 2 ? " with values beyond int32" : "";
        extra += (extra.empty() ? "" : ", ") + ("'" + f.name + "' (" + ffcv::TypeName(f.type) + why + ")");
      }
    }
    if (image_ < 0) throw Error(path + ": FFCV file without an RGBImageField: a dsc file holds an image per sample");
    if (!extra.empty())
      throw Error(path + ": FFCV fields " + extra + " need typed fields, which this build of dsc does not have: it converts "
                  "one RGBImageField and up to two IntFields (the loader reads such files as they are)");
  }
  std::string format() const override { return "ffcv"; }
  const std::vector<LabelField>& label_fields() const override { return label_fields_; }
  size_t size() const override { return size_t(file_->sample_count()); }
  std::string SampleFileAt(const std::string& path) const override {
    struct stat a, b;
    if (::stat(path.c_str(), &a) != 0 || ::stat(bytes_.name().c_str(), &b) != 0) return "";
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino ? bytes_.name() : "";
  }

  void Load(size_t i, SourceItem* out) const override {
    const ffcv::Image im = file_->image(i, size_t(image_));
    const ffcv::Span s = file_->span(i, size_t(image_));
    out->where = bytes_.name() + " sample " + std::to_string(i);
    const uint8_t* p = bytes_.Read(s.ptr, size_t(s.size), &out->bytes);
    if (p != out->bytes.data()) out->bytes.assign(p, p + s.size);
    out->is_pixels = im.mode == 1;
    out->width = im.width;
    out->height = im.height;
    for (size_t l = 0; l < labels_.size(); ++l) {
      const int64_t v = file_->int_value(i, labels_[l]);
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        throw Error(bytes_.name() + ": " + ffcv::File::Where(i, file_->fields()[labels_[l]]) + ": label " + std::to_string(v) +
                    " is outside int32, dsc's label type");
      out->label[l] = int32_t(v);
    }
  }

 private:
  PreadSource bytes_;
  std::unique_ptr<ffcv::File> file_;
  int image_ = -1;
  std::vector<size_t> labels_;
  std::vector<LabelField> label_fields_;
};

}  // namespace

bool IsFfcvFile(const std::string& path) {
  try {
    PreadSource src(path);
    return ffcv::IsFfcv(src);
  } catch (const Error&) {
    return false;
  }
}

std::unique_ptr<Source> OpenFfcv(const std::string& path) { return std::make_unique<FfcvSource>(path); }

}  // namespace dsc::writer
