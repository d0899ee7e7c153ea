// The loader's option table (reader/option_table.h): one row per user-facing option.
#include "reader/option_table.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>

#include "kernels/transforms.h"
#include "reader/executor.h"

namespace dsc {

namespace {

constexpr uint64_t kU32 = UINT32_MAX;
constexpr uint64_t kI32 = INT32_MAX;
constexpr uint64_t kU64 = UINT64_MAX;

[[noreturn]] void Bad(std::string_view name, std::string_view text, const std::string& why) {
  throw OptionValueError(std::string(name), std::string(text), why);
}

// The transforms row's value: a list, or @FILE holding one (one transform or more a line, '#' comments),
// checked by parsing it and kept in the parser's canonical text.
std::string CanonicalTransforms(std::string_view text) {
  std::string list(text);
  if (!list.empty() && list[0] == '@') {
    std::istringstream in(ReadOptionFile(list.substr(1)));
    list.clear();
    for (std::string line; std::getline(in, line);) {
      line = line.substr(0, line.find('#'));
      if (line.find_first_not_of(" \t\r,") == std::string::npos) continue;
      while (!line.empty() && (line.back() == ',' || std::isspace(static_cast<unsigned char>(line.back())))) line.pop_back();
      list += (list.empty() ? "" : ",") + line;
    }
  }
  try {
    return kernels::ParseTransforms(list).Text();
  } catch (const OptionError&) {
    throw;
  } catch (const std::exception& e) {
    Bad("transforms", text, e.what());
  }
}

std::vector<std::string_view> SplitList(std::string_view text) {
  std::vector<std::string_view> out;
  if (text.empty()) return out;
  for (size_t at = 0;;) {
    const size_t comma = text.find(',', at);
    out.push_back(text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at));
    if (comma == std::string_view::npos) return out;
    at = comma + 1;
  }
}

// A whole decimal integer in [lo, hi]; with `bytes`, an optional K, M, G or T suffix (powers of 1024).
// Digits only after an optional '-': strtoull took "-1" as 2^64 - 1, and a shift past 64 bits wrapped.
int64_t ParseInt(std::string_view name, std::string_view text, int64_t lo, uint64_t hi, bool bytes = false) {
  const bool negative = !text.empty() && text[0] == '-';
  std::string_view digits = negative ? text.substr(1) : text;
  int shift = 0;
  if (bytes && !digits.empty()) {
    const char u = digits.back();
    shift = u == 'K' || u == 'k' ? 10 : u == 'M' ? 20 : u == 'G' ? 30 : u == 'T' ? 40 : 0;
    if (shift) digits.remove_suffix(1);
  }
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || digits[0] == '+' || end != digits.data() + digits.size() || (ec != std::errc() && ec != std::errc::result_out_of_range))
    Bad(name, text, bytes ? "expected bytes with an optional K, M, G or T" : "not an integer");
  const std::string range = "out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (ec == std::errc::result_out_of_range || v > (kU64 >> shift)) Bad(name, text, range);
  v <<= shift;
  if (negative) {
    if (v == 0) return 0;
    if (lo >= 0 || v > uint64_t(-(lo + 1)) + 1) Bad(name, text, range);
    return -int64_t(v - 1) - 1;
  }
  if (v > hi || (lo > 0 && v < uint64_t(lo))) Bad(name, text, range);
  return int64_t(v);
}

uint64_t ParseU(std::string_view name, std::string_view text, uint64_t lo, uint64_t hi, bool bytes = false) {
  return uint64_t(ParseInt(name, text, int64_t(lo), hi, bytes));
}

float ParseFloat(std::string_view name, std::string_view text) {
  float v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    // from_chars refuses "inf"/"nan" spellings only in some forms; ValidateOptions judges finiteness.
    if (text == "inf" || text == "-inf" || text == "nan") return float(std::strtod(std::string(text).c_str(), nullptr));
    Bad(name, text, ec == std::errc::result_out_of_range ? "out of a float's range" : "not a number");
  }
  return v;
}

bool ParseBool(std::string_view name, std::string_view text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  Bad(name, text, "expected true or false");
}

