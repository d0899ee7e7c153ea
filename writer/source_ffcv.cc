// An FFCV .beton file as a build source (`dsc convert`): the same samples in the same order, JPEG
// payloads as stored (the build adds restart markers losslessly), raw images as pixels (stored raw).
// Fields beyond an image and IntFields as labels are written as typed fields (BuildFfcvTyped), a
// second RGBImageField as a further image (format 1.3).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>

#include "format/ffcv.h"
#include "writer/source.h"
#include "writer/source_ffcv.h"
#include "writer/typed_build.h"
#include "writer/writer.h"

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
  explicit FfcvSource(std::unique_ptr<format::ByteSource> bytes)
      : bytes_(std::move(bytes)), file_(ffcv::File::Open(bytes_.get())), plan_(ffcv::PlanConversion(*file_)) {
    image_ = int(plan_.from[0]);
    for (size_t k = 1; k < plan_.fields.size() && plan_.fields[k].type == format::FieldType::kLabel; ++k) {
      labels_.push_back(plan_.from[k]);
      label_fields_.push_back({plan_.fields[k].name, {}});
    }
    if (plan_.typed) {
      format::Meta m;
      m.fields = plan_.fields;
      width_ = format::FieldLayout::Of(m).width;
    }
  }
  bool typed() const { return plan_.typed; }
  BuildReport BuildTyped(const std::string& out, const BuildOptions& o) const;
  std::string format() const override { return "ffcv"; }
  const std::vector<LabelField>& label_fields() const override { return label_fields_; }
  size_t size() const override { return size_t(file_->sample_count()); }
  std::string SampleFileAt(const std::string& path) const override {
    struct stat a, b;
    if (::stat(path.c_str(), &a) != 0 || ::stat(bytes_->name().c_str(), &b) != 0) return "";
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino ? bytes_->name() : "";
  }

  void Load(size_t i, SourceItem* out) const override {
    const ffcv::Image im = file_->image(i, size_t(image_));
    const ffcv::Span s = file_->span(i, size_t(image_));
    ahead_.At(s.ptr);
    out->where = bytes_->name() + " sample " + std::to_string(i);
    const uint8_t* p = bytes_->Read(s.ptr, size_t(s.size), &out->bytes);
    if (p != out->bytes.data()) out->bytes.assign(p, p + s.size);
    else out->bytes.resize(size_t(s.size));  // a source may leave the scratch longer than the read
    out->is_pixels = im.mode == 1;
    out->width = im.width;
    out->height = im.height;
    if (!out->is_pixels) CheckJpegSize(i, size_t(image_), im, out->bytes.data(), out->bytes.size());
    for (size_t l = 0; l < labels_.size(); ++l) {
      const int64_t v = file_->int_value(i, labels_[l]);
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        throw Error(bytes_->name() + ": " + ffcv::File::Where(i, file_->fields()[labels_[l]]) + ": label " + std::to_string(v) +
                    " is outside int32, dsc's label type");
      out->label[l] = int32_t(v);
    }
  }

 private:
  // A JPEG whose frame disagrees with FFCV's metadata: the file is damaged (`dsc verify` says so too),
  // and which size is right is unknown, so convert stops rather than pick one.
  void CheckJpegSize(size_t i, size_t field, const ffcv::Image& im, const uint8_t* p, size_t n) const {
    int w = 0, h = 0, c = 0;
    std::string why;
    const std::string where = bytes_->name() + ": " + ffcv::File::Where(i, file_->fields()[field]);
    if (!ffcv::JpegFrame(p, n, &w, &h, &c, &why)) throw Error(where + ": JPEG header: " + why);
    if (w != im.width || h != im.height)
      throw Error(where + ": JPEG is " + std::to_string(w) + "x" + std::to_string(h) + ", the metadata says " +
                  std::to_string(im.width) + "x" + std::to_string(im.height));
  }

  std::unique_ptr<format::ByteSource> bytes_;
  std::unique_ptr<ffcv::File> file_;
  ffcv::PagesAhead ahead_{*file_, *bytes_};  // a URL's pages fetched ahead of the samples loaded
  ffcv::Conversion plan_;
  int image_ = -1;
  std::vector<size_t> labels_;
  std::vector<LabelField> label_fields_;
  std::vector<uint64_t> width_;  // plan_.fields[k]'s row width (format::FieldLayout), typed files
};

