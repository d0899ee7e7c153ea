// The GPU path's CPU twin: deferring the list transforms (Batch::steps, kernels::RunStepsCpu) and
// flip/translate/cutout/normalise (kernels::AugmentBatchCpu), the CUDA kernels' per-element code,
// gives the CPU pipeline's batches bit for bit. No GPU runs here.
#include <gtest/gtest.h>

#include <cstring>

#include "format/error.h"
#include "kernels/batch_augment.h"
#include "kernels/transform_steps.h"
#include "reader/gpu.h"
#include "reader/loader.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

const std::string& File() {
  static std::string f = [] {
    auto dir = ScratchDir("-gpu");
    writer::BuildOptions o;
    o.log = [](const std::string&) {};
    writer::Build(SubsetTree(40), dir + "/f.beton", o);
    return dir + "/f.beton";
  }();
  return f;
}

// What the GPU makes of deferred batch y, computed by the CPU twins: its steps, then the augment.
std::vector<uint8_t> TwinOf(const Batch& y, const kernels::DeferredAugment& aug, size_t out_bytes) {
  std::vector<uint8_t> images(y.images_as<uint8_t>(), y.images_as<uint8_t>() + y.image_bytes() * y.size), scratch;
  if (y.steps)
    kernels::RunStepsCpu(y.steps, int(y.steps_per_sample), images.data(), int(y.size), int(y.width), int(y.height), &scratch);
  std::vector<uint8_t> out(out_bytes);
  kernels::AugmentBatchCpu(aug, images.data(), y.params, int(y.size), out.data());
  return out;
}

void ExpectTwinEqualsCpu(LoaderOptions cpu, DType dtype, Layout layout) {
  cpu.dtype = dtype;
  cpu.layout = layout;
  cpu.batch_size = 64;
  cpu.seed = 123;
  LoaderOptions deferred = cpu;
  deferred.defer_augment = true;
  deferred.dtype = DType::kUint8;
  deferred.layout = Layout::kNHWC;
  Loader a(File(), cpu), b(File(), deferred);
  ASSERT_EQ(a.batches_per_epoch(), b.batches_per_epoch());
  auto ra = a.epoch(2), rb = b.epoch(2);
  auto ia = ra.begin(), ib = rb.begin();
  const auto aug = kernels::MakeDeferredAugment(cpu.augment, int(b.width()), int(b.height()),
                                                dtype == DType::kFloat16 ? kernels::kOutFloat16 : kernels::kOutFloat32,
                                                layout == Layout::kNCHW ? kernels::kOutNCHW : kernels::kOutNHWC);
  size_t batches = 0;
  for (; ia != ra.end() && ib != rb.end(); ++ia, ++ib, ++batches) {
    const Batch& x = *ia;
    const Batch& y = *ib;
    ASSERT_EQ(std::memcmp(x.indices, y.indices, x.size * 4), 0);
    ASSERT_EQ(y.steps != nullptr, !cpu.transforms.empty());
    const std::vector<uint8_t> out = TwinOf(y, aug, x.image_bytes() * x.size);
    ASSERT_EQ(std::memcmp(out.data(), x.images, out.size()), 0) << "batch " << batches;
  }
  EXPECT_EQ(batches, a.batches_per_epoch());
}

TEST(GpuTwin, CifarPipelineBitForBit) {
  ExpectTwinEqualsCpu(LoaderOptions::CifarTrain(), DType::kFloat32, Layout::kNCHW);
  ExpectTwinEqualsCpu(LoaderOptions::CifarTrain(), DType::kFloat16, Layout::kNHWC);
}

TEST(GpuTwin, CropOnCpuThenTheRestDeferred) {
  LoaderOptions o = LoaderOptions::ImagenetTrain();
  o.augment.out_w = o.augment.out_h = 24;
  o.augment.translate = 1;
  o.augment.cutout = 5;
  ExpectTwinEqualsCpu(o, DType::kFloat32, Layout::kNCHW);
}

TEST(GpuTwin, ResizeCenterCropOnCpuThenTheRestDeferred) {
  LoaderOptions o = LoaderOptions::ImagenetTest();
  o.augment.resize = 28;
  o.augment.out_w = 24;
  o.augment.out_h = 20;
  o.augment.flip = true;
  o.augment.cutout = 3;
  ExpectTwinEqualsCpu(o, DType::kFloat16, Layout::kNCHW);
}