template <typename T>
std::string Join(const T* v, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (i) s += ',';
    if constexpr (std::is_floating_point_v<T>) s += TextOf(v[i]);
    else s += std::to_string(v[i]);
  }
  return s;
}

OptionRow MakeRow(std::string name, OptionType type, std::string help, int64_t min = 0, uint64_t max = 0, uint32_t count = 0) {
  OptionRow r;
  r.name = std::move(name);
  r.type = type;
  r.help = std::move(help);
  r.min = min;
  r.max = max;
  r.count = count;
  return r;
}

// Row makers: `Ref` gives the field a row reads and writes.
template <typename T>
using Ref = T& (*)(LoaderOptions&);

template <typename T>
OptionRow Int(std::string name, std::string help, int64_t lo, uint64_t hi, Ref<T> ref, std::string example,
              std::string bad, uint8_t where = kOnCli | kOnPython, bool bytes = false) {
  OptionRow r = MakeRow(name, OptionType::kInt, std::move(help), lo, hi);
  r.where = where;
  r.example = std::move(example);
  r.bad = std::move(bad);
  r.get = [ref](const LoaderOptions& o) { return std::to_string(ref(const_cast<LoaderOptions&>(o))); };
  r.set = [ref, name, lo, hi, bytes](LoaderOptions& o, std::string_view t) { ref(o) = T(ParseInt(name, t, lo, hi, bytes)); };
  return r;
}

OptionRow Bool(std::string name, std::string help, Ref<bool> ref, uint8_t where = kOnCli | kOnPython) {
  OptionRow r = MakeRow(name, OptionType::kBool, std::move(help));
  r.where = where;
  r.get = [ref](const LoaderOptions& o) { return TextOf(ref(const_cast<LoaderOptions&>(o))); };
  LoaderOptions d;
  r.example = ref(d) ? "false" : "true";  // not the default
  r.bad = "maybe";
  r.set = [ref, name](LoaderOptions& o, std::string_view t) { ref(o) = ParseBool(name, t); };
  return r;
}

OptionRow Float(std::string name, std::string help, Ref<float> ref, std::string example, uint8_t where) {
  OptionRow r = MakeRow(name, OptionType::kFloat, std::move(help));
  r.where = where;
  r.example = std::move(example);
  r.bad = "x";
  r.get = [ref](const LoaderOptions& o) { return TextOf(ref(const_cast<LoaderOptions&>(o))); };
  r.set = [ref, name](LoaderOptions& o, std::string_view t) { ref(o) = ParseFloat(name, t); };
  return r;
}

// A list of typed-field names, "a,b,c" (fields, boxes, points).
OptionRow FieldNames(std::string name, std::string help, Ref<std::vector<std::string>> ref, std::string example) {
  OptionRow r = MakeRow(name, OptionType::kTexts, std::move(help));
  r.example = std::move(example);
  r.get = [ref](const LoaderOptions& o) {
    std::string s;
    for (const auto& f : ref(const_cast<LoaderOptions&>(o))) s += (s.empty() ? "" : ",") + f;
    return s;
  };
  r.set = [ref, name](LoaderOptions& o, std::string_view text) {
    ref(o).clear();
    for (std::string_view f : SplitList(text)) {
      if (f.empty()) Bad(name, text, "an empty field name");
      ref(o).emplace_back(f);
    }
  };
  return r;
}

// n floats at ref(o)[0..n).
OptionRow Floats(std::string name, std::string help, uint32_t n, float* (*ref)(LoaderOptions&), std::string example,
                 uint8_t where) {
  OptionRow r = MakeRow(name, OptionType::kFloats, std::move(help));
  r.count = n;
  r.where = where;
  r.example = std::move(example);
  r.bad = "1";
  r.get = [ref, n](const LoaderOptions& o) { return Join(ref(const_cast<LoaderOptions&>(o)), n); };
  r.set = [ref, name, n](LoaderOptions& o, std::string_view t) {
    const auto parts = SplitList(t);
    if (parts.size() != n) Bad(name, t, "needs " + std::to_string(n) + " numbers, got " + std::to_string(parts.size()));
    float v[4];
    for (uint32_t i = 0; i < n; ++i) v[i] = ParseFloat(name + "[" + std::to_string(i) + "]", parts[i]);
    std::copy(v, v + n, ref(o));
  };
  return r;
}

