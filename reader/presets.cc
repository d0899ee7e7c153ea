// The named option sets (FFCV's CIFAR-10 pipelines, torchvision's ImageNet ones) and DTypeSize.
#include "kernels/augment.h"
#include "reader/loader.h"

namespace dsc {

size_t DTypeSize(DType t) { return t == DType::kFloat32 ? 4 : t == DType::kFloat16 ? 2 : 1; }

namespace {

constexpr float kCifarMean[3] = {125.307f, 122.961f, 113.8575f};
constexpr float kCifarStd[3] = {51.5865f, 50.847f, 51.255f};
constexpr float kImagenetMean[3] = {0.485f * 255, 0.456f * 255, 0.406f * 255};
constexpr float kImagenetStd[3] = {0.229f * 255, 0.224f * 255, 0.225f * 255};

void SetNormalize(kernels::AugmentSpec* s, const float* mean, const float* std) {
  s->normalize = true;
  for (int c = 0; c < 3; ++c) {
    s->mean[c] = mean[c];
    s->std[c] = std[c];
  }
}

}  // namespace

LoaderOptions LoaderOptions::CifarTrain() {
  LoaderOptions o;
  o.augment.flip = true;
  o.augment.translate = 2;
  o.augment.cutout = 4;
  for (int c = 0; c < 3; ++c) o.augment.fill[c] = uint8_t(kCifarMean[c] + 0.5f);
  SetNormalize(&o.augment, kCifarMean, kCifarStd);
  return o;
}

LoaderOptions LoaderOptions::CifarTest() {
  LoaderOptions o;
  o.order = Order::kSequential;
  SetNormalize(&o.augment, kCifarMean, kCifarStd);
  return o;
}

LoaderOptions LoaderOptions::ImagenetTrain() {
  LoaderOptions o;
  o.augment.crop = kernels::CropMode::kRandomResized;
  o.augment.out_w = o.augment.out_h = 224;
  o.augment.flip = true;
  SetNormalize(&o.augment, kImagenetMean, kImagenetStd);
  return o;
}

LoaderOptions LoaderOptions::ImagenetTest() {
  LoaderOptions o;
  o.order = Order::kSequential;
  o.augment.crop = kernels::CropMode::kCenter;
  o.augment.resize = 256;
  o.augment.out_w = o.augment.out_h = 224;
  SetNormalize(&o.augment, kImagenetMean, kImagenetStd);
  return o;
}

}  // namespace dsc