// The list transforms deferred: every kind of step, on CIFAR (the flip after the list) and after a
// RandomResizedCrop (whose flip is part of the resize, so it leads the device's steps).
TEST(GpuTwin, ListTransformsDeferredBitForBit) {
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.transforms = "random_crop(32,padding=4,padding_mode=reflect),color_jitter(0.4,0.4,0.4,0.1),random_grayscale(0.3),"
                 "rand_augment(2,9),random_erasing(p=0.5,value=(1,2,3))";
  ExpectTwinEqualsCpu(o, DType::kFloat32, Layout::kNCHW);
  o.transforms = "trivial_augment_wide,auto_augment(interpolation=bilinear),random_perspective(0.4,fill=7),"
                 "random_autocontrast,random_equalize,random_invert(0.2),random_posterize(3),random_solarize(90)";
  ExpectTwinEqualsCpu(o, DType::kFloat16, Layout::kNHWC);
  LoaderOptions crop = LoaderOptions::ImagenetTrain();
  crop.augment.out_w = crop.augment.out_h = 24;
  crop.augment.translate = 1;
  crop.augment.cutout = 5;
  crop.transforms = "random_rotation(30,interpolation=bilinear),gaussian_blur(5),random_adjust_sharpness(2),"
                    "random_affine(10,translate=(0.1,0.1),scale=(0.8,1.2),shear=5),random_vertical_flip";
  ExpectTwinEqualsCpu(crop, DType::kFloat32, Layout::kNCHW);
}

TEST(GpuTwin, TransformsWithoutADeviceFormAreRefusedWhenDeferring) {
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.defer_augment = true;
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.augment.normalize = false;
  o.transforms = "gaussian_blur(67)";
  try {
    Loader l(File(), o);
    FAIL() << "a 67-tap blur was deferred";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no device form"), std::string::npos) << e.what();
  }
  o.transforms = "random_crop(28)";  // the list keeps the 32x32 size: named before any batch
  try {
    Loader l(File(), o);
    FAIL() << "a 28x28 random_crop of 32x32 images was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("random_crop"), std::string::npos) << e.what();
  }
}

// On a GPU only (skipped here): the CUDA kernel's batches equal the CPU twin's bit for bit, through
// the ring (both ways of giving buffers back) and from pinned leased batches.
void ExpectDeviceEqualsTwin(DType dtype, Layout layout, bool auto_return, const std::string& transforms = "") {
  LoaderOptions o = LoaderOptions::CifarTrain();
  o.transforms = transforms;
  o.defer_augment = true;
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.batch_size = 64;
  o.seed = 5;
  gpu::UsePinnedMemory(o);
  Loader loader(File(), o);
  gpu::Augmenter aug(o.augment, loader.width(), loader.height(), o.batch_size, dtype, layout);
  const auto twin = kernels::MakeDeferredAugment(o.augment, int(loader.width()), int(loader.height()),
                                                 dtype == DType::kFloat16 ? kernels::kOutFloat16 : kernels::kOutFloat32,
                                                 layout == Layout::kNCHW ? kernels::kOutNCHW : kernels::kOutNHWC);
  auto range = loader.epoch(1);
  size_t batches = 0;
  for (auto it = range.begin(); it != range.end(); ++it, ++batches) {
    const Batch& b = *it;
    const size_t bytes = size_t(b.size) * 3 * b.height * b.width * DTypeSize(dtype);
    std::vector<uint8_t> got(bytes);
    const std::vector<uint8_t> want = TwinOf(b, twin, bytes);
    const gpu::DeviceBatch d = auto_return ? aug.ProcessFor(it.lease(), gpu::LegacyDefaultStream()) : aug.Process(it.lease());
    gpu::CopyToHost(d, got.data());
    if (!auto_return) aug.Release(d, gpu::LegacyDefaultStream());
    ASSERT_EQ(std::memcmp(got.data(), want.data(), bytes), 0) << "batch " << batches;
  }
  EXPECT_EQ(batches, loader.batches_per_epoch());
}

TEST(GpuTwin, DeviceKernelEqualsTheCpuTwin) {
  std::string why;
  if (!gpu::Available(&why)) GTEST_SKIP() << "compiled, CPU-verified, not run on a GPU here: " << why;
  std::printf("%s\n", gpu::Describe().c_str());
  ExpectDeviceEqualsTwin(DType::kFloat32, Layout::kNCHW, true);
  ExpectDeviceEqualsTwin(DType::kFloat16, Layout::kNHWC, false);
  ExpectDeviceEqualsTwin(DType::kFloat32, Layout::kNCHW, true,
                         "random_crop(32,padding=4,padding_mode=reflect),color_jitter(0.4,0.4,0.4,0.1),rand_augment(2,9),"
                         "random_equalize,random_autocontrast,gaussian_blur(5),random_perspective(0.4),random_erasing");
}

TEST(GpuTwin, NoGpuIsReportedAndRefusedClearly) {
  std::string why;
  if (gpu::Available(&why)) GTEST_SKIP() << "a GPU is present; this checks the fallback";
  EXPECT_FALSE(why.empty());
  std::printf("no GPU here: %s\n", why.c_str());
  try {
    gpu::Augmenter aug(LoaderOptions::CifarTrain().augment, 32, 32, 512, DType::kFloat16, Layout::kNCHW);
    FAIL() << "constructed without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no usable GPU"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dsc::test
