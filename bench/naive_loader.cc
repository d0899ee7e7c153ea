#include "bench/naive_loader.h"

#include <turbojpeg.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <random>
#include <stdexcept>

namespace dsc::bench {

namespace fs = std::filesystem;

namespace {

struct Image {
  int w = 0, h = 0;
  std::vector<uint8_t> px;  // HWC
};

Image Decode(const std::vector<uint8_t>& jpeg) {
  tjhandle h = tjInitDecompress();  // per sample, as PIL opens a fresh decoder per image
  Image im;
  int sub, cs;
  if (tjDecompressHeader3(h, jpeg.data(), jpeg.size(), &im.w, &im.h, &sub, &cs) != 0) throw std::runtime_error("bad jpeg");
  im.px.resize(size_t(im.w) * im.h * 3);
  if (tjDecompress2(h, jpeg.data(), jpeg.size(), im.px.data(), im.w, 0, im.h, TJPF_RGB, 0) != 0) throw std::runtime_error("bad jpeg");
  tjDestroy(h);
  return im;
}

Image Flip(const Image& in) {
  Image out{in.w, in.h, std::vector<uint8_t>(in.px.size())};
  for (int y = 0; y < in.h; ++y)
    for (int x = 0; x < in.w; ++x)
      for (int c = 0; c < 3; ++c) out.px[(size_t(y) * in.w + x) * 3 + c] = in.px[(size_t(y) * in.w + (in.w - 1 - x)) * 3 + c];
  return out;
}

Image Translate(const Image& in, int dx, int dy, const uint8_t* fill) {
  Image out{in.w, in.h, std::vector<uint8_t>(in.px.size())};
  for (int y = 0; y < in.h; ++y)
    for (int x = 0; x < in.w; ++x)
      for (int c = 0; c < 3; ++c) {
        int sx = x - dx, sy = y - dy;
        out.px[(size_t(y) * in.w + x) * 3 + c] =
            sx >= 0 && sy >= 0 && sx < in.w && sy < in.h ? in.px[(size_t(sy) * in.w + sx) * 3 + c] : fill[c];
      }
  return out;
}

Image Cutout(Image in, int cx, int cy, int size, const uint8_t* fill) {
  for (int y = cy; y < std::min(in.h, cy + size); ++y)
    for (int x = cx; x < std::min(in.w, cx + size); ++x)
      for (int c = 0; c < 3; ++c) in.px[(size_t(y) * in.w + x) * 3 + c] = fill[c];
  return in;
}

std::vector<float> ToTensorNormalize(const Image& in, const float* mean, const float* std) {
  std::vector<float> t(in.px.size());
  const size_t plane = size_t(in.w) * in.h;
  for (size_t i = 0; i < plane; ++i)
    for (int c = 0; c < 3; ++c) t[c * plane + i] = (in.px[i * 3 + c] / 255.0f - mean[c] / 255.0f) / (std[c] / 255.0f);
  return t;
}

}  // namespace

NaiveLoader::NaiveLoader(const std::string& root, const NaiveOptions& o) : o_(o) {
  std::vector<std::string> classes;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) classes.push_back(e.path().filename().string());
  std::sort(classes.begin(), classes.end());
  for (size_t c = 0; c < classes.size(); ++c) {
    std::vector<std::string> f;
    for (const auto& e : fs::directory_iterator(fs::path(root) / classes[c])) f.push_back(e.path().string());
    std::sort(f.begin(), f.end());
    for (auto& p : f) {
      files_.push_back(p);
      labels_.push_back(int(c));
    }
  }
}

std::vector<float> NaiveLoader::MakeBatch(const std::vector<uint32_t>& order, size_t first, size_t count, uint64_t epoch) const {
  std::vector<float> batch;
  std::mt19937_64 rng(epoch * 1000003 + first);
  for (size_t k = first; k < first + count; ++k) {
    std::ifstream in(files_[order[k]], std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Image im = Decode(bytes);
    if (o_.flip && (rng() & 1)) im = Flip(im);
    im = Translate(im, int(rng() % (2 * o_.translate + 1)) - o_.translate, int(rng() % (2 * o_.translate + 1)) - o_.translate, o_.fill);
    im = Cutout(std::move(im), int(rng() % (im.w - o_.cutout + 1)), int(rng() % (im.h - o_.cutout + 1)), o_.cutout, o_.fill);
    std::vector<float> t = ToTensorNormalize(im, o_.mean, o_.std);
    batch.insert(batch.end(), t.begin(), t.end());  // collate
  }
  return batch;
}

uint64_t NaiveLoader::RunEpoch(uint64_t epoch, double* checksum) {
  std::vector<uint32_t> order(files_.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(epoch));
  const size_t batches = (order.size() + o_.batch_size - 1) / o_.batch_size;
  uint64_t images = 0;
  auto make = [&](size_t b) {
    size_t first = b * o_.batch_size, count = std::min<size_t>(o_.batch_size, order.size() - first);
    return MakeBatch(order, first, count, epoch);
  };
  if (o_.threads <= 1) {
    for (size_t b = 0; b < batches; ++b) {
      auto batch = make(b);
      *checksum += batch[0];
      images += batch.size() / (3 * 32 * 32) ;
    }
    return images;
  }
  // DataLoader-style: `threads` workers, each building whole batches; delivered in order.
  std::vector<std::future<std::vector<float>>> inflight;
  size_t next = 0;
  for (; next < batches && inflight.size() < size_t(o_.threads); ++next) inflight.push_back(std::async(std::launch::async, make, next));
  for (size_t b = 0; b < batches; ++b) {
    auto batch = inflight[b % inflight.size()].get();
    *checksum += batch[0];
    images += batch.size() / (3 * 32 * 32);
    if (next < batches) inflight[b % inflight.size()] = std::async(std::launch::async, make, next++);
  }
  return images;
}

}  // namespace dsc::bench
