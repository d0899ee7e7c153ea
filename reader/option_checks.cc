// What the user gave, checked against what it does (reader/option_table.h): options the chosen crop
// ignores, normalisation in the wrong units, and the nearest names for an unknown one.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "reader/option_table.h"

namespace dsc {

namespace {

// mean and std given in torchvision's 0..1 units (Normalize after ToTensor) where dsc takes 0..255: the
// batch mean came out near 500, without a word. A std below 1 pixel level is no real 0..255 std.
void CheckNormalizeUnits(const LoaderOptions& o, const std::vector<std::string>& given,
                         const std::function<std::string(const std::string&)>& spell) {
  const kernels::AugmentSpec& a = o.augment;
  if (!a.normalize || std::find_if(given.begin(), given.end(), [](const std::string& n) { return n == "mean" || n == "std"; }) == given.end())
    return;
  float top_mean = 0, top_std = 0;
  for (int c = 0; c < 3; ++c) top_mean = std::max(top_mean, std::fabs(a.mean[c])), top_std = std::max(top_std, a.std[c]);
  if (!(top_mean <= 1 && top_std < 1)) return;
  auto three = [](const float* v, double k) {
    std::string s;
    char buf[32];
    for (int c = 0; c < 3; ++c) {
      std::snprintf(buf, sizeof buf, "%.6g", double(v[c]) * k);  // 124.95, not float's 124.950005
      s += (c ? ", " : "") + std::string(buf);
    }
    return s;
  };
  throw OptionError(spell("mean") + " (" + three(a.mean, 1) + ") and " + spell("std") + " (" + three(a.std, 1) +
                    ") look like 0..1 units (torchvision's Normalize after ToTensor), but dsc takes them in 0..255 pixel units: "
                    "pass them x 255 (mean " + three(a.mean, 255) + ", std " + three(a.std, 255) +
                    "), or from Python normalize=dict(mean=..., std=..., scale='unit')");
}

}  // namespace

void CheckGivenOptions(const LoaderOptions& o, const std::vector<std::string>& given,
                       const std::function<std::string(const std::string&)>& spell) {
  for (const std::string& n : given) {
    const OptionRow* r = FindLoaderOption(n);
    if (r && r->needs == "remote" && o.remote.addresses.empty()) throw OptionError(spell(n) + " needs " + spell("remote"));
  }
  using kernels::CropMode;
  const kernels::AugmentSpec& a = o.augment;
  const kernels::AugmentSpec d;
  const char* mode = a.crop == CropMode::kNone ? "'none'" : a.crop == CropMode::kCenter ? "'center'" : "'random_resized'";
  for (const std::string& n : given) {
    const char* uses = nullptr;  // the modes that use option n
    bool changed = false;
    if (n == "out_size" || n == "out_w" || n == "out_h") {
      uses = "crop='center' or 'random_resized' (crop='none' keeps the stored size)";
      changed = a.crop == CropMode::kNone && (a.out_w != d.out_w || a.out_h != d.out_h);
    } else if (n == "scale" || n == "ratio") {
      uses = "crop='random_resized'";
      changed = a.crop != CropMode::kRandomResized &&
                (n == "scale" ? a.scale_min != d.scale_min || a.scale_max != d.scale_max
                              : a.ratio_min != d.ratio_min || a.ratio_max != d.ratio_max);
    } else if (n == "resize") {
      uses = "crop='center'";
      changed = a.crop != CropMode::kCenter && a.resize != d.resize;
    } else if (n == "center_ratio") {
      uses = "crop='center' without resize (resize > 0 crops the resized image to out_size instead)";
      changed = (a.crop != CropMode::kCenter || a.resize > 0) && a.center_ratio != d.center_ratio;
    }
    if (changed)
      throw OptionError(spell(n) + " has no effect with crop=" + mode + (a.resize > 0 && n == "center_ratio" ? " and resize > 0" : "") +
                        ": it applies to " + uses);
  }
  CheckNormalizeUnits(o, given, spell);
}

namespace {

// Edits (insert, delete, substitute, swap two neighbours) from a to b: batchsize -> batch_size is 1.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string SuggestLoaderOption(std::string_view name, uint8_t where, const std::function<std::string(const std::string&)>& spell,
                                const std::vector<std::string>& extra) {
  std::string n(name);
  for (char& c : n) c = c == '-' ? '_' : char(std::tolower(static_cast<unsigned char>(c)));
  auto on = [&](const char* row) {
    const OptionRow* r = FindLoaderOption(row);
    return r && (r->where & where);
  };
  // torch.utils.data.DataLoader's and torchvision's words for what dsc does otherwise.
  if (n == "shuffle") return "use " + spell("order") + " random (a new permutation each epoch, the default) or sequential";
  if (n == "num_workers" || n == "workers")
    return "use " + spell("threads") + ": dsc decodes in C++ threads of this process, with no worker processes";
  if (n == "prefetch_factor") return "use " + spell("prefetch") + " (batches prepared ahead)";
  if (n == "persistent_workers") return "not needed: dsc's threads live as long as the loader";
  if (n == "sampler" || n == "batch_sampler") return "use " + spell("order") + ", " + spell("subset") + " and rank / world_size";
  if (n == "transform" || n == "transforms" || n == "train_transform") {
    if (n != "transforms" && on("transforms")) return "did you mean " + spell("transforms") + "?";
    return "dsc's transforms are options run in C++: " + spell("crop") + ", " + spell("flip") + ", " + spell("translate") + ", " +
           spell("cutout") + ", " + spell("normalize") + " (a torchvision transform cannot run in its threads)";
  }
  std::vector<std::string> names = extra;
  for (const OptionRow& r : LoaderOptionTable())
    if (r.where & where) names.push_back(r.name);
  size_t best = SIZE_MAX;
  std::vector<std::string> near;
  for (const std::string& c : names) {
    // A prefix counts as near (batch -> batch_size), as does a spelling within a third of the name.
    const size_t d = c.compare(0, n.size(), n) == 0 && n.size() >= 4 ? 1 : EditDistance(n, c);
    if (d > std::max<size_t>(1, std::min(n.size(), c.size()) / 3)) continue;
    if (d < best) near.clear(), best = d;
    if (d == best) near.push_back(c);
  }
  if (near.empty()) return "";
  std::string s;
  for (size_t i = 0; i < near.size() && i < 3; ++i) s += (i ? " or " : "") + spell(near[i]);
  return "did you mean " + s + "?";
}

}  // namespace dsc
