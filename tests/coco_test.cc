// COCO instances files (writer/coco.h): parsing with its errors, RLE strings decoded against counts
// worked out by hand from the format, polygons against a per-pixel crossing test.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "format/fields.h"
#include "reader/dataset.h"
#include "tests/test_util.h"
#include "writer/coco.h"

namespace dsc::writer {
namespace {

TEST(Coco, RleStringsDecode) {
  // Each count is 5-bit groups + '0', bit 0x20 = more groups, bit 0x10 of the last = negative; from the
  // third count on, the stored value is the difference to the count two before.
  EXPECT_EQ(DecodeRleString("532"), (std::vector<uint32_t>{5, 3, 2}));
  EXPECT_EQ(DecodeRleString("5321"), (std::vector<uint32_t>{5, 3, 2, 4}));  // 3 + 1
  EXPECT_EQ(DecodeRleString("532N"), (std::vector<uint32_t>{5, 3, 2, 1}));  // 'N' = 30: -2, 3 - 2
  // 100 = 0b11_00100: low group 4 with "more" (0x24 + 48 = 'T'), then 3 ('3').
  EXPECT_EQ(DecodeRleString("T3"), (std::vector<uint32_t>{100}));
  EXPECT_THROW(DecodeRleString("T"), Error);    // ends inside a count
  EXPECT_THROW(DecodeRleString("5\x01"), Error);  // a byte below '0'
  EXPECT_THROW(DecodeRleString("5N"), Error);     // a negative first count... second count -2
}

bool InsideCrossing(const std::vector<double>& xy, double px, double py) {
  bool in = false;
  const size_t n = xy.size() / 2;
  for (size_t i = 0, j = n - 1; i < n; j = i++) {
    const double xi = xy[2 * i], yi = xy[2 * i + 1], xj = xy[2 * j], yj = xy[2 * j + 1];
    if ((yi > py) != (yj > py) && px < (xj - xi) * (py - yi) / (yj - yi) + xi) in = !in;
  }
  return in;
}

TEST(Coco, PolygonsCoverThePixelsWhoseCentreIsInside) {
  const int w = 61, h = 47;
  const std::vector<std::vector<double>> polys = {
      {3.2, 4.7, 50.1, 9.9, 40.5, 44.0, 8.8, 30.3},           // convex quad
      {5, 5, 55, 5, 30, 40, 30, 15},                          // concave (arrow)
      {10.5, 2, 20.25, 45.5, 30.75, 2, 10.5, 30, 40.1, 30},   // self-intersecting star: even-odd
      {-10, -10, 70, 20, 20, 60}};                            // leaves the image
  for (size_t k = 0; k < polys.size(); ++k) {
    std::vector<uint8_t> mask(size_t(w) * h, 0);
    RasterizePolygon(polys[k], w, h, 7, mask.data());
    size_t on = 0;
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const bool want = InsideCrossing(polys[k], x + 0.5, y + 0.5);
        ASSERT_EQ(mask[size_t(y) * w + x] == 7, want) << "polygon " << k << " pixel " << x << "," << y;
        on += want;
      }
    EXPECT_GT(on, 100u) << k;
  }
}

TEST(Coco, RlePaintsColumnMajor) {
  CocoSegmentation s;
  s.is_rle = true;
  s.rle_w = 3;
  s.rle_h = 2;
  s.rle = {1, 2, 2, 1};  // pixels in column order: 0 1 1 0 0 1
  std::vector<uint8_t> m(6, 0);
  PaintRle(s, 3, 2, 9, m.data(), "t");
  // column-major (x = q / 2, y = q % 2): q=1 -> (0,1), q=2 -> (1,0), q=5 -> (2,1)
  EXPECT_EQ(m, (std::vector<uint8_t>{0, 9, 0, 9, 0, 9}));
  s.rle = {1, 2, 2};
  EXPECT_THROW(PaintRle(s, 3, 2, 9, m.data(), "t"), Error);  // covers 5 of 6 pixels
}

const char* kSmall = R"({
  "images": [{"id": 7, "file_name": "b.jpg", "width": 40, "height": 30},
             {"id": 3, "file_name": "a.jpg", "width": 20, "height": 10}],
  "categories": [{"id": 1, "name": "cat"}, {"id": 18, "name": "dog"}],
  "annotations": [
    {"id": 100, "image_id": 3, "category_id": 18, "bbox": [1, 2, 5, 4], "area": 12.5, "iscrowd": 0,
     "segmentation": [[1, 2, 6, 2, 6, 6, 1, 6]]},
    {"id": 101, "image_id": 3, "category_id": 1, "bbox": [0, 0, 20, 10], "iscrowd": 1,
     "segmentation": {"size": [10, 20], "counts": [10, 5, 185]}}
  ]})";

