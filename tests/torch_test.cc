// The libtorch adapter: zero-copy views whose shapes, dtypes, strides and values are the loader's.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>

#include "format/error.h"
#include "reader/loader.h"
#include "reader/torch_adapter.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

std::string File() {
  auto dir = ScratchDir("-torch");
  writer::BuildOptions o;
  o.log = [](const std::string&) {};
  writer::Build(SubsetTree(20), dir + "/f.beton", o);
  return dir + "/f.beton";
}

TEST(Torch, ViewsAreZeroCopyWithTheLoadersShapesAndValues) {
  const std::string file = File();
  for (auto [dtype, layout] : {std::pair{DType::kFloat32, Layout::kNCHW}, {DType::kFloat32, Layout::kNHWC},
                               {DType::kFloat16, Layout::kNCHW}}) {
    LoaderOptions o = LoaderOptions::CifarTrain();
    o.batch_size = 64;
    o.dtype = dtype;
    o.layout = layout;
    Loader l(file, o);
    for (const Batch& b : l.epoch(0)) {
      at::Tensor x = torch_view::Images(b);
      ASSERT_EQ(x.data_ptr(), b.images) << "zero copy";
      ASSERT_EQ(x.sizes(), (std::vector<int64_t>{int64_t(b.size), 3, 32, 32}));
      ASSERT_EQ(x.scalar_type(), dtype == DType::kFloat32 ? at::kFloat : at::kHalf);
      if (layout == Layout::kNCHW) {
        ASSERT_TRUE(x.is_contiguous());
      } else {
        ASSERT_TRUE(x.is_contiguous(at::MemoryFormat::ChannelsLast));
      }
      // Element (n, c, y, x) of the tensor is the loader's value at the layout's position.
      const size_t elem = dtype == DType::kFloat32 ? 4 : 2;
      for (int64_t n : {int64_t(0), int64_t(b.size) - 1})
        for (int64_t c = 0; c < 3; ++c)
          for (int64_t yx : {int64_t(0), int64_t(517), int64_t(1023)}) {
            const int64_t y = yx / 32, xx = yx % 32;
            const size_t pos = layout == Layout::kNCHW ? size_t(((n * 3 + c) * 32 + y) * 32 + xx) : size_t(((n * 32 + y) * 32 + xx) * 3 + c);
            at::Tensor v = x.index({n, c, y, xx}).contiguous();
            ASSERT_EQ(std::memcmp(v.data_ptr(), static_cast<const uint8_t*>(b.images) + pos * elem, elem), 0);
          }
      at::Tensor lab = torch_view::Labels(b);
      ASSERT_EQ(lab.data_ptr(), static_cast<const void*>(b.labels[0]));
      ASSERT_EQ(lab.scalar_type(), at::kInt);
      ASSERT_EQ(lab.index({3}).item<int32_t>(), b.labels[0][3]);
      at::Tensor idx = torch_view::Indices(b);
      ASSERT_EQ(idx.scalar_type(), at::kLong);
      for (uint32_t i = 0; i < b.size; ++i) ASSERT_EQ(idx.index({int64_t(i)}).item<int64_t>(), int64_t(b.indices[i]));
      ASSERT_EQ(torch_view::Padding(b).sum().item<int64_t>(), int64_t(b.padding_count));
      at::Tensor owned = torch_view::ImagesOwned(b);
      ASSERT_NE(owned.data_ptr(), b.images);
      ASSERT_TRUE(owned.equal(x));
    }
  }
}

// Indices are uint32 in the batch; libtorch has no uint32, so past 2^31 an int32 view went negative.
TEST(Torch, IndicesPast2To31StayPositive) {
  const uint32_t indices[3] = {0, 0x80000000u, 0xFFFFFFFFu};
  Batch b;
  b.size = 3;
  b.indices = indices;
  at::Tensor t = torch_view::Indices(b);
  EXPECT_EQ(t.index({1}).item<int64_t>(), int64_t(0x80000000u));
  EXPECT_EQ(t.index({2}).item<int64_t>(), int64_t(0xFFFFFFFFu));
}

// A Decoder::kGpu batch's staged slots are not decoded yet: viewing them as images would hand out
// whatever the buffer held before.
TEST(Torch, ImagesRefusesAGpuStagedBatch) {
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.defer_augment = true;
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.decoder = LoaderOptions::Decoder::kGpu;
  o.batch_size = 8;
  Loader l(File(), o);
  auto range = l.epoch(0);
  const Batch& b = *range.begin();
  ASSERT_NE(b.staged, nullptr);
  try {
    torch_view::Images(b);
    FAIL() << "a staged batch was viewed as images";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpu::Augmenter"), std::string::npos) << e.what();
  }
}

TEST(Torch, DeviceTensorsNeedACudaLibtorch) {
  if (torch_view::TorchHasCuda()) GTEST_SKIP() << "libtorch has CUDA here";
  gpu::DeviceBatch d;
  EXPECT_THROW(torch_view::DeviceImages(d), Error);
}

}  // namespace
}  // namespace dsc::test
