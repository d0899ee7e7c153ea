// dsc generate: a synthetic class-per-folder JPEG tree, so dsc can be tried (and benchmarked) with no
// dataset at hand. Images are deterministic: class-dependent colour gradients with seeded noise.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "format/error.h"
#include "kernels/jpeg_codec.h"
#include "kernels/random.h"
#include "tools/commands.h"

namespace dsc::tools {

namespace {
// Bounds that keep a typo from filling the disk (the output is about 1 KB per 32x32 image).
constexpr int kMaxClasses = 100000;
constexpr int kMaxPerClass = 10000000;
constexpr uint64_t kMaxImages = 100000000;
}  // namespace

int CmdGenerate(int argc, char** argv) {
  cli::Options opts("dsc generate", "Write a synthetic class-per-folder JPEG dataset (OUT/train/<class>/*.jpg and\n"
                    "OUT/test/<class>/*.jpg).\n\n  dsc generate /tmp/synth --classes 10 --train 500 --test 100 --size 32\n");
  opts.positional_help("OUT");
  opts.add_options()
      ("classes", "number of classes", cli::value<int>()->default_value("10"))
      ("train", "training images per class", cli::value<int>()->default_value("1000"))
      ("test", "test images per class", cli::value<int>()->default_value("200"))
      ("size", "image side in pixels", cli::value<int>()->default_value("32"))
      ("quality", "JPEG quality", cli::value<int>()->default_value("90"))
      ("seed", "random seed", cli::value<uint64_t>()->default_value("0"))
      ("h,help", "show this help")("out", "", cli::value<std::string>());
  opts.parse_positional({"out"});
  std::string out;
  int classes, train, test, size, quality;
  uint64_t seed;
  try {
    auto r = Parse(opts, argc, argv);
    RejectUnmatched(r);
    if (r.count("help")) { std::fputs(opts.help().c_str(), stdout); return kExitOk; }
    if (!r.count("out")) throw cli::UsageError("expected OUT");
    out = r["out"].as<std::string>();
    classes = r["classes"].as<int>();
    train = r["train"].as<int>();
    test = r["test"].as<int>();
    size = r["size"].as<int>();
    quality = r["quality"].as<int>();
    seed = r["seed"].as<uint64_t>();
    auto in_range = [](const char* name, int v, int lo, int hi) {
      if (v < lo || v > hi)
        throw cli::UsageError(std::string("--") + name + " " + std::to_string(v) + " is out of range (" +
                                             std::to_string(lo) + ".." + std::to_string(hi) + ")");
    };
    in_range("classes", classes, 1, kMaxClasses);
    in_range("train", train, 0, kMaxPerClass);
    in_range("test", test, 0, kMaxPerClass);
    in_range("size", size, 8, 4096);
    in_range("quality", quality, 1, 100);
    if (train + test == 0) throw cli::UsageError("--train and --test are both 0: no image to write");
    if (uint64_t(classes) * uint64_t(train + test) > kMaxImages)
      throw cli::UsageError("--classes x (--train + --test) is " + std::to_string(uint64_t(classes) * uint64_t(train + test)) +
                                           " images, more than " + std::to_string(kMaxImages));
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "dsc generate: %s\n\n%s", e.what(), opts.help().c_str());
    return kExitUsage;
  }
  // Written into a hidden sibling and renamed to OUT at the end: OUT exists only complete (scripts/demo.sh
  // reuses an existing OUT), and an existing OUT is never mixed with new files.
  std::filesystem::path final_dir = std::filesystem::path(out).lexically_normal();
  if (!final_dir.has_filename()) final_dir = final_dir.parent_path();  // "OUT/", as tab completion writes it
  const std::string leaf = final_dir.filename().string();
  if (leaf.empty() || leaf == "." || leaf == "..") {
    std::fprintf(stderr, "dsc generate: OUT must name a folder to create, not '%s'\n", out.c_str());
    return kExitUsage;
  }
  const std::filesystem::path parent = final_dir.has_parent_path() ? final_dir.parent_path() : ".";
  const std::filesystem::path staging = parent / std::string(".").append(leaf).append(".dsc-generate-partial");
  try {
    std::error_code ec;
    if (std::filesystem::exists(final_dir, ec) &&
        !(std::filesystem::is_directory(final_dir, ec) && std::filesystem::is_empty(final_dir, ec))) {
      std::fprintf(stderr, "dsc generate: %s exists and is not an empty folder: remove it or name another OUT\n", out.c_str());
      return kExitBad;
    }
    std::filesystem::create_directories(parent);
    std::filesystem::remove_all(staging);  // left by an interrupted run
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsc generate: error: %s\n", e.what());
    return kExitBad;
  }
  try {
    kernels::JpegCodec codec;
    std::vector<uint8_t> px(size_t(size) * size * 3), jpg;
    uint64_t written = 0;
    for (const auto& [split, count] : {std::pair<std::string, int>{"train", train}, {"test", test}}) {
      for (int c = 0; c < classes; ++c) {
        char cls[32];
        std::snprintf(cls, sizeof cls, "class_%03d", c);
        auto dir = staging / split / cls;
        std::filesystem::create_directories(dir);
        for (int i = 0; i < count; ++i) {
          kernels::Rng rng(seed, split == "train" ? 0 : 1, uint64_t(c) * 1000003 + uint64_t(i), kernels::kStreamSubset);
          const int phase = int(rng.Below(256));
          for (int y = 0; y < size; ++y)
            for (int x = 0; x < size; ++x)
              for (int ch = 0; ch < 3; ++ch) {
                // 64-bit: x * (37 + 23 c) passes INT_MAX from ~22,800 classes at 4096 px
                int v = int((int64_t(x) * (37 + 23 * int64_t(c)) + y * (11 + 7 * ch) + phase + 60 * int64_t(ch) * c) % 256);
                v += int(rng.Below(41)) - 20;
                px[(size_t(y) * size + x) * 3 + ch] = uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
              }
          if (!codec.Encode(px.data(), size, size, 3, quality, 2 /* 4:2:0 */, &jpg)) throw Error("JPEG encode failed: " + codec.error());
          char name[32];
          std::snprintf(name, sizeof name, "%05d.jpg", i);
          std::ofstream f(dir / name, std::ios::binary);
          f.write(reinterpret_cast<const char*>(jpg.data()), std::streamsize(jpg.size()));
          if (!f) throw Error((dir / name).string() + ": write failed");
          ++written;
        }
      }
    }
    std::filesystem::rename(staging, final_dir);  // onto an empty folder, or none
    std::printf("wrote %llu synthetic %dx%d JPEGs in %d classes to %s\n", (unsigned long long)written, size, size, classes, out.c_str());
    return kExitOk;
  } catch (const std::exception& e) {
    std::error_code ec;
    std::filesystem::remove_all(staging, ec);  // no partial tree left behind
    std::fprintf(stderr, "dsc generate: error: %s (nothing written to %s)\n", e.what(), out.c_str());
    return kExitBad;
  }
}

}  // namespace dsc::tools
