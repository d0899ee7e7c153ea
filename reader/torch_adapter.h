// libtorch views of dsc batches (built when find_package(Torch) succeeds; link dsc::torch).
//
// Lifetime: the tensors returned by Images/Labels/Padding are zero-copy views of the loader's batch
// buffer (torch::from_blob) and are valid only until the next batch is requested or the range ends.
// Use the *Owned variants (one copy) to keep a batch longer.
#pragma once
#include <ATen/core/Tensor.h>

#include "reader/gpu.h"
#include "reader/loader.h"

namespace dsc::torch_view {

// Images as a logical (N, 3, H, W) tensor: contiguous for NCHW batches, channels_last strides for
// NHWC batches. dtype float32, float16 or uint8 as the loader produced them. Throws dsc::Error for a
// Decoder::kGpu batch (its staged images are decoded by gpu::Augmenter: use DeviceImages).
at::Tensor Images(const Batch& b);
at::Tensor Labels(const Batch& b, size_t field = 0);  // int32, (N)
at::Tensor Indices(const Batch& b);                   // int64, (N), a copy: dataset index of each sample
at::Tensor Padding(const Batch& b);                   // bool, (N): true for padding repeats
at::Tensor ImagesOwned(const Batch& b);
at::Tensor LabelsOwned(const Batch& b, size_t field = 0);

// A CUDA tensor over a gpu::DeviceBatch (no copy). Needs a libtorch built with CUDA; Debian's is
// CPU-only, in which case this throws dsc::Error saying so (use the raw pointer in DeviceBatch).
at::Tensor DeviceImages(const gpu::DeviceBatch& d);
bool TorchHasCuda();

// Splits the cores between libtorch's intra-op pool and the loader's workers so that together they
// do not oversubscribe the machine. Returns the thread count given to libtorch.
int ShareCores(int loader_threads);

}  // namespace dsc::torch_view
