// Your own per-sample transform, usable by name in any transform list (LoaderOptions::transforms,
// `--transforms`, Python's dsc.T.Named) once registered. It receives the sample as uint8 RGB (HWC,
// after decode and crop) and the sample's own random stream, so batches stay the same for any thread
// count, rank count or remote worker (a worker must run a build that registers it too).
//
//   build/example_custom_transform cifar.beton
#include <cstdio>
#include <memory>
#include <utility>

#include "kernels/transforms.h"
#include "reader/loader.h"
#include "reader/option_table.h"

namespace {

// Swaps the colour channels into a random order with probability p.
class ChannelShuffle final : public dsc::kernels::Transform {
 public:
  explicit ChannelShuffle(double p) : p_(p) {}
  void Apply(dsc::kernels::ImageU8 img, dsc::kernels::Rng& rng, dsc::kernels::TransformScratch&,
             dsc::kernels::ParamLog* log) const override {
    // Draw only from `rng`, and the same number of draws whatever the image: the stream is the sample's.
    const bool on = rng.Uniform() < p_;
    int order[3] = {0, 1, 2};
    for (int i = 2; i > 0; --i) std::swap(order[i], order[rng.Below(uint64_t(i + 1))]);
    if (log) log->Put("applied", on);
    if (!on) return;
    uint8_t* px = img.data;
    for (size_t i = 0, n = size_t(img.width) * size_t(img.height); i < n; ++i, px += 3) {
      const uint8_t c[3] = {px[0], px[1], px[2]};
      for (int k = 0; k < 3; ++k) px[k] = c[order[k]];
    }
  }

 private:
  double p_;
};

// Registered before main runs; the factory reads the arguments as written in the list.
const bool registered = dsc::kernels::RegisterTransform(
    "channel_shuffle",
    [](const dsc::kernels::TransformArgs& a) { return std::make_unique<ChannelShuffle>(a.Num(0, "p", 0.5)); },
    "ChannelShuffle(p=0.5): the colour channels in a random order");

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FILE.beton\n", argv[0]);
    return 2;
  }
  try {
    dsc::LoaderOptions o = dsc::Preset("cifar-train");
    dsc::SetLoaderOption(o, "transforms", "random_crop(32,padding=4,padding_mode=reflect),channel_shuffle(p=0.5)");
    dsc::Loader loader(argv[1], o);
    uint64_t images = 0;
    for (const dsc::Batch& b : loader.epoch(0)) images += b.size;
    std::printf("%llu images with transforms %s\n", static_cast<unsigned long long>(images), o.transforms.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return registered ? 0 : 1;
}
