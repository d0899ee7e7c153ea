#include "writer/seg_build.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <vector>

#include "format/error.h"
#include "writer/source.h"
#include "writer/typed_build.h"
#include "writer/writer.h"

namespace dsc::writer {

namespace fs = std::filesystem;

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Regular files of `dir` (not below it) by stem, with their extension in `exts`. Two files of one stem
// are an error: which one pairs would be a guess.
std::map<std::string, fs::path> ByStem(const std::string& dir, const std::vector<std::string>& exts, const char* what) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(dir + ": not a folder (" + what + ")");
  std::map<std::string, fs::path> out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    const std::string ext = Lower(e.path().extension().string());
    if (std::find(exts.begin(), exts.end(), ext) == exts.end()) continue;
    const std::string stem = e.path().stem().string();
    if (auto [it, fresh] = out.emplace(stem, e.path()); !fresh)
      throw Error(dir + ": two " + what + " named '" + stem + "' (" + it->second.filename().string() + ", " +
                  e.path().filename().string() + "): which one pairs is ambiguous");
  }
  if (ec) throw EnvironmentError(dir + ": cannot list: " + ec.message());
  return out;
}

}  // namespace

BuildReport BuildSegmentation(const std::string& images_dir, const std::string& out, const BuildOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  auto log = o.log ? o.log : [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
  const auto images = ByStem(images_dir, {".jpg", ".jpeg", ".png"}, "images");
  const auto masks = ByStem(o.masks_dir, {".png"}, "masks");
  BuildReport rep;
  rep.format = "segmentation";
  std::vector<std::pair<fs::path, fs::path>> pairs;
  std::vector<std::string> unpaired;
  for (const auto& [stem, img] : images) {
    auto m = masks.find(stem);
    if (m == masks.end()) unpaired.push_back(img.string() + ": no mask " + (fs::path(o.masks_dir) / (stem + ".png")).string());
    else pairs.emplace_back(img, m->second);
  }
  for (const auto& [stem, m] : masks)
    if (!images.count(stem)) unpaired.push_back(m.string() + ": a mask without an image named '" + stem + "' in " + images_dir);
  if (!unpaired.empty()) {
    if (!o.skip_invalid)
      throw Error(unpaired.front() + (unpaired.size() > 1 ? " (and " + std::to_string(unpaired.size() - 1) + " more)" : "") +
                  "; use --skip-invalid to leave unpaired files out");
    for (const auto& u : unpaired) log("skipped: " + u);
    rep.skipped += unpaired.size();
  }
  if (pairs.empty()) throw Error(images_dir + ": no image pairs with a mask in " + o.masks_dir);
  WriterOptions wo = TypedWriterOptions(o, "segmentation");
  if (o.skip_invalid)
    wo.on_skip = [&](const std::string& why) {
      log("skipped: " + why);
      ++rep.skipped;
    };
  Writer w(out, {ImageField("image"), MaskField("mask")}, wo);
  const size_t all = pairs.size();
  const ShardRange range = ShardOf(o, all);
  const size_t begin = range.begin, end = range.end;
  if (o.shard_count) w.set_shard(o.shard_index, o.shard_count, all);
  for (size_t i = begin; i < end; ++i) {
    Sample s;
    s.set_where(pairs[i].first.string());
    s.SetImage("image", ReadWholeFile(pairs[i].first.string(), o.max_file_size));
    s.SetImage("mask", ReadWholeFile(pairs[i].second.string(), o.max_file_size));
    s.values()["mask"].where = pairs[i].second.string();
    w.Add(std::move(s));
    if (o.progress && (i - begin) % 256 == 0) std::fprintf(stderr, "\r%zu/%zu pairs", i - begin, end - begin);
  }
  w.set_skipped(rep.skipped);
  CloseTypedBuild(&w, t0, &rep);
  return rep;
}

}  // namespace dsc::writer