BuildReport FfcvSource::BuildTyped(const std::string& out, const BuildOptions& o) const {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.shard_count) throw OptionError(bytes_->name() + ": an FFCV file with typed fields converts whole (no shards)");
  if (file_->sample_count() == 0) throw Error(bytes_->name() + ": no samples to write");
  WriterOptions wo = TypedWriterOptions(o, "ffcv");
  BuildReport rep;
  rep.format = "ffcv";
  if (o.skip_invalid) {
    auto log = o.log ? o.log : [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
    wo.on_skip = [&rep, log](const std::string& why) {
      log("skipped: " + why);
      ++rep.skipped;
    };
  }
  Writer w(out, plan_.fields, wo);
  const auto& fields = file_->fields();
  const uint64_t n = file_->sample_count();
  SourceItem item;
  std::vector<uint8_t> scratch;
  for (uint64_t i = 0; i < n; ++i) {
    Load(size_t(i), &item);
    Sample s;
    s.set_where(item.where);
    if (item.is_pixels) s.SetPixels(plan_.fields[0].name, std::move(item.bytes), item.width, item.height);
    else s.SetImage(plan_.fields[0].name, std::move(item.bytes));
    for (size_t c = 1; c < plan_.fields.size(); ++c) {
      const format::Field& df = plan_.fields[c];
      const ffcv::Field& f = fields[plan_.from[c]];
      auto fail = [&](const std::string& why) {
        throw Error(bytes_->name() + ": " + ffcv::File::Where(i, f) + " (" + ffcv::TypeName(f.type) + "): " + why);
      };
      switch (f.type) {
        case ffcv::kInt:
          if (df.type == format::FieldType::kLabel) s.SetLabel(df.name, int32_t(file_->int_value(i, plan_.from[c])));  // PlanConversion: 0 .. 2^31 - 1
          else s.SetScalar<int64_t>(df.name, file_->int_value(i, plan_.from[c]));
          break;
        case ffcv::kFloat: s.SetScalar<double>(df.name, file_->float_value(i, plan_.from[c])); break;
        case ffcv::kRgbImage: {  // a further image: as the first, JPEG as stored, raw as pixels
          const ffcv::Image im = file_->image(i, plan_.from[c]);
          const ffcv::Span sp = file_->span(i, plan_.from[c]);
          const uint8_t* p = bytes_->Read(sp.ptr, size_t(sp.size), &scratch);
          std::vector<uint8_t> payload(p, p + sp.size);
          if (im.mode != 1) CheckJpegSize(size_t(i), plan_.from[c], im, payload.data(), payload.size());
          if (im.mode == 1) s.SetPixels(df.name, std::move(payload), im.width, im.height);
          else s.SetImage(df.name, std::move(payload));
          break;
        }
        default: {
          // File::Open checked every span lies inside one data page: the read is bounded by the file.
          const ffcv::Span sp = ffcv::ValueSpan(*file_, i, plan_.from[c]);
          const uint8_t* p = bytes_->Read(sp.ptr, size_t(sp.size), &scratch);
          const size_t size = size_t(sp.size);
          if (const std::string why = ffcv::ValueProblem(*file_, i, plan_.from[c], df, width_[c], p, size); !why.empty()) fail(why);
          if (f.type == ffcv::kJson) s.SetText(df.name, std::string(reinterpret_cast<const char*>(p), size));
          else if (f.type == ffcv::kBytes) s.SetBytes(df.name, std::vector<uint8_t>(p, p + size));
          else s.SetRaw(df.name, df.dtype, p, size);
        }
      }
    }
    w.Add(std::move(s));
    if (o.progress && (i % 1024 == 0 || i + 1 == n)) std::fprintf(stderr, "\r%llu/%llu samples", (unsigned long long)(i + 1), (unsigned long long)n);
  }
  if (o.progress) std::fputc('\n', stderr);
  CloseTypedBuild(&w, t0, &rep);
  return rep;
}

}  // namespace

bool IsFfcvFile(const std::string& path) {
  try {
    PreadSource src(path);
    return ffcv::IsFfcv(src);
  } catch (const Error&) {
    return false;
  }
}

std::unique_ptr<Source> OpenFfcv(const std::string& path) { return std::make_unique<FfcvSource>(std::make_unique<PreadSource>(path)); }

std::unique_ptr<Source> OpenFfcv(std::unique_ptr<format::ByteSource> bytes) {
  if (!ffcv::IsFfcv(*bytes)) throw Error(bytes->name() + ": not an FFCV .beton file (dsc build compiles other sources)");
  return std::make_unique<FfcvSource>(std::move(bytes));
}

bool FfcvNeedsTypedFields(const Source& src) {
  const auto* f = dynamic_cast<const FfcvSource*>(&src);
  return f && f->typed();
}

BuildReport BuildFfcvTyped(const Source& src, const std::string& out, const BuildOptions& options) {
  return dynamic_cast<const FfcvSource&>(src).BuildTyped(out, options);
}

}  // namespace dsc::writer
