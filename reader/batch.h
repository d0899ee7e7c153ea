// A batch as the loader hands it out (Batch), and a handle that keeps one past the iterator's next
// step (BatchLease). Part of the loader's API: reader/loader.h includes it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "kernels/augment.h"
#include "kernels/transform_steps.h"

namespace dsc {

// The element type and memory layout of a batch's images (LoaderOptions::dtype, ::layout).
enum class DType : uint8_t { kFloat32, kFloat16, kUint8 };
enum class Layout : uint8_t { kNCHW, kNHWC };
size_t DTypeSize(DType t);

// One typed field's values for a batch (format 1.2, docs/format.md "Typed fields"). Fixed fields
// (scalars, fixed arrays) are [size, shape...] contiguous; variable ones (variable arrays, bytes, text)
// are their values back to back, sample i's in data[offsets[i], offsets[i + 1]).
struct FieldColumn {
  const char* name = nullptr;
  uint8_t type = 0;               // format::FieldType: 3 scalar, 4 array, 5 var_array, 6 bytes, 7 text
  uint8_t dtype = 0;              // format::DType (0 for bytes and text)
  const uint32_t* shape = nullptr;  // fixed: the value's shape; variable array: the trailing shape
  size_t ndim = 0;
  size_t elem_bytes = 0;          // fixed: bytes per sample; variable array: bytes per row of the first dimension; else 1
  const uint8_t* data = nullptr;
  const uint64_t* offsets = nullptr;  // variable fields: size + 1 byte offsets; null for fixed ones
};

// One batch, valid until the next one is requested (or the range ends), unless leased (BatchLease).
struct Batch {
  uint64_t epoch = 0;
  uint64_t index = 0;        // batch number within the epoch
  uint32_t size = 0;         // samples in this batch, padding included
  uint32_t padding_count = 0;
  const void* images = nullptr;
  DType dtype = DType::kFloat32;
  Layout layout = Layout::kNCHW;
  uint32_t channels = 3, height = 0, width = 0;
  const int32_t* labels[2] = {nullptr, nullptr};  // per label field; labels[f][i] for sample i
  size_t label_fields = 0;
  const uint32_t* indices = nullptr;  // dataset index of each sample
  const uint8_t* padding = nullptr;   // 1: the sample repeats another to fill the batch
  // Each sample's augmentation parameters. With defer_augment they describe the work left to do on
  // the uint8 images (source region = the whole image); otherwise what was already applied.
  const kernels::SampleParams* params = nullptr;
  bool deferred = false;  // LoaderOptions::defer_augment: images un-augmented, params say what is left
  // With defer_augment and LoaderOptions::transforms: the list's drawn steps (kernels/transform_steps.h),
  // steps_per_sample for each sample in order, to run on the uint8 images before params' flip /
  // translate / cutout (gpu::Augmenter does; kernels::RunStepsCpu is the same code on the CPU). Drawn
  // from each sample's own stream, so the same for any thread, rank or remote-worker count.
  const kernels::TransformStep* steps = nullptr;
  uint32_t steps_per_sample = 0;
  // LoaderOptions::Decoder::kGpu: the staged payloads (kernels/jpeg_twin_batch.h, in the same buffer
  // right after the images, so one copy moves both). Staged image i decodes into the batch's images at
  // byte offset TwinImage::rgb (its sample's slot); the other slots already hold CPU-decoded pixels.
  // fallback[j]: 0 when sample j is staged, else why it was decoded on the CPU (a kernels::TwinReason,
  // or kNotJpeg).
  const uint8_t* staged = nullptr;
  size_t staged_bytes = 0;
  const uint8_t* fallback = nullptr;
  static constexpr uint8_t kNotJpeg = 31;
  // Typed fields: one column per field the loader reads (LoaderOptions::fields), in that order.
  const FieldColumn* fields = nullptr;
  size_t field_count = 0;
  template <typename T>
  const T* images_as() const { return static_cast<const T*>(images); }
  size_t image_bytes() const { return size_t(channels) * height * width * DTypeSize(dtype); }
};

// A batch kept past the iterator's next step: for an asynchronous copy to a GPU, a Python tensor view,
// a batch handed to another thread.
//
//   for (auto it = range.begin(); it != range.end(); ++it) {
//     dsc::BatchLease lease = it.lease();  // or loader.lease(*it)
//     copier.push(std::move(lease));       // the copy thread drops it when the transfer is done
//   }
//
// - Only the batch the iterator holds can be leased, before the next ++it (else dsc::Error). Leasing
//   it twice gives two handles to one lease.
// - A lease is a shared handle: copies share one reference count, and the batch (images, labels,
//   indices, padding, params) stays valid and unchanged until the last copy is destroyed or
//   release()d. Moving is free.
// - The loader replaces a leased buffer in its ring by a spare: a released one, or a new one while
//   fewer than LoaderOptions::max_leases spares exist, so memory never exceeds
//   (prefetch + 1 + max_leases) batches. Past that, the workers wait for a lease to be released
//   (backpressure) and so, a few batches later, does ++it: a consumer that holds more than
//   max_leases leases itself must release them from another thread, or it waits forever.
// - Leases may outlive their epoch range and the Loader: a lease released after the Loader is
//   destroyed frees its buffer (through LoaderOptions::release when set).
// - Without leases nothing changes: no allocation and no lock per batch.
class BatchLease {
 public:
  BatchLease() = default;
  const Batch& operator*() const { return *batch_; }
  const Batch* operator->() const { return batch_.get(); }
  const Batch* get() const { return batch_.get(); }
  explicit operator bool() const { return batch_ != nullptr; }
  // Gives this handle's share back; the handle is empty afterwards.
  void release() { batch_.reset(); }

 private:
  friend class Pipeline;
  explicit BatchLease(std::shared_ptr<const Batch> b) : batch_(std::move(b)) {}
  std::shared_ptr<const Batch> batch_;
};

}  // namespace dsc