TEST(Coco, ParsesImagesInFileOrderWithTheirAnnotations) {
  const CocoSet set = ParseCoco(kSmall, "inst.json");
  ASSERT_EQ(set.images.size(), 2u);
  EXPECT_EQ(set.images[0].file_name, "b.jpg");
  EXPECT_TRUE(set.images[0].boxes.empty());
  const CocoImage& a = set.images[1];
  EXPECT_EQ(a.boxes, (std::vector<float>{1, 2, 5, 4, 0, 0, 20, 10}));
  EXPECT_EQ(a.category, (std::vector<int32_t>{18, 1}));
  EXPECT_EQ(a.iscrowd, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(a.area, (std::vector<float>{12.5f, 200.0f}));
  ASSERT_EQ(set.categories.size(), 2u);
  EXPECT_EQ(set.categories[1].second, "dog");
  EXPECT_EQ(set.notes.size(), 1u);
  const std::vector<uint8_t> inst = CocoMask(set, a, MaskKind::kInstance);
  const std::vector<uint8_t> sem = CocoMask(set, a, MaskKind::kSemantic);
  // The polygon covers x 1..5, y 2..5 (centres inside); the RLE (drawn after it) rows 0..4 of column 0.
  EXPECT_EQ(inst[size_t(3) * 20 + 3], 1);
  EXPECT_EQ(sem[size_t(3) * 20 + 3], 18);
  EXPECT_EQ(inst[size_t(0) * 20 + 0], 0);
  // RLE: 10 zeros (all of column 0), then 5 ones: column 1, rows 0..4, drawn over the polygon.
  EXPECT_EQ(inst[size_t(0) * 20 + 1], 2);
  EXPECT_EQ(inst[size_t(4) * 20 + 1], 2);
  EXPECT_EQ(inst[size_t(5) * 20 + 1], 1);  // the polygon only
  EXPECT_EQ(sem[size_t(0) * 20 + 1], 1);   // category 1
  EXPECT_EQ(sem[size_t(0) * 20 + 2], 0);
}

std::string ErrorOf(const std::string& json) {
  try {
    ParseCoco(json, "inst.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Coco, BadEntriesAreNamed) {
  std::string bad = kSmall;
  bad.replace(bad.find("[1, 2, 5, 4]"), 12, "[1, 2, 25, 4]");
  EXPECT_EQ(ErrorOf(bad), "inst.json: annotation 100 (image 3, a.jpg): bbox [1, 2, 25, 4] is outside the 20x10 image");
  bad = kSmall;
  bad.replace(bad.find("\"image_id\": 3, \"category_id\": 18"), 13, "\"image_id\": 4");
  EXPECT_EQ(ErrorOf(bad), "inst.json: annotation 100: image_id 4 is not in \"images\"");
  bad = kSmall;
  bad.replace(bad.find("\"category_id\": 18"), 17, "\"category_id\": 19");
  EXPECT_NE(ErrorOf(bad).find("category_id 19 is not in \"categories\""), std::string::npos);
  bad = kSmall;
  bad.replace(bad.find("[10, 20]"), 8, "[11, 20]");
  EXPECT_NE(ErrorOf(bad).find("annotation 101 (image 3, a.jpg) RLE is 20x11, its image 20x10"), std::string::npos);
  EXPECT_NE(ErrorOf("{\"images\": [").find("inst.json: not valid JSON"), std::string::npos);
  EXPECT_EQ(ErrorOf("{\"images\": []}"), "inst.json: the file has no \"annotations\"");
  EXPECT_NE(ErrorOf(R"({"images": [{"id": 1, "file_name": "x", "width": 0, "height": 5}], "annotations": []})")
                .find("size 0x5 is outside 1..65535"),
            std::string::npos);
}

// A COCO file over real photos, built into typed fields and read back field by field.
TEST(Coco, BuildsTypedFieldsFromRealPhotos) {
  const std::string photos = test::PhotosTree(DSC_PHOTOS);
  ASSERT_FALSE(photos.empty());
  std::vector<std::filesystem::path> files;
  for (const auto& d : std::filesystem::directory_iterator(photos))
    for (const auto& f : std::filesystem::directory_iterator(d.path())) files.push_back(f.path());
  std::sort(files.begin(), files.end());
  files.resize(6);
  const std::string dir = test::ScratchDir();
  std::string images = "[", anns = "[";
  int ann_id = 1;
  std::vector<std::vector<float>> want_boxes(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    int w = 0, h = 0;
    test::ReferenceDecode(test::ReadFile(files[i].string()), &w, &h);
    const std::string rel = files[i].parent_path().filename().string() + "/" + files[i].filename().string();
    images += std::string(i ? "," : "") + "{\"id\": " + std::to_string(100 + i) + ", \"file_name\": \"" + rel +
              "\", \"width\": " + std::to_string(w) + ", \"height\": " + std::to_string(h) + "}";
    for (size_t k = 0; k < i % 3; ++k) {  // 0, 1 or 2 boxes
      const float b[4] = {float(k * 10), 5.5f, float(w / 2), float(h / 3)};
      want_boxes[i].insert(want_boxes[i].end(), b, b + 4);
      const int id = ann_id++;
      anns += std::string(id > 1 ? "," : "") + "{\"id\": " + std::to_string(id) + ", \"image_id\": " +
              std::to_string(100 + i) + ", \"category_id\": " + std::to_string(k + 1) + ", \"bbox\": [" +
              std::to_string(b[0]) + ", " + std::to_string(b[1]) + ", " + std::to_string(b[2]) + ", " +
              std::to_string(b[3]) + "], \"iscrowd\": 0}";
    }
  }
  const std::string json = "{\"images\": " + images + "], \"annotations\": " + anns +
                           "], \"categories\": [{\"id\": 1, \"name\": \"a\"}, {\"id\": 2, \"name\": \"b\"}]}";
  test::WriteFile(dir + "/instances.json", json.data(), json.size());
  BuildOptions o;
  o.images_dir = photos;
  o.log = [](const std::string&) {};
  const BuildReport rep = BuildCoco(dir + "/instances.json", dir + "/coco.beton", o);
  EXPECT_EQ(rep.samples, files.size());
  Dataset ds(dir + "/coco.beton");
  const format::FileView& v = ds.view();
  ASSERT_TRUE(v.typed());
  const auto& fields = v.meta().fields;
  auto field = [&](const std::string& name) {
    for (size_t f = 0; f < fields.size(); ++f)
      if (fields[f].name == name) return f;
    ADD_FAILURE() << "no field " << name;
    return size_t(0);
  };
  std::vector<uint8_t> scratch;
  for (size_t i = 0; i < files.size(); ++i) {
    int64_t id;
    std::memcpy(&id, v.FixedValue(field("image_id"), i), 8);
    EXPECT_EQ(id, int64_t(100 + i));
    const auto ref = v.VarValue(field("boxes"), i);
    ASSERT_EQ(ref.size, want_boxes[i].size() * 4) << i;
    std::vector<float> got(want_boxes[i].size());
    if (ref.size) std::memcpy(got.data(), v.source().Read(ref.offset, ref.size, &scratch), ref.size);
    EXPECT_EQ(got, want_boxes[i]) << i;
    EXPECT_EQ(v.VarValue(field("category_id"), i).size, (i % 3) * 4);
    // The image is the photo: pass-through JPEG, decoded to the same size.
    EXPECT_GT(ds.entry(i).width, 0);
  }
  // A missing image names itself; nothing is written.
  std::string bad = json;
  bad.replace(bad.find(".JPEG"), 5, ".nope");
  test::WriteFile(dir + "/bad.json", bad.data(), bad.size());
  try {
    BuildCoco(dir + "/bad.json", dir + "/bad.beton", o);
    ADD_FAILURE() << "built with a missing image";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(".nope"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--skip-invalid"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad.beton"));
  std::string out;
  EXPECT_EQ(test::RunDsc("build " + dir + "/instances.json " + dir + "/cli.beton --quiet", &out), 2);
  EXPECT_NE(out.find("needs --images DIR"), std::string::npos) << out;
  EXPECT_EQ(test::RunDsc("build " + dir + "/instances.json " + dir + "/cli.beton --quiet --images " + photos, &out), 0) << out;
  EXPECT_TRUE(test::ReadFile(dir + "/cli.beton") == test::ReadFile(dir + "/coco.beton"));
}

}  // namespace
}  // namespace dsc::writer
