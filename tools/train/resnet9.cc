#include "tools/train/resnet9.h"

namespace dsc::train {

ConvBnImpl::ConvBnImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding) {
  conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(false)));
  bn = register_module("bn", torch::nn::BatchNorm2d(out));
}

torch::Tensor ConvBnImpl::forward(torch::Tensor x) { return torch::relu(bn(conv(x))); }

ResidualImpl::ResidualImpl(int64_t c) {
  a = register_module("a", ConvBn(c, c));
  b = register_module("b", ConvBn(c, c));
}

torch::Tensor ResidualImpl::forward(torch::Tensor x) { return x + b(a(x)); }

ResNet9Impl::ResNet9Impl(int64_t classes) {
  c1 = register_module("c1", ConvBn(3, 64, 3, 1, 1));
  c2 = register_module("c2", ConvBn(64, 128, 5, 2, 2));
  r1 = register_module("r1", Residual(128));
  c3 = register_module("c3", ConvBn(128, 256, 3, 1, 1));
  r2 = register_module("r2", Residual(256));
  c4 = register_module("c4", ConvBn(256, 128, 3, 1, 0));
  fc = register_module("fc", torch::nn::Linear(torch::nn::LinearOptions(128, classes).bias(false)));
}

torch::Tensor ResNet9Impl::forward(torch::Tensor x) {
  x = r1(c2(c1(x)));
  x = torch::max_pool2d(c3(x), 2);
  x = c4(r2(x));
  x = std::get<0>(torch::adaptive_max_pool2d(x, {1, 1})).flatten(1);
  return fc(x) * 0.2;
}

}  // namespace dsc::train
