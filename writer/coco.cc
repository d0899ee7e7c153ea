#include "writer/coco.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/stat.h>

namespace dsc::writer {

namespace {

using nlohmann::json;

[[noreturn]] void Fail(const std::string& name, const std::string& what) { throw Error(name + ": " + what); }

const json& Key(const json& obj, const char* key, const std::string& name, const std::string& where) {
  if (!obj.is_object()) Fail(name, where + " is not an object");
  const auto it = obj.find(key);
  if (it == obj.end()) Fail(name, where + " has no \"" + key + "\"");
  return *it;
}

int64_t Int(const json& v, const std::string& name, const std::string& where) {
  if (!v.is_number_integer()) Fail(name, where + " must be an integer, got " + v.dump().substr(0, 40));
  return v.get<int64_t>();
}

double Number(const json& v, const std::string& name, const std::string& where) {
  if (!v.is_number()) Fail(name, where + " must be a number, got " + v.dump().substr(0, 40));
  return v.get<double>();
}

CocoSegmentation Segmentation(const json& v, const CocoImage& img, const std::string& name, const std::string& where) {
  CocoSegmentation s;
  if (v.is_array()) {  // polygons
    for (size_t k = 0; k < v.size(); ++k) {
      const json& poly = v[k];
      const std::string at = where + " polygon " + std::to_string(k);
      if (!poly.is_array() || poly.size() % 2 != 0 || poly.size() < 6)
        Fail(name, at + " must list at least 3 points as x, y pairs");
      std::vector<double> xy;
      xy.reserve(poly.size());
      for (const json& c : poly) xy.push_back(Number(c, name, at));
      s.polygons.push_back(std::move(xy));
    }
    return s;
  }
  if (v.is_object()) {  // RLE, compressed (string) or not (list of counts)
    const json& size = Key(v, "size", name, where + " segmentation");
    if (!size.is_array() || size.size() != 2) Fail(name, where + " RLE size must be [height, width]");
    s.rle_h = int(Int(size[0], name, where + " RLE size"));
    s.rle_w = int(Int(size[1], name, where + " RLE size"));
    if (s.rle_h != img.height || s.rle_w != img.width)
      Fail(name, where + " RLE is " + std::to_string(s.rle_w) + "x" + std::to_string(s.rle_h) + ", its image " +
                     std::to_string(img.width) + "x" + std::to_string(img.height));
    const json& counts = Key(v, "counts", name, where + " segmentation");
    if (counts.is_string()) {
      try {
        s.rle = DecodeRleString(counts.get<std::string>());
      } catch (const Error& e) {
        Fail(name, where + ": " + e.what());
      }
    } else if (counts.is_array()) {
      for (const json& c : counts) {
        const int64_t n = Int(c, name, where + " RLE counts");
        if (n < 0 || n > int64_t(UINT32_MAX)) Fail(name, where + " RLE count out of range");
        s.rle.push_back(uint32_t(n));
      }
    } else {
      Fail(name, where + " RLE counts must be a string or a list");
    }
    s.is_rle = true;
    return s;
  }
  Fail(name, where + " segmentation must be polygons or an RLE object");
}

}  // namespace

std::vector<uint32_t> DecodeRleString(const std::string& str) {
  std::vector<uint32_t> counts;
  std::vector<int64_t> raw;
  size_t p = 0;
  while (p < str.size()) {
    int64_t x = 0;
    int k = 0;
    bool more = true;
    while (more) {
      if (p >= str.size()) throw Error("RLE string ends inside a count");
      const int c = int(uint8_t(str[p])) - 48;
      if (c < 0 || c > 63) throw Error("RLE string has a byte outside '0'..'o' at " + std::to_string(p));
      if (k > 12) throw Error("RLE count too long at " + std::to_string(p));
      x |= int64_t(c & 0x1f) << (5 * k);
      more = (c & 0x20) != 0;
      ++p;
      ++k;
      if (!more && (c & 0x10)) x |= -(int64_t(1) << (5 * k));  // sign-extend
    }
    // From the third count on, each is stored as the difference to the count two before (same parity).
    if (raw.size() > 2) x += raw[raw.size() - 2];
    if (x < 0 || x > int64_t(UINT32_MAX)) throw Error("RLE count " + std::to_string(counts.size()) + " is out of range");
    raw.push_back(x);
    counts.push_back(uint32_t(x));
  }
  return counts;
}

void RasterizePolygon(const std::vector<double>& xy, int w, int h, uint8_t value, uint8_t* mask) {
  const size_t n = xy.size() / 2;
  if (n < 3) return;
  std::vector<double> xs;
  for (int y = 0; y < h; ++y) {
    const double cy = y + 0.5;
    xs.clear();
    // Crossings of the row's centre line with each edge, half-open in y so a vertex is counted once.
    for (size_t i = 0; i < n; ++i) {
      const double x0 = xy[2 * i], y0 = xy[2 * i + 1];
      const double x1 = xy[2 * ((i + 1) % n)], y1 = xy[2 * ((i + 1) % n) + 1];
      if ((y0 <= cy) == (y1 <= cy)) continue;
      xs.push_back(x0 + (cy - y0) * (x1 - x0) / (y1 - y0));
    }
    std::sort(xs.begin(), xs.end());
    for (size_t k = 0; k + 1 < xs.size(); k += 2) {
      // Pixels whose centre x + 0.5 lies in [xs[k], xs[k+1]).
      const double lo = std::max(0.0, std::ceil(xs[k] - 0.5));
      const double hi = std::min(double(w), std::ceil(xs[k + 1] - 0.5));
      for (int x = int(lo); x < int(hi); ++x) mask[size_t(y) * w + x] = value;
    }
  }
}

void PaintRle(const CocoSegmentation& s, int w, int h, uint8_t value, uint8_t* mask, const std::string& where) {
  if (s.rle_w != w || s.rle_h != h) throw Error(where + ": RLE size differs from the image's");
  const uint64_t total = uint64_t(w) * uint64_t(h);
  uint64_t pos = 0, sum = 0;
  for (uint32_t c : s.rle) sum += c;
  if (sum != total)
    throw Error(where + ": RLE runs cover " + std::to_string(sum) + " pixels, the image has " + std::to_string(total));
  for (size_t i = 0; i < s.rle.size(); ++i) {
    if (i % 2 == 1)  // odd runs are foreground; positions are column-major (pos = x * h + y)
      for (uint64_t q = pos; q < pos + s.rle[i]; ++q) mask[size_t(q % uint64_t(h)) * w + size_t(q / uint64_t(h))] = value;
    pos += s.rle[i];
  }
}

CocoSet ParseCoco(const std::string& text, const std::string& name) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    Fail(name, std::string("not valid JSON: ") + e.what());
  }
  CocoSet set;
  const json& images = Key(doc, "images", name, "the file");
  const json& anns = Key(doc, "annotations", name, "the file");
  if (!images.is_array()) Fail(name, "\"images\" must be a list");
  if (!anns.is_array()) Fail(name, "\"annotations\" must be a list");
  std::map<int32_t, size_t> cat_at;
  if (doc.contains("categories")) {
    const json& cats = doc["categories"];
    if (!cats.is_array()) Fail(name, "\"categories\" must be a list");
    for (size_t i = 0; i < cats.size(); ++i) {
      const std::string where = "category " + std::to_string(i);
      const int64_t id = Int(Key(cats[i], "id", name, where), name, where + " id");
      const json& nm = Key(cats[i], "name", name, where);
      if (!nm.is_string()) Fail(name, where + " name must be a string");
      if (id < INT32_MIN || id > INT32_MAX) Fail(name, where + " id out of range");
      if (!cat_at.emplace(int32_t(id), i).second) Fail(name, where + ": id " + std::to_string(id) + " appears twice");
      set.categories.emplace_back(int32_t(id), nm.get<std::string>());
    }
  }
  std::map<int64_t, size_t> image_at;
  set.images.reserve(images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    const std::string where = "image entry " + std::to_string(i);
    CocoImage img;
    img.id = Int(Key(images[i], "id", name, where), name, where + " id");
    const json& fn = Key(images[i], "file_name", name, where);
    if (!fn.is_string()) Fail(name, where + " file_name must be a string");
    img.file_name = fn.get<std::string>();
    const int64_t w = Int(Key(images[i], "width", name, where), name, where + " width");
    const int64_t h = Int(Key(images[i], "height", name, where), name, where + " height");
    if (w < 1 || h < 1 || w > 65535 || h > 65535)
      Fail(name, where + " (" + img.file_name + "): size " + std::to_string(w) + "x" + std::to_string(h) +
                     " is outside 1..65535");
    img.width = int(w);
    img.height = int(h);
    if (!image_at.emplace(img.id, i).second) Fail(name, where + ": image id " + std::to_string(img.id) + " appears twice");
    set.images.push_back(std::move(img));
  }
  for (size_t i = 0; i < anns.size(); ++i) {
    const json& a = anns[i];
    std::string where = "annotation entry " + std::to_string(i);
    if (a.is_object() && a.contains("id") && a["id"].is_number_integer())
      where = "annotation " + std::to_string(a["id"].get<int64_t>());
    const int64_t image_id = Int(Key(a, "image_id", name, where), name, where + " image_id");
    const auto it = image_at.find(image_id);
    if (it == image_at.end()) Fail(name, where + ": image_id " + std::to_string(image_id) + " is not in \"images\"");
    CocoImage& img = set.images[it->second];
    where += " (image " + std::to_string(image_id) + ", " + img.file_name + ")";
    const int64_t cat = Int(Key(a, "category_id", name, where), name, where + " category_id");
    if (!cat_at.empty() && (cat < INT32_MIN || cat > INT32_MAX || !cat_at.count(int32_t(cat))))
      Fail(name, where + ": category_id " + std::to_string(cat) + " is not in \"categories\"");
    const json& bbox = Key(a, "bbox", name, where);
    if (!bbox.is_array() || bbox.size() != 4) Fail(name, where + ": bbox must be [x, y, width, height]");
    float b[4];
    for (int k = 0; k < 4; ++k) b[k] = float(Number(bbox[k], name, where + " bbox"));
    // Half a pixel of slack: COCO's boxes are rounded to two decimals and some touch the border.
    const double slack = 0.5;
    if (!(b[2] >= 0 && b[3] >= 0) || !(b[0] >= -slack && b[1] >= -slack) || !(b[0] + b[2] <= img.width + slack) ||
        !(b[1] + b[3] <= img.height + slack)) {
      std::ostringstream m;
      m << where << ": bbox [" << b[0] << ", " << b[1] << ", " << b[2] << ", " << b[3] << "] is outside the " << img.width
        << "x" << img.height << " image";
      Fail(name, m.str());
    }
    img.boxes.insert(img.boxes.end(), b, b + 4);
    img.category.push_back(int32_t(cat));
    uint8_t crowd = 0;
    if (a.contains("iscrowd")) {
      const int64_t c = Int(a["iscrowd"], name, where + " iscrowd");
      if (c != 0 && c != 1) Fail(name, where + ": iscrowd must be 0 or 1");
      crowd = uint8_t(c);
    }
    img.iscrowd.push_back(crowd);
    img.area.push_back(a.contains("area") ? float(Number(a["area"], name, where + " area")) : b[2] * b[3]);
    img.annotations.push_back(set.segmentations.size());
    set.segmentations.push_back(a.contains("segmentation") ? Segmentation(a["segmentation"], img, name, where)
                                                            : CocoSegmentation());
  }
  size_t empty = 0;
  for (const CocoImage& img : set.images) empty += img.boxes.empty();
  if (empty > 0) set.notes.push_back(std::to_string(empty) + " images have no annotations (kept, with 0 boxes)");
  return set;
}