// Choices: `names[i]` stores `values[i]`.
template <typename T>
OptionRow Choice(std::string name, std::string help, std::vector<std::string> names, std::vector<T> values, Ref<T> ref,
                 uint8_t where = kOnCli | kOnPython) {
  OptionRow r = MakeRow(name, OptionType::kChoice, std::move(help));
  r.choices = names;
  r.where = where;
  r.bad = "bogus";
  r.get = [ref, names, values](const LoaderOptions& o) {
    const T v = ref(const_cast<LoaderOptions&>(o));
    for (size_t i = 0; i < values.size(); ++i)
      if (values[i] == v) return names[i];
    return std::string("?");
  };
  r.set = [ref, name, names, values](LoaderOptions& o, std::string_view t) {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == t) {
        ref(o) = values[i];
        return;
      }
    std::string list;
    for (const auto& c : names) list += (list.empty() ? "'" : ", '") + c + "'";
    Bad(name, t, "not one of " + list);
  };
  // The example is another choice than the default's.
  LoaderOptions d;
  const std::string now = r.get(d);
  for (const auto& c : names)
    if (c != now) {
      r.example = c;
      break;
    }
  return r;
}

std::vector<OptionRow> MakeTable() {
  using O = LoaderOptions;
  constexpr uint8_t kAll = kOnCli | kOnPython | kOnWire;
  constexpr uint8_t kBoth = kOnCli | kOnPython;
  std::vector<OptionRow> t;
  // Batches and order.
  t.push_back(Int<uint32_t>("batch_size", "samples per batch on this rank", 1, 1u << 20, [](O& o) -> uint32_t& { return o.batch_size; },
                            "64", "0"));
  t.push_back(Int<uint32_t>("global_batch_size", "samples per batch over all ranks (0: batch_size x world_size; fix this to keep "
                            "batches the same when the rank count changes)", 0, kU32,
                            [](O& o) -> uint32_t& { return o.global_batch_size; }, "1024", "-1"));
  t.push_back(Bool("drop_last", "drop the epoch's last incomplete batch (else it is filled with repeats flagged as padding; "
                   "Python hands it out short unless ranks need equal batches)", [](O& o) -> bool& { return o.drop_last; }));
  t.push_back(Choice<Order>("order", "sample order", {"random", "quasi_random", "sequential"},
                            {Order::kRandom, Order::kQuasiRandom, Order::kSequential}, [](O& o) -> Order& { return o.order; }));
  t.push_back(Int<uint64_t>("quasi_window", "quasi_random: samples shuffled together (0: automatic)", 0, kU64,
                            [](O& o) -> uint64_t& { return o.quasi_window; }, "4096", "-2"));
  t.push_back(Int<uint64_t>("seed", "random seed (order and augmentation)", 0, kU64, [](O& o) -> uint64_t& { return o.seed; }, "7", "x"));
  t.push_back(Int<uint32_t>("view", "augmentation draw: loaders differing only in it read the same order, each augmented independently",
                            0, kU32, [](O& o) -> uint32_t& { return o.view; }, "1", "x"));
  {
    OptionRow r = MakeRow("subset", OptionType::kIndices, "load only these sample indices", 0, kU32);
    r.example = "3,1,2";
    r.bad = "1,-2";
    r.get = [](const O& o) { return Join(o.subset.data(), o.subset.size()); };
    r.set = [](O& o, std::string_view text) {
      o.subset.clear();
      for (std::string_view p : SplitList(text)) o.subset.push_back(uint32_t(ParseU("subset entry", p, 0, kU32)));
    };
    t.push_back(std::move(r));
  }
  t.push_back(Int<uint32_t>("rank", "this rank (distributed)", 0, kU32, [](O& o) -> uint32_t& { return o.rank; }, "1", "-1"));
  t.push_back(Int<uint32_t>("world_size", "number of ranks", 1, 1u << 20, [](O& o) -> uint32_t& { return o.world_size; }, "2", "0"));
  // Threads and memory.
  {
    OptionRow r = MakeRow("threads", OptionType::kThreads,
                "decode threads (0 = all cores), or auto / auto:N: a controller keeps as many as the consumer needs (at most N, "
                "default all cores)", 0, 1024);
    r.example = "auto:3";
    r.bad = "auto:x";
    r.get = [](const O& o) {
      return o.autotune ? (o.threads ? "auto:" + std::to_string(o.threads) : std::string("auto")) : std::to_string(o.threads);
    };
    r.set = [](O& o, std::string_view text) {
      const bool automatic = text.substr(0, 4) == "auto";
      if (automatic && text.size() > 4 && (text[4] != ':' || text.size() == 5)) Bad("threads", text, "expected N, auto or auto:N");
      std::string_view n = automatic ? (text.size() > 5 ? text.substr(5) : "0") : text;
      if (n.empty() || n.find_first_not_of("0123456789") != std::string_view::npos) Bad("threads", text, "expected N, auto or auto:N");
      o.threads = int(ParseInt("threads", n, 0, 1024));
      o.autotune = automatic;
    };
    t.push_back(std::move(r));
  }
  t.push_back(Bool("autotune", "threads becomes the maximum; a controller keeps only the threads the consumer needs",
                   [](O& o) -> bool& { return o.autotune; }));
  t.push_back(Int<uint32_t>("prefetch", "batches prepared ahead of the one the consumer holds", 0, 64,
                            [](O& o) -> uint32_t& { return o.prefetch; }, "2", "65"));
  t.push_back(Int<uint32_t>("max_leases", "extra batch buffers standing in for batches the consumer still holds", 0, 64,
                            [](O& o) -> uint32_t& { return o.max_leases; }, "4", "65"));
  // Output.
  t.push_back(Choice<DType>("dtype", "image element type (uint8: NHWC, unnormalised)", {"float32", "float16", "uint8"},
                            {DType::kFloat32, DType::kFloat16, DType::kUint8}, [](O& o) -> DType& { return o.dtype; }, kAll));
  t.push_back(Choice<Layout>("layout", "image layout", {"NCHW", "NHWC"}, {Layout::kNCHW, Layout::kNHWC},
                             [](O& o) -> Layout& { return o.layout; }, kAll));
  t.push_back(Bool("fancy_upsampling", "JPEG chroma upsampling as libjpeg's default (PIL-identical, slower) instead of box",
                   [](O& o) -> bool& { return o.fancy_upsampling; }, kAll));
  t.push_back(Choice<bool>("idct", "JPEG inverse DCT: accurate (dsc's default) or fast (TurboJPEG's TJFLAG_FASTDCT with "
                           "fancy upsampling, as FFCV decodes: FFCV's pixels exactly)", {"accurate", "fast"}, {false, true},
                           [](O& o) -> bool& { return o.fast_idct; }, kAll));
  t.push_back(Bool("dct_scaling", "crops decode at the smallest DCT scale that keeps them at least the output size",
                   [](O& o) -> bool& { return o.dct_scaling; }, kAll));
  t.push_back(Int<uint64_t>("jpeg_index_budget", "crops of JPEGs without restart markers (FFCV files): bytes of decoder entry "
                            "points kept (K/M/G/T; ~3 KB a photo) so that later crops of an image decode only the MCUs "
                            "they cover (0 = off)", 0, kU64, [](O& o) -> uint64_t& { return o.jpeg_index_budget; },
                            "67108864", "-1", kAll, true));
  t.push_back(Bool("verify", "check each block's checksum on first touch", [](O& o) -> bool& { return o.verify; }, kAll));
  t.push_back(Bool("pread", "read with pread instead of mmap (network filesystems)", [](O& o) -> bool& { return o.use_pread; }));
  t.push_back(Int<uint64_t>("cache_budget", "quasi_random: bytes of the file kept in the page cache by readahead (K/M/G/T; 0 = the "
                            "kernel's readahead only); for a URL, bytes of its blocks kept in cache_dir (two blocks at least)", 0, kU64, [](O& o) -> uint64_t& { return o.cache_budget; }, "134217728", "12X",
                            kBoth, true));
  t.push_back(Int<uint64_t>("readahead_bytes", "quasi_random: bytes of coming blocks asked for ahead of use (K/M/G/T; 0 = the budget)",
                            0, kU64, [](O& o) -> uint64_t& { return o.readahead_bytes; }, "33554432", "-1", kBoth, true));
  {
    OptionRow r = MakeRow("cache_dir", OptionType::kText, "a URL's local cache folder (docs/streaming.md; default $DSC_CACHE_DIR, else "
                          "~/.cache/dsc); cache_budget bounds its blocks");
    r.where = kBoth;
    r.example = "/tmp/dsc-cache";
    r.get = [](const O& o) { return o.cache_dir; };
    r.set = [](O& o, std::string_view text) { o.cache_dir = std::string(text); };
    t.push_back(std::move(r));
  }
  t.push_back(Int<uint64_t>("max_pixels", "refuse images of more pixels, before any allocation", 1, kU64,
                            [](O& o) -> uint64_t& { return o.max_pixels; }, "1000000", "0", kAll));
  t.push_back(Bool("collect_stats", "per-stage worker times", [](O& o) -> bool& { return o.collect_stats; }));
  t.push_back(Bool("defer_augment", "decode into uint8 NHWC and leave the transform list and flip/translate/cutout/normalise to "
                   "Batch::steps and Batch::params (C++'s GPU augmenter)", [](O& o) -> bool& { return o.defer_augment; }, kAll));
  // Augmentation.
  t.push_back(Choice<kernels::CropMode>("crop", "crop transform",
                                        {"none", "random_resized", "center"},
                                        {kernels::CropMode::kNone, kernels::CropMode::kRandomResized, kernels::CropMode::kCenter},
                                        [](O& o) -> kernels::CropMode& { return o.augment.crop; }, kAll));
  {
    OptionRow r = MakeRow("out_size", OptionType::kSize, "crop output size: N (square) or H,W", 1, kI32);
    r.example = "24,32";
    r.bad = "0";
    r.get = [](const O& o) {
      return o.augment.out_w == o.augment.out_h ? std::to_string(o.augment.out_w)
                                                : std::to_string(o.augment.out_h) + "," + std::to_string(o.augment.out_w);
    };
    r.set = [](O& o, std::string_view text) {
      const auto parts = SplitList(text);
      if (parts.size() == 1) {
        o.augment.out_w = o.augment.out_h = int(ParseInt("out_size", parts[0], 1, kI32));
      } else if (parts.size() == 2) {
        o.augment.out_h = int(ParseInt("out_size[0]", parts[0], 1, kI32));
        o.augment.out_w = int(ParseInt("out_size[1]", parts[1], 1, kI32));
      } else {
        Bad("out_size", text, "needs 1 or 2 ints (height, width), got " + std::to_string(parts.size()));
      }
    };
    t.push_back(std::move(r));
  }
  t.push_back(Int<int>("out_w", "crop output width", 0, kI32, [](O& o) -> int& { return o.augment.out_w; }, "24", "-1", kAll));
  t.push_back(Int<int>("out_h", "crop output height", 0, kI32, [](O& o) -> int& { return o.augment.out_h; }, "24", "-1", kAll));
  t.push_back(Floats("scale", "random_resized: area fraction MIN,MAX", 2, [](O& o) { return &o.augment.scale_min; }, "0.25,1", kAll));
  t.push_back(Floats("ratio", "random_resized: aspect ratio MIN,MAX", 2, [](O& o) { return &o.augment.ratio_min; }, "0.5,2", kAll));
  t.push_back(Float("center_ratio", "center without resize: crop side as a fraction of the shorter side",
                    [](O& o) -> float& { return o.augment.center_ratio; }, "0.5", kAll));
  t.push_back(Int<int>("resize", "center: resize the shorter side to N first (torchvision's Resize + CenterCrop)", 0, 1 << 16,
                       [](O& o) -> int& { return o.augment.resize; }, "256", "-1", kAll));
  t.push_back(Bool("flip", "random horizontal flip", [](O& o) -> bool& { return o.augment.flip; }, kAll));
  t.push_back(Int<int>("translate", "random shift of up to N pixels", 0, kI32, [](O& o) -> int& { return o.augment.translate; }, "2",
                       "-1", kAll));
  t.push_back(Int<int>("cutout", "an N x N square filled with fill", 0, kI32, [](O& o) -> int& { return o.augment.cutout; }, "4", "-1",
                       kAll));
  {
    OptionRow r = MakeRow("fill", OptionType::kInts, "R,G,B for translate and cutout", 0, 255, 3);
    r.where = kAll;
    r.example = "1,2,3";
    r.bad = "1,2,256";
    r.get = [](const O& o) { return Join(o.augment.fill, 3); };
    r.set = [](O& o, std::string_view text) {
      const auto parts = SplitList(text);
      if (parts.size() != 3) Bad("fill", text, "needs 3 values (R, G, B), got " + std::to_string(parts.size()));
      uint8_t v[3];
      for (int c = 0; c < 3; ++c) v[c] = uint8_t(ParseInt("fill[" + std::to_string(c) + "]", parts[size_t(c)], 0, 255));
      std::copy(v, v + 3, o.augment.fill);
    };
    t.push_back(std::move(r));
  }
  {
    // The transform list (kernels/transforms.h), in its canonical text so it travels to workers as is.
    OptionRow r = MakeRow("transforms", OptionType::kText,
                          "torchvision-style transforms after decode and crop: 'random_crop(32,padding=4),color_jitter(0.4,0.4,0.4)' or @FILE");
    r.where = kAll;
    r.example = "random_crop(32,padding=4,padding_mode=reflect),color_jitter(0.4,0.4,0.4)";
    r.bad = "colour_jitter(0.4)";
    r.get = [](const O& o) { return o.transforms; };
    r.set = [](O& o, std::string_view text) { o.transforms = CanonicalTransforms(text); };
    t.push_back(std::move(r));
  }
  t.push_back(Bool("normalize", "(x - mean) / std", [](O& o) -> bool& { return o.augment.normalize; }, kAll));
  t.push_back(Floats("mean", "per channel, in 0..255 pixel units", 3, [](O& o) { return o.augment.mean; }, "1,2,3", kAll));
  t.push_back(Floats("std", "per channel, in 0..255 pixel units", 3, [](O& o) { return o.augment.std; }, "4,5,6", kAll));
  {
    // Which image field to decode (format 1.3): workers decode it too, so it travels.
    OptionRow r = MakeRow("image", OptionType::kText, "the image field to decode (default: the file's first; a file may hold several)");
    r.where = kAll;
    r.example = "depth";
    r.get = [](const O& o) { return o.image; };
    r.set = [](O& o, std::string_view text) { o.image = std::string(text); };
    t.push_back(std::move(r));
  }
  t.push_back(Int<uint8_t>("channels",
                           "output channels: 0 = the images' own (1 when every image is grayscale, else 3), 1 (torchvision's "
                           "Grayscale(1) of colour images) or 3",
                           0, 3, [](O& o) -> uint8_t& { return o.channels; }, "1", "4", kAll));
  // Typed fields (format 1.2): which of them batches carry (reader/batch_fields.h).
  t.push_back(FieldNames("fields", "typed fields to deliver, in this order (default: all but the image and labels)",
                         [](O& o) -> std::vector<std::string>& { return o.fields; }, "boxes,caption"));
  t.push_back(FieldNames("boxes",
                         "typed fields that follow the image's crop, flip and translate: a [N,4] float32 box field (x, y, w, h "
                         "in pixels), then per-box fields dropped with a box that leaves the output",
                         [](O& o) -> std::vector<std::string>& { return o.boxes; }, "boxes,category_id,iscrowd"));
  t.push_back(FieldNames("points",
                         "float32 typed fields of points that follow the image's crop, flip and translate: [N,2] (x, y) or "
                         "[N,3] (x, y, v; v set to 0 for a point that leaves the output), variable or fixed arrays",
                         [](O& o) -> std::vector<std::string>& { return o.points; }, "keypoints"));
  // Remote workers (docs/remote.md).
  {
    OptionRow r = MakeRow("remote", OptionType::kTexts, "auxiliary workers (dsc serve) HOST:PORT[,HOST:PORT...] that decode beside the local threads");
    r.example = "127.0.0.1:7000,127.0.0.1:7001";
    r.get = [](const O& o) {
      std::string s;
      for (const auto& a : o.remote.addresses) s += (s.empty() ? "" : ",") + a;
      return s;
    };
    r.set = [](O& o, std::string_view text) { o.remote.addresses = SplitAddresses(std::string(text)); };
    t.push_back(std::move(r));
  }
  const size_t remote_group = t.size();  // the rows below mean nothing without remote
  {
    // Python only: on a command line a token shows in the process list.
    OptionRow r = MakeRow("token", OptionType::kText, "the workers' token");
    r.where = kOnPython;
    r.example = "secret";
    r.get = [](const O& o) { return o.remote.token; };
    r.set = [](O& o, std::string_view text) { o.remote.token = std::string(text); };
    t.push_back(std::move(r));
  }
  {
    OptionRow r = MakeRow("token_file", OptionType::kText, "a file holding the workers' token");
    r.get = [](const O&) { return std::string(); };
    r.set = [](O& o, std::string_view path) { o.remote.token = ReadTokenFile(std::string(path)); };
    t.push_back(std::move(r));
  }
  {
    OptionRow r = MakeRow("tls_root", OptionType::kText, "PEM file of the CA that signed the workers' certificates (TLS)");
    r.get = [](const O&) { return std::string(); };
    r.set = [](O& o, std::string_view path) { o.remote.tls_root = ReadOptionFile(std::string(path)); };
    t.push_back(std::move(r));
  }
  {
    OptionRow r = Int<int>("local_threads", "with remote: local decode threads (0: only while no worker is reachable; default threads)",
                           0, 1024, [](O& o) -> int& { return o.remote.local_threads; }, "0", "-7");
    t.push_back(std::move(r));
  }
  t.push_back(Bool("wire_compression", "with remote: zstd the images on the wire", [](O& o) -> bool& { return o.remote.compression; }));
  // Transport tuning: the defaults suit most links.
  t.push_back(Int<uint32_t>("remote_chunk", "with remote: samples per request (0: about 4 MiB of output)", 0, kMaxRemoteRequestSamples,
                            [](O& o) -> uint32_t& { return o.remote.transport.chunk; }, "64", "-1"));
  t.push_back(Int<uint32_t>("remote_in_flight", "with remote: requests in flight per worker", 1, 64,
                            [](O& o) -> uint32_t& { return o.remote.transport.in_flight; }, "4", "0"));
  t.push_back(Bool("ship_uint8", "with remote: float batches travel as uint8 and are normalised here (false: as floats)",
                   [](O& o) -> bool& { return o.remote.transport.ship_uint8; }));
  t.push_back(Bool("wire_planes", "with remote: uncropped JPEGs of float batches travel as YCbCr planes (fewer bytes, more CPU here)",
                   [](O& o) -> bool& { return o.remote.transport.planes; }));
  t.push_back(Bool("data_path", "with remote: plaintext workers' requests on their data port (false: gRPC only)",
                   [](O& o) -> bool& { return o.remote.transport.data_path; }));
  for (size_t i = remote_group; i < t.size(); ++i) t[i].needs = "remote";
  // Python's: what a training loop that keeps batches, or feeds labels to torch, needs.
  t.push_back(Int<uint64_t>("lease_memory", "bytes of further batch buffers, beyond max_leases, for batches Python keeps (K/M/G/T; "
                            "default a quarter of this machine's memory; past it the loader raises instead of waiting)", 0, kU64,
                            [](O& o) -> uint64_t& { return o.lease_memory; }, "1073741824", "-1", kOnPython, true));
  t.push_back(Choice<uint8_t>("label_dtype", "labels as int64 (torch's type for class indices: cross_entropy, one_hot) or int32",
                              {"int64", "int32"}, {64, 32}, [](O& o) -> uint8_t& { return o.label_bits; }, kOnPython));
  return t;
}

}  // namespace

