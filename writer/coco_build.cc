// `dsc build instances.json out.beton --images DIR`: COCO's instances file (writer/coco.h) written as
// typed fields with dsc::Writer: the image, image_id, boxes [N, 4] float32 (x, y, w, h in pixels),
// category_id [N] int32, iscrowd [N] uint8 and area [N] float32, images in the file's order; with
// --coco-masks, a mask of the annotations' polygons and RLEs (instance ids or category ids).
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "format/error.h"
#include "writer/build.h"
#include "writer/coco.h"
#include "writer/source.h"
#include "writer/typed_build.h"
#include "writer/writer.h"

namespace dsc::writer {

bool IsCocoSource(const std::string& source, const std::string& format) {
  if (format == "coco") return true;
  if (format != "auto" || source.size() < 5) return false;
  std::string ext = source.substr(source.size() - 5);
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".json";
}

BuildReport BuildCoco(const std::string& path, const std::string& out, const BuildOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  auto log = o.log ? o.log : [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
  if (o.images_dir.empty())
    throw OptionError(path + ": a COCO instances file needs --images DIR, the folder its \"file_name\"s are in");
  if (!o.coco_masks.empty() && o.coco_masks != "instance" && o.coco_masks != "semantic")
    throw OptionError("--coco-masks must be instance or semantic, got '" + o.coco_masks + "'");
  const bool masks = !o.coco_masks.empty();
  const MaskKind kind = o.coco_masks == "semantic" ? MaskKind::kSemantic : MaskKind::kInstance;
  const CocoSet set = ReadCoco(path);
  for (const auto& n : set.notes) log("note: " + n);
  using format::DType;
  Schema schema = {ImageField("image"),
                   ScalarField("image_id", DType::kInt64),
                   VarArrayField("boxes", DType::kFloat32, {4}),
                   VarArrayField("category_id", DType::kInt32),
                   VarArrayField("iscrowd", DType::kUInt8),
                   VarArrayField("area", DType::kFloat32)};
  if (masks) schema.push_back(MaskField("mask"));
  WriterOptions wo = TypedWriterOptions(o, "coco");
  BuildReport rep;
  rep.format = "coco";
  if (o.skip_invalid)
    wo.on_skip = [&](const std::string& why) {
      log("skipped: " + why);
      ++rep.skipped;
    };
  const size_t all = set.images.size();
  const ShardRange range = ShardOf(o, all);
  const size_t begin = range.begin, end = range.end;
  Writer w(out, std::move(schema), wo);
  if (o.shard_count) w.set_shard(o.shard_index, o.shard_count, all);
  for (size_t i = begin; i < end; ++i) {
    const CocoImage& img = set.images[i];
    const std::string file = (std::filesystem::path(o.images_dir) / img.file_name).string();
    Sample s;
    s.set_where(path + ": image " + std::to_string(img.id) + " (" + file + ")");
    try {
      s.SetImage("image", ReadWholeFile(file, o.max_file_size));
    } catch (const EnvironmentError&) {
      throw;
    } catch (const Error& e) {
      if (!o.skip_invalid) throw Error(std::string(e.what()) + " (use --skip-invalid to skip such images)");
      log(std::string("skipped: ") + e.what());
      ++rep.skipped;
      continue;
    }
    s.SetScalar<int64_t>("image_id", img.id);
    s.SetArray<float>("boxes", img.boxes.data(), img.boxes.size());
    s.SetArray<int32_t>("category_id", img.category.data(), img.category.size());
    s.SetArray<uint8_t>("iscrowd", img.iscrowd.data(), img.iscrowd.size());
    s.SetArray<float>("area", img.area.data(), img.area.size());
    if (masks) s.SetMask("mask", CocoMask(set, img, kind), img.width, img.height);
    w.Add(std::move(s));
    if (o.progress && (i - begin) % 256 == 0)
      std::fprintf(stderr, "\r%zu/%zu images", i - begin, end - begin);
  }
  w.set_skipped(rep.skipped);
  CloseTypedBuild(&w, t0, &rep);
  return rep;
}

}  // namespace dsc::writer