CocoSet ReadCoco(const std::string& path, uint64_t max_size) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) Fail(path, "cannot open (no such file?)");
  if (!S_ISREG(st.st_mode)) Fail(path, "not a regular file");
  if (uint64_t(st.st_size) > max_size)
    Fail(path, std::to_string(st.st_size) + " bytes is over the limit of " + std::to_string(max_size));
  std::ifstream in(path, std::ios::binary);
  std::string text(size_t(st.st_size), '\0');
  if (!in.read(text.data(), std::streamsize(text.size()))) Fail(path, "read failed");
  return ParseCoco(text, path);
}

std::vector<uint8_t> CocoMask(const CocoSet& set, const CocoImage& img, MaskKind kind) {
  const size_t n = img.annotations.size();
  if (kind == MaskKind::kInstance && n > 255)
    throw Error("image " + std::to_string(img.id) + " (" + img.file_name + "): " + std::to_string(n) +
                " annotations do not fit an 8-bit instance mask (at most 255)");
  std::vector<uint8_t> mask(size_t(img.width) * img.height, 0);
  for (size_t k = 0; k < n; ++k) {
    const CocoSegmentation& s = set.segmentations[img.annotations[k]];
    int32_t v = kind == MaskKind::kInstance ? int32_t(k + 1) : img.category[k];
    if (v < 0 || v > 255)
      throw Error("image " + std::to_string(img.id) + " (" + img.file_name + "): category " + std::to_string(v) +
                  " does not fit an 8-bit semantic mask");
    const std::string where = "image " + std::to_string(img.id) + " annotation " + std::to_string(k);
    if (s.is_rle) PaintRle(s, img.width, img.height, uint8_t(v), mask.data(), where);
    for (const auto& poly : s.polygons) RasterizePolygon(poly, img.width, img.height, uint8_t(v), mask.data());
  }
  return mask;
}

}  // namespace dsc::writer
