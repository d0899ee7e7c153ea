// CIFAR-10 / CIFAR-100 "python version": pickled dicts, parsed in C++ (writer/pickle.h). Each batch is
// parsed whole, so a CIFAR split's pixels (150 MB for CIFAR-10 train) are held during the build.
#include <filesystem>

#include "format/error.h"
#include "writer/pickle.h"
#include "writer/source.h"
#include "writer/source_cifar.h"

namespace dsc::writer {

namespace fs = std::filesystem;

namespace {

pickle::Ref ParseFile(const std::string& path) {
  auto bytes = ReadWholeFile(path);
  try {
    return pickle::Parse(bytes.data(), bytes.size());
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

std::vector<std::string> NamesFrom(const std::string& path, const char* key) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return {};
  auto root = ParseFile(path);
  const pickle::Value* v = pickle::DictGet(*root, key);
  if (!v) throw Error(path + ": no '" + std::string(key) + "' entry");
  return pickle::ToStrings(*v, path + ": " + key);
}

class CifarPython : public Source {
 public:
  CifarPython(const std::string& dir, const std::string& split) {
    std::error_code ec;
    const bool hundred = fs::exists(fs::path(dir) / "train", ec) || fs::exists(fs::path(dir) / "test", ec);
    std::vector<std::string> files;
    if (hundred) {
      files.push_back((fs::path(dir) / split).string());
      std::string meta = (fs::path(dir) / "meta").string();
      fields_ = {{"fine_label", NamesFrom(meta, "fine_label_names")},
                 {"coarse_label", NamesFrom(meta, "coarse_label_names")}};
    } else {
      if (split == "test") {
        files.push_back((fs::path(dir) / "test_batch").string());
      } else {
        for (int i = 1; fs::exists(fs::path(dir) / ("data_batch_" + std::to_string(i)), ec); ++i)
          files.push_back((fs::path(dir) / ("data_batch_" + std::to_string(i))).string());
        if (fs::exists(fs::path(dir) / ("data_batch_" + std::to_string(files.size() + 2)), ec))
          throw Error(dir + ": data_batch_" + std::to_string(files.size() + 1) + " is missing but later batches exist");
      }
      auto names = NamesFrom((fs::path(dir) / "batches.meta").string(), "label_names");
      fields_ = {{"label", names.empty() ? Cifar10ClassNames() : names}};
    }
    if (files.empty()) throw Error(dir + ": no CIFAR python batch files for split '" + split + "'");
    for (const auto& f : files) AddBatch(f);
  }

  std::string format() const override { return "cifar-python"; }
  const std::vector<LabelField>& label_fields() const override { return fields_; }
  size_t size() const override { return where_.size(); }

  void Load(size_t i, SourceItem* out) const override {
    out->where = where_[i];
    out->is_pixels = true;
    out->width = out->height = kCifarSide;
    out->bytes.resize(kCifarPixels);
    CifarPlanarToHwc(pixels_.data() + i * kCifarPixels, out->bytes.data());
    out->label[0] = labels_[0][i];
    out->label[1] = fields_.size() > 1 ? labels_[1][i] : 0;
  }

 private:
  void AddBatch(const std::string& path) {
    auto root = ParseFile(path);
    const pickle::Value* data = pickle::DictGet(*root, "data");
    if (!data) throw Error(path + ": no 'data' entry (not a CIFAR python batch)");
    if (data->kind != pickle::Value::Kind::kArray || data->s != "u1" || data->shape.size() != 2 ||
        data->shape[1] != int64_t(kCifarPixels) || data->fortran ||
        data->data.size() != size_t(data->shape[0]) * kCifarPixels)
      throw Error(path + ": 'data' is not a C-ordered uint8 array of shape (N, 3072)");
    const size_t n = size_t(data->shape[0]);
    const char* keys[2] = {fields_.size() > 1 ? "fine_labels" : "labels", "coarse_labels"};
    for (size_t f = 0; f < fields_.size(); ++f) {
      const pickle::Value* v = pickle::DictGet(*root, keys[f]);
      if (!v) throw Error(path + ": no '" + std::string(keys[f]) + "' entry");
      auto ints = pickle::ToInts(*v, path + ": " + keys[f]);
      if (ints.size() != n)
        throw Error(path + ": " + keys[f] + " has " + std::to_string(ints.size()) + " entries for " + std::to_string(n) + " images");
      const auto& cls = fields_[f].classes;
      for (size_t i = 0; i < n; ++i) {
        if (ints[i] < 0 || (!cls.empty() && size_t(ints[i]) >= cls.size()) || ints[i] > INT32_MAX)
          throw Error(path + " record " + std::to_string(i) + ": " + keys[f] + " " + std::to_string(ints[i]) + " is out of range");
        labels_[f].push_back(int32_t(ints[i]));
      }
    }
    pixels_.insert(pixels_.end(), data->data.begin(), data->data.end());
    for (size_t i = 0; i < n; ++i) where_.push_back(path + " record " + std::to_string(i));
  }

  std::vector<LabelField> fields_;
  std::vector<uint8_t> pixels_;
  std::vector<int32_t> labels_[2];
  std::vector<std::string> where_;
};

}  // namespace

std::unique_ptr<Source> OpenCifarPython(const std::string& dir, const std::string& split) {
  return std::make_unique<CifarPython>(dir, split);
}

}  // namespace dsc::writer
