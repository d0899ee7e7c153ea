#include "reader/torch_adapter.h"

#include <torch/torch.h>

#include <thread>

#include "format/error.h"
#include "kernels/cpu.h"

namespace dsc::torch_view {

namespace {

at::ScalarType ScalarOf(DType t) {
  switch (t) {
    case DType::kFloat32: return at::kFloat;
    case DType::kFloat16: return at::kHalf;
    case DType::kUint8: return at::kByte;
  }
  return at::kFloat;
}

at::Tensor View(void* data, at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType t, at::Device dev) {
  return torch::from_blob(data, sizes, strides, torch::TensorOptions().dtype(t).device(dev));
}

at::Tensor ImagesOn(void* data, int64_t n, int64_t c, int64_t h, int64_t w, Layout layout, DType dtype, at::Device dev) {
  if (layout == Layout::kNCHW) return View(data, {n, c, h, w}, {c * h * w, h * w, w, 1}, ScalarOf(dtype), dev);
  return View(data, {n, c, h, w}, {c * h * w, 1, c * w, c}, ScalarOf(dtype), dev);  // channels_last
}

}  // namespace

at::Tensor Images(const Batch& b) {
  // A GPU-decode batch's staged slots hold no pixels yet: a view would hand out garbage as images.
  if (b.staged != nullptr)
    throw Error("batch " + std::to_string(b.index) + " of epoch " + std::to_string(b.epoch) +
                " carries staged JPEG payloads (Decoder::kGpu): its images exist only after gpu::Augmenter::Process "
                "(use DeviceImages on the result)");
  return ImagesOn(const_cast<void*>(b.images), b.size, b.channels, b.height, b.width, b.layout, b.dtype, at::kCPU);
}

at::Tensor Labels(const Batch& b, size_t field) {
  if (field >= b.label_fields) throw Error("the file has no label field " + std::to_string(field));
  return View(const_cast<int32_t*>(b.labels[field]), {int64_t(b.size)}, {1}, at::kInt, at::kCPU);
}

at::Tensor Indices(const Batch& b) {
  // libtorch has no uint32: an int32 view would turn indices past 2^31 negative, so widen (N values).
  at::Tensor out = torch::empty({int64_t(b.size)}, torch::TensorOptions().dtype(at::kLong));
  int64_t* dst = out.data_ptr<int64_t>();
  for (uint32_t i = 0; i < b.size; ++i) dst[i] = b.indices[i];
  return out;
}

at::Tensor Padding(const Batch& b) {
  return View(const_cast<uint8_t*>(b.padding), {int64_t(b.size)}, {1}, at::kBool, at::kCPU);
}

at::Tensor ImagesOwned(const Batch& b) { return Images(b).clone(); }
at::Tensor LabelsOwned(const Batch& b, size_t field) { return Labels(b, field).clone(); }

bool TorchHasCuda() { return torch::cuda::is_available(); }

at::Tensor DeviceImages(const gpu::DeviceBatch& d) {
  if (!TorchHasCuda())
    throw Error("this libtorch has no usable CUDA (Debian's libtorch is CPU-only): use DeviceBatch::images, a raw "
                "device pointer, instead");
  return ImagesOn(d.images, d.size, 3, d.height, d.width, d.layout, d.dtype, at::Device(at::kCUDA, int8_t(d.device)));
}

int ShareCores(int loader_threads) {
  const int cores = kernels::UsableCores();
  const int torch_threads = std::max(1, cores - loader_threads);
  torch::set_num_threads(torch_threads);
  return torch_threads;
}

}  // namespace dsc::torch_view
