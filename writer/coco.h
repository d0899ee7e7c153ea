// COCO's instances JSON (annotations/instances_*.json) as dsc samples: per image its file, boxes,
// categories, crowd flags, areas, and on request its masks rasterised from polygons or RLE. Parsing and
// rasterising only; writer/ turns the result into typed fields.
//
// What a build keeps from COCO, and how:
// - images in the file's order (not sorted by id), so a build is the same every time;
// - boxes [N, 4] float32 (x, y, w, h) in pixels, as COCO stores them; categories [N] int32 (COCO's
//   ids, which have gaps; `categories` lists id and name); iscrowd [N] uint8; area [N] float32;
// - a mask per image (MaskKind): each pixel is the index+1 of the last annotation covering it
//   (instance) or its category id (semantic); 0 is background.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "format/error.h"
#include "writer/build.h"

namespace dsc::writer {

struct CocoImage {
  int64_t id = 0;
  std::string file_name;  // relative to the images folder
  int width = 0, height = 0;
  std::vector<float> boxes;       // 4 per annotation: x, y, w, h
  std::vector<int32_t> category;  // per annotation
  std::vector<uint8_t> iscrowd;
  std::vector<float> area;
  std::vector<size_t> annotations;  // indices into CocoSet::segmentations, one per annotation
};

// One annotation's segmentation as COCO gives it: polygons (each x0, y0, x1, y1, ... in pixels) or an
// RLE (column-major run lengths starting with a run of zeros, of size height x width).
struct CocoSegmentation {
  std::vector<std::vector<double>> polygons;
  std::vector<uint32_t> rle;
  bool is_rle = false;
  int rle_h = 0, rle_w = 0;
};

struct CocoSet {
  std::vector<CocoImage> images;
  std::vector<std::pair<int32_t, std::string>> categories;  // id, name, in the file's order
  std::vector<CocoSegmentation> segmentations;
  std::vector<std::string> notes;  // facts the user should hear (images without annotations, ...)
};

// Reads and checks an instances file: throws dsc::Error naming the file and the entry ("annotation
// 1234 (image 5): bbox [..] is outside the 640x480 image") for a missing key, a wrong type, an
// annotation of an unknown image or category, a box outside its image (half a pixel of slack for
// rounding) or with a negative size. Files over `max_size` bytes are refused before reading.
CocoSet ReadCoco(const std::string& path, uint64_t max_size = uint64_t(4) << 30);
// The same from JSON text; `name` names it in messages.
CocoSet ParseCoco(const std::string& json, const std::string& name);

// COCO's compressed RLE string (the LEB128-like, delta-coded counts of pycocotools) to run lengths.
// Throws dsc::Error on a malformed string.
std::vector<uint32_t> DecodeRleString(const std::string& s);

// Sets to `value` every pixel of a w x h mask (row-major) whose centre lies inside the polygon
// (even-odd rule); the polygon is x0, y0, x1, y1, ... in pixels.
void RasterizePolygon(const std::vector<double>& xy, int w, int h, uint8_t value, uint8_t* mask);
// Sets to `value` the pixels an RLE covers (column-major runs, alternately 0 and 1, starting with 0).
// Throws dsc::Error when the runs do not add up to rle_h x rle_w or the size is not the image's.
void PaintRle(const CocoSegmentation& s, int w, int h, uint8_t value, uint8_t* mask, const std::string& where);

enum class MaskKind { kInstance, kSemantic };
// The mask of image `img` (img.width x img.height bytes, row-major), annotations painted in order.
// Instance masks need at most 255 annotations: more is an error naming the image.
std::vector<uint8_t> CocoMask(const CocoSet& set, const CocoImage& img, MaskKind kind);

// Whether `source` is read as COCO: --format coco, or --format auto and a name ending in .json.
bool IsCocoSource(const std::string& source, const std::string& format);

// `dsc build instances.json out.beton --images DIR`: every image of the file with its annotations as
// typed fields (format 1.2): image, image_id (int64), boxes [N, 4] float32 (x, y, w, h in pixels, as
// COCO), category_id [N] int32, iscrowd [N] uint8, area [N] float32, images in the file's order; with
// options.coco_masks, "mask" (1 channel, the image's size): annotation k's pixels hold k + 1 (instance)
// or its category id (semantic), later annotations painted over earlier ones.
// A missing or unreadable image is an error naming it (options.skip_invalid skips and lists it).
BuildReport BuildCoco(const std::string& source, const std::string& out, const BuildOptions& options);

}  // namespace dsc::writer
