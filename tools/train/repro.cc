#include "tools/train/repro.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "format/checksum.h"
#include "format/error.h"

namespace dsc::train {

void SaveWeights(ResNet9& model, const std::string& path) {
  std::ofstream o(path, std::ios::binary);
  auto put = [&](const std::string& name, const torch::Tensor& t) {
    auto c = t.detach().to(torch::kCPU).contiguous();
    o << name << " " << c.element_size() << " " << c.numel() << "\n";
    o.write(static_cast<const char*>(c.data_ptr()), std::streamsize(c.numel() * c.element_size()));
  };
  for (const auto& p : model->named_parameters()) put(p.key(), p.value());
  for (const auto& p : model->named_buffers()) put(p.key(), p.value());
  o.close();
  if (!o) throw Error(path + ": write failed");
}

StepLog::StepLog(const std::string& path) : path_(path) {
  if (path.empty()) return;
  f_.reset(std::fopen(path.c_str(), "w"));
  if (!f_) {
    const int e = errno;
    throw Error(path + ": cannot write: " + std::strerror(e));
  }
}

void StepLog::Add(const Batch& b, double loss) {
  if (!f_) return;
  std::fprintf(f_.get(), "%llu %llu %016llx %016llx %.9g\n", (unsigned long long)b.epoch, (unsigned long long)b.index,
               (unsigned long long)Checksum(b.images, b.size * b.image_bytes()),
               (unsigned long long)Checksum(b.labels[0], b.size * sizeof(int32_t)), loss);
}

void StepLog::Close() {
  if (!f_) return;
  const bool ok = std::fflush(f_.get()) == 0 && !std::ferror(f_.get());
  f_.reset();
  if (!ok) throw Error(path_ + ": write failed");
}

}  // namespace dsc::train