OptionValueError::OptionValueError(std::string option, std::string value, std::string why)
    : OptionError("option " + option + " = " + value + ": " + why), option_(std::move(option)), value_(std::move(value)),
      why_(std::move(why)) {}

std::string ReadOptionFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot read");
  std::ostringstream s;
  s << f.rdbuf();
  if (f.bad()) throw Error(path + ": cannot read");
  return s.str();
}

std::string ReadTokenFile(const std::string& path) {
  std::string t = ReadOptionFile(path);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  if (t.empty()) throw Error(path + ": the token file is empty");
  return t;
}

std::string TextOf(bool v) { return v ? "true" : "false"; }

std::string TextOf(float v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string TextOf(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}


const std::vector<OptionRow>& LoaderOptionTable() {
  static const std::vector<OptionRow> table = MakeTable();
  return table;
}

const OptionRow* FindLoaderOption(std::string_view name) {
  std::string snake(name);
  for (char& c : snake)
    if (c == '-') c = '_';
  for (const OptionRow& r : LoaderOptionTable())
    if (r.name == snake) return &r;
  return nullptr;
}

void SetLoaderOption(LoaderOptions& o, std::string_view name, std::string_view text) {
  const OptionRow* r = FindLoaderOption(name);
  if (!r) {
    std::string list;
    for (const OptionRow& row : LoaderOptionTable()) list += (list.empty() ? "" : ", ") + row.name;
    throw OptionError("unknown loader option '" + std::string(name) + "'; accepted: " + list);
  }
  r->set(o, text);
}

std::string GetLoaderOption(const LoaderOptions& o, std::string_view name) {
  const OptionRow* r = FindLoaderOption(name);
  if (!r) throw OptionError("unknown loader option '" + std::string(name) + "'");
  return r->get(o);
}

std::string CliFlag(const OptionRow& row) {
  std::string f = row.name;
  for (char& c : f)
    if (c == '_') c = '-';
  return f;
}

std::string TypeHint(const OptionRow& r) {
  switch (r.type) {
    case OptionType::kBool: return "true|false";
    case OptionType::kInt: return "N in " + std::to_string(r.min) + ".." + std::to_string(r.max);
    case OptionType::kFloat: return "X";
    case OptionType::kChoice: {
      std::string s;
      for (const auto& c : r.choices) s += (s.empty() ? "" : "|") + c;
      return s;
    }
    case OptionType::kText: return "TEXT";
    case OptionType::kInts: return std::to_string(r.count) + " ints in " + std::to_string(r.min) + ".." + std::to_string(r.max);
    case OptionType::kFloats: return std::to_string(r.count) + " numbers";
    case OptionType::kIndices: return "N[,N...]";
    case OptionType::kTexts: return "A[,B...]";
    case OptionType::kThreads: return "N|auto|auto:N";
    case OptionType::kSize: return "N|H,W";
  }
  return "";
}

const std::vector<std::string>& PresetNames() {
  static const std::vector<std::string> names = {"cifar-train", "cifar-test", "imagenet-train", "imagenet-test"};
  return names;
}

LoaderOptions Preset(std::string_view name) {
  if (name == "cifar-train") return LoaderOptions::CifarTrain();
  if (name == "cifar-test") return LoaderOptions::CifarTest();
  if (name == "imagenet-train") return LoaderOptions::ImagenetTrain();
  if (name == "imagenet-test") return LoaderOptions::ImagenetTest();
  std::string list;
  for (const auto& n : PresetNames()) list += (list.empty() ? "" : ", ") + n;
  throw OptionError("unknown preset '" + std::string(name) + "'; accepted: " + list);
}

}  // namespace dsc
