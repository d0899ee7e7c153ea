// The ResNet-9 of FFCV's CIFAR-10 example (examples/cifar/train_cifar.py, construct_model), so that
// dsc's training runs compare with its published figures.
#pragma once
#include <torch/torch.h>

namespace dsc::train {

// conv (no bias) -> batch norm -> ReLU
struct ConvBnImpl : torch::nn::Module {
  ConvBnImpl(int64_t in, int64_t out, int64_t kernel = 3, int64_t stride = 1, int64_t padding = 1);
  torch::Tensor forward(torch::Tensor x);
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
};
TORCH_MODULE(ConvBn);

// x + f(x), f = two ConvBn of the same width
struct ResidualImpl : torch::nn::Module {
  explicit ResidualImpl(int64_t channels);
  torch::Tensor forward(torch::Tensor x);
  ConvBn a{nullptr}, b{nullptr};
};
TORCH_MODULE(Residual);

struct ResNet9Impl : torch::nn::Module {
  explicit ResNet9Impl(int64_t classes = 10);
  torch::Tensor forward(torch::Tensor x);  // logits x 0.2, as FFCV's Mul(0.2)
  ConvBn c1{nullptr}, c2{nullptr}, c3{nullptr}, c4{nullptr};
  Residual r1{nullptr}, r2{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet9);

}  // namespace dsc::train
