// Several images per sample (format 1.3, further images): dsc::Writer stores each image field with
// its own size and encoding; a loader decodes the one named by `image`, pixel for pixel what
// libjpeg-turbo decodes from the bytes given (or the raw pixels given); loaders that differ only in
// `image` draw the same crops and flips; bad options and damaged descriptors are refused naming the
// field and sample; a sharded table build merges into the one-machine file byte for byte.
#include <gtest/gtest.h>

#include <turbojpeg.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "format/error.h"
#include "format/fields.h"
#include "format/file_view.h"
#include "kernels/augment.h"
#include "kernels/png_codec.h"
#include "reader/dataset.h"
#include "reader/digest.h"
#include "reader/loader.h"
#include "tests/fuzz/fixup_checksums.h"
#include "tests/test_util.h"
#include "writer/build.h"
#include "writer/writer.h"

namespace dsc::test {
namespace {

using format::DType;

// One sample as the test made it: the references the loader is compared with.
struct Values {
  std::vector<uint8_t> image, depth;  // JPEG files' bytes
  std::vector<uint8_t> thumb;         // 16 x 8 RGB pixels
  int32_t label = 0;
  std::string caption;
};

constexpr int kThumbW = 16, kThumbH = 8;

std::vector<Values> MakeValues(size_t n) {
  const auto files = CifarTestJpegs(2 * n);
  std::mt19937 rng(11);
  std::vector<Values> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i].image = ReadFile(files[i]);
    out[i].depth = ReadFile(files[n + i]);
    out[i].thumb.resize(size_t(kThumbW) * kThumbH * 3);
    for (auto& b : out[i].thumb) b = uint8_t(rng());
    out[i].label = int32_t(i % 3);
    out[i].caption = "sample " + std::to_string(i);
  }
  return out;
}

Schema TestSchema() {
  return {ImageField("image"), LabelField("label"), ImageField("depth"), TextField("caption"), ImageField("thumb"),
          VarArrayField("boxes", DType::kFloat32, {4})};
}

std::string Write(const std::string& path, const std::vector<Values>& vals, int threads) {
  WriterOptions o;
  o.threads = threads;
  o.block_size = 8192;
  Writer w(path, TestSchema(), o);
  for (const auto& v : vals) {
    Sample s;
    s.SetImage("image", v.image);
    s.SetLabel("label", v.label);
    s.SetImage("depth", v.depth);
    s.SetText("caption", v.caption);
    s.SetPixels("thumb", v.thumb, kThumbW, kThumbH);
    const float box[4] = {1, 2, 3, 4};
    s.SetArray<float>("boxes", box, 4);
    w.Add(std::move(s));
  }
  w.Close();
  return path;
}

LoaderOptions Plain(const std::string& image) {
  LoaderOptions o;
  o.order = Order::kSequential;
  o.batch_size = 8;
  o.threads = 2;
  o.dtype = dsc::DType::kUint8;
  o.layout = Layout::kNHWC;
  o.image = image;
  return o;
}

TEST(FurtherImages, EachImageFieldDecodesAsItsOwnBytes) {
  const auto vals = MakeValues(40);
  const std::string dir = ScratchDir("-images");
  const std::string path = Write(dir + "/f.beton", vals, 2);
  {
    Dataset ds(path);
    EXPECT_EQ(ds.view().header().version_minor, 3);
    EXPECT_EQ(ds.view().header().incompat_flags, format::kTypedFieldsFlag | format::kFurtherImagesFlag);
  }
  struct Case {
    std::string image;
    int w, h;
  };
  for (const Case& c : {Case{"", 32, 32}, Case{"image", 32, 32}, Case{"depth", 32, 32}, Case{"thumb", kThumbW, kThumbH}}) {
    Loader l(path, Plain(c.image));
    size_t seen = 0;
    for (const Batch& b : l.epoch(0)) {
      ASSERT_EQ(b.field_count, 2u) << "images are not typed fields";
      EXPECT_STREQ(b.fields[0].name, "caption");
      for (uint32_t j = 0; j < b.size; ++j, ++seen) {
        const Values& x = vals[seen];
        std::vector<uint8_t> want;
        if (c.image == "thumb") {
          want = x.thumb;
        } else {
          int w = 0, h = 0;
          want = ReferenceDecode(c.image == "depth" ? x.depth : x.image, &w, &h, TJFLAG_FASTUPSAMPLE);
          ASSERT_EQ(w, c.w);
          ASSERT_EQ(h, c.h);
        }
        const size_t n = size_t(c.w) * c.h * 3;
        ASSERT_EQ(std::vector<uint8_t>(b.images_as<uint8_t>() + j * n, b.images_as<uint8_t>() + (j + 1) * n), want)
            << "image '" << c.image << "' sample " << seen;
        EXPECT_EQ(b.labels[0][j], x.label);
        const FieldColumn& cap = b.fields[0];
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(cap.data) + cap.offsets[j], cap.offsets[j + 1] - cap.offsets[j]), x.caption);
      }
    }
    EXPECT_EQ(seen, vals.size());
  }
  // The file does not depend on the writer's thread count.
  EXPECT_EQ(ReadFile(path), ReadFile(Write(dir + "/g.beton", vals, 1)));
  RemoveScratch(dir);
}

// Two loaders that differ only in `image` draw the same crops and flips: with the same bytes in both
// fields their batches are identical, and another view's are not; the batches of a further image are
// the same for any thread count.
TEST(FurtherImages, LoadersOfTwoImageFieldsDrawTheSameCrops) {
  auto vals = MakeValues(24);
  for (auto& v : vals) v.depth = v.image;
  const std::string dir = ScratchDir("-images-crops");
  const std::string path = Write(dir + "/f.beton", vals, 2);
  auto digest = [&](const std::string& image, uint32_t view, int threads) {
    LoaderOptions o = Plain(image);
    o.order = Order::kRandom;
    o.seed = 5;
    o.view = view;
    o.threads = threads;
    o.augment.crop = kernels::CropMode::kRandomResized;
    o.augment.out_w = o.augment.out_h = 24;
    o.augment.flip = true;
    Loader l(path, o);
    BatchDigest d;
    for (const Batch& b : l.epoch(2)) d.Add(b);
    return d.Hex();
  };
  const std::string first = digest("image", 0, 2);
  EXPECT_EQ(digest("depth", 0, 2), first);
  EXPECT_NE(digest("depth", 1, 2), first);
  EXPECT_EQ(digest("thumb", 0, 1), digest("thumb", 0, 3));
  RemoveScratch(dir);
}

TEST(FurtherImages, OptionsThatCannotHoldAreRefusedNamingTheField) {
  const auto vals = MakeValues(10);
  const std::string dir = ScratchDir("-images-options");
  const std::string path = Write(dir + "/f.beton", vals, 2);
  auto refused = [&](LoaderOptions o, const std::string& part) {
    try {
      Loader l(path, o);
      ADD_FAILURE() << "accepted; expected: " << part;
    } catch (const OptionError& e) {
      EXPECT_TRUE(Has(e.what(), part)) << e.what();
    }
  };
  refused(Plain("nope"), "no image field 'nope'; its image fields: 'image', 'depth', 'thumb'");
  LoaderOptions o = Plain("");
  o.fields = {"depth"};
  refused(o, "'depth' is an image field");
  o = Plain("depth");
  o.boxes = {"boxes"};
  refused(o, "boxes follow the first image 'image' only");
  // A further image whose size varies needs a crop, and the message names the field.
  {
    WriterOptions wo;
    wo.threads = 1;
    Writer w(dir + "/v.beton", {ImageField("image"), ImageField("side")}, wo);
    for (int i = 0; i < 3; ++i) {
      Sample s;
      s.SetImage("image", vals[size_t(i)].image);
      s.SetPixels("side", std::vector<uint8_t>(size_t(8 + i) * 4 * 3, 7), 8 + i, 4);
      w.Add(std::move(s));
    }
    w.Close();
    try {
      Loader l(dir + "/v.beton", Plain("side"));
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_TRUE(Has(e.what(), "sample 1: image 'side' is 9x4 but sample 0 is 8x4")) << e.what();
    }
    LoaderOptions c = Plain("side");
    c.augment.crop = kernels::CropMode::kRandomResized;
    c.augment.out_w = c.augment.out_h = 4;
    Loader l(dir + "/v.beton", c);
    size_t n = 0;
    for (const Batch& b : l.epoch(0)) n += b.size;
    EXPECT_EQ(n, 3u);
  }
  // The writer names the sample and field of a missing or undecodable further image.
  {
    Writer w(dir + "/bad.beton", TestSchema());
    Sample s;
    s.SetImage("image", vals[0].image);
    s.SetLabel("label", 0);
    s.SetText("caption", "x");
    s.SetPixels("thumb", vals[0].thumb, kThumbW, kThumbH);
    s.SetArray<float>("boxes", nullptr, 0);
    try {
      w.Add(s);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_TRUE(Has(e.what(), "sample 0: field 'depth': missing")) << e.what();
    }
    s.SetImage("depth", {1, 2, 3, 4});
    try {
      w.Add(std::move(s));
      w.Close();
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_TRUE(Has(e.what(), "sample 0: field 'depth'")) << e.what();
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad.beton"));
  RemoveScratch(dir);
}

// A descriptor that lies (an unknown encoding, a raw size its payload does not have) is refused at
// open and by verify, naming the field and sample, once the checksums are made right again.
TEST(FurtherImages, DamagedDescriptorsAreNamed) {
  const auto vals = MakeValues(12);
  const std::string dir = ScratchDir("-images-damage");
  const auto intact = ReadFile(Write(dir + "/f.beton", vals, 1));
  format::MemorySource isrc("f", intact.data(), intact.size());
  auto v = format::FileView::Open(&isrc);
  const auto sections = v->Extents();
  const auto cols = *std::find_if(sections.begin(), sections.end(), [](const auto& s) { return s.name == "columns"; });
  const uint8_t* base = v->FixedValue(2, 0);  // the first column starts the section
  auto damaged = [&](size_t field, uint64_t sample, size_t byte, uint8_t value) {
    auto b = intact;
    b[cols.offset + (v->FixedValue(field, sample) - base) + byte] = value;
    fuzz::FixupChecksums(b.data(), b.size());
    format::MemorySource src("f", b.data(), b.size());
    const auto problems = format::VerifyFile(src);
    EXPECT_EQ(problems.size(), 1u);
    std::string open;
    try {
      format::FileView::Open(&src);
    } catch (const Error& e) {
      open = e.what();
    }
    return std::make_pair(problems.empty() ? std::string() : format::Describe(problems[0]), open);
  };
  auto [verify, open] = damaged(2, 3, 4, 9);  // depth's encoding
  EXPECT_EQ(verify, "columns: sample 3: field 'depth': unknown image encoding 9");
  EXPECT_TRUE(Has(open, "field 'depth': unknown image encoding 9")) << open;
  std::tie(verify, open) = damaged(4, 7, 0, kThumbW + 1);  // thumb's width: its raw payload no longer fits
  EXPECT_EQ(verify, "columns: sample 7: field 'thumb': raw image payload has 384 bytes, 17x8 RGB needs 408");
  std::tie(verify, open) = damaged(4, 5, 6, 1);  // a reserved byte
  EXPECT_EQ(verify, "columns: sample 5: field 'thumb': image descriptor's reserved bytes not zero");
  RemoveScratch(dir);
}

// A JSON Lines table with two columns of image paths builds a file with a further image; built in 3
// shards and merged it is the one-machine build byte for byte; `dsc export` writes the further image
// as a PNG of the pixels libjpeg-turbo decodes; `dsc info` lists it.
TEST(FurtherImages, TableBuildShardsMergeAndExport) {
  const auto files = CifarTestJpegs(30);
  const std::string dir = ScratchDir("-images-table");
  {
    std::ofstream t(dir + "/t.jsonl");
    for (size_t i = 0; i < 15; ++i)
      t << "{\"image\": \"" << files[i] << "\", \"label\": " << i % 4 << ", \"side\": \"" << files[15 + i] << "\"}\n";
  }
  ASSERT_EQ(RunDsc("build " + dir + "/t.jsonl " + dir + "/one.beton --threads 2"), 0);
  std::string parts;
  for (int k = 0; k < 3; ++k) {
    const std::string part = dir + "/p" + std::to_string(k) + ".beton";
    ASSERT_EQ(RunDsc("build " + dir + "/t.jsonl " + part + " --shard " + std::to_string(k) + "/3"), 0);
    parts += " " + part;
  }
  ASSERT_EQ(RunDsc("merge" + parts + " " + dir + "/merged.beton"), 0);
  EXPECT_EQ(ReadFile(dir + "/one.beton"), ReadFile(dir + "/merged.beton"));
  std::string info;
  ASSERT_EQ(RunDsc("info " + dir + "/one.beton", &info), 0);
  EXPECT_TRUE(Has(info, "field 'side' (image)")) << info;
  EXPECT_TRUE(Has(info, "32x32 .. 32x32")) << info;
  std::string out;
  ASSERT_EQ(RunDsc("export " + dir + "/one.beton --out " + dir + "/x --index 4 --count 2", &out), 0) << out;
  const auto png = ReadFile(dir + "/x/00000005.2.png");
  std::vector<uint8_t> rgb;
  int w = 0, h = 0;
  std::string err;
  ASSERT_TRUE(kernels::DecodePngRGB(png.data(), png.size(), 1u << 20, &rgb, &w, &h, &err)) << err;
  EXPECT_EQ(rgb, ReferenceDecode(ReadFile(files[20]), nullptr, nullptr, TJFLAG_FASTUPSAMPLE));
  const auto jsonl = ReadFile(dir + "/x/fields.jsonl");
  EXPECT_TRUE(Has(std::string(jsonl.begin(), jsonl.end()), "\"side\":\"00000005.2.png\""));
  ASSERT_EQ(RunDsc("verify " + dir + "/one.beton --decode"), 0);
  RemoveScratch(dir);
}

// Output channels (LoaderOptions::channels): a grayscale file comes as one channel by default, its
// values those TurboJPEG decodes from the stored bytes, normalised with mean[0] and std[0]; asked for
// 3 it comes as R = G = B; a colour file asked for 1 gives torchvision's Grayscale(1) formula of what
// TurboJPEG decodes; the same batches for any thread count; refused where it cannot hold yet.
TEST(Channels, GrayStaysOneChannelAndColourTurnsGrayOnRequest) {
  const auto files = CifarTestJpegs(24);
  const std::string dir = ScratchDir("-channels");
  {
    WriterOptions wo;
    wo.encode.subsampling = "gray";
    wo.encode.reencode = true;
    wo.encode.encoding = "jpeg";
    Writer w(dir + "/gray.beton", {ImageField("image"), LabelField("label")}, wo);
    for (size_t i = 0; i < files.size(); ++i) {
      Sample s;
      s.SetImage("image", ReadFile(files[i]));
      s.SetLabel("label", int32_t(i % 2));
      w.Add(std::move(s));
    }
    w.Close();
  }
  Dataset gray(dir + "/gray.beton");
  ASSERT_EQ(gray.entry(0).channels, 1);
  auto stored = [&](uint64_t i) {  // TurboJPEG's decode of the stored bytes: R = G = B for a gray JPEG
    std::vector<uint8_t> scratch;
    const Payload p = gray.ReadPayload(i, &scratch);
    return ReferenceDecode(std::vector<uint8_t>(p.data, p.data + p.size), nullptr, nullptr, TJFLAG_FASTUPSAMPLE);
  };
  const size_t px = 32 * 32;
  {
    LoaderOptions o = Plain("");
    Loader l(dir + "/gray.beton", o);
    size_t seen = 0;
    for (const Batch& b : l.epoch(0)) {
      ASSERT_EQ(b.channels, 1u);
      for (uint32_t j = 0; j < b.size; ++j, ++seen) {
        const auto rgb = stored(seen);
        for (size_t p = 0; p < px; ++p) ASSERT_EQ(b.images_as<uint8_t>()[j * px + p], rgb[3 * p]) << seen << " " << p;
      }
    }
    EXPECT_EQ(seen, files.size());
    o.channels = 3;
    Loader l3(dir + "/gray.beton", o);
    seen = 0;
    for (const Batch& b : l3.epoch(0))
      for (uint32_t j = 0; j < b.size; ++j, ++seen)
        ASSERT_EQ(std::vector<uint8_t>(b.images_as<uint8_t>() + j * 3 * px, b.images_as<uint8_t>() + (j + 1) * 3 * px), stored(seen));
  }
  {
    LoaderOptions o = Plain("");  // float32, normalised with channel 0's mean and std
    o.dtype = dsc::DType::kFloat32;
    o.layout = Layout::kNCHW;
    o.augment.normalize = true;
    o.augment.mean[0] = 100, o.augment.std[0] = 50;
    o.augment.mean[1] = o.augment.mean[2] = 7;  // unused with one channel
    Loader l(dir + "/gray.beton", o);
    for (const Batch& b : l.epoch(0)) {
      ASSERT_EQ(b.channels, 1u);
      const auto rgb = stored(0);
      for (size_t p = 0; p < px; ++p) EXPECT_NEAR(b.images_as<float>()[p], (rgb[3 * p] - 100.f) / 50.f, 1e-5) << p;
      break;
    }
  }
  {
    // Colour CIFAR asked for one channel: torchvision's rgb_to_grayscale, (0.2989 r + 0.587 g + 0.114 b) in
    // float32, truncated to uint8, of what TurboJPEG decodes.
    Writer w(dir + "/colour.beton", {ImageField("image"), LabelField("label")});
    for (const auto& f : files) {
      Sample s;
      s.SetImage("image", ReadFile(f));
      s.SetLabel("label", 0);
      w.Add(std::move(s));
    }
    w.Close();
    LoaderOptions o = Plain("");
    o.channels = 1;
    Loader l(dir + "/colour.beton", o);
    size_t seen = 0;
    for (const Batch& b : l.epoch(0)) {
      ASSERT_EQ(b.channels, 1u);
      for (uint32_t j = 0; j < b.size; ++j, ++seen) {
        const auto rgb = ReferenceDecode(ReadFile(files[seen]), nullptr, nullptr, TJFLAG_FASTUPSAMPLE);
        for (size_t p = 0; p < px; ++p) {
          const float v = 0.2989f * float(rgb[3 * p]) + 0.587f * float(rgb[3 * p + 1]) + 0.114f * float(rgb[3 * p + 2]);
          ASSERT_EQ(b.images_as<uint8_t>()[j * px + p], uint8_t(v)) << seen << " " << p;
        }
      }
    }
    Loader auto_colour(dir + "/colour.beton", Plain(""));
    for (const Batch& b : auto_colour.epoch(0)) EXPECT_EQ(b.channels, 3u);
  }
  auto digest = [&](int threads) {
    LoaderOptions o = Plain("");
    o.channels = 1;
    o.order = Order::kRandom;
    o.seed = 2;
    o.threads = threads;
    o.augment.crop = kernels::CropMode::kRandomResized;
    o.augment.out_w = o.augment.out_h = 20;
    o.augment.flip = true;
    Loader l(dir + "/colour.beton", o);
    BatchDigest d;
    for (const Batch& b : l.epoch(1)) d.Add(b);
    return d.Hex();
  };
  EXPECT_EQ(digest(1), digest(3));
  LoaderOptions o = Plain("");
  o.channels = 1;
  o.defer_augment = true;
  EXPECT_THROW(Loader(dir + "/colour.beton", o), OptionError);
  RemoveScratch(dir);
}

LoaderOptions Uint8(LoaderOptions o) {
  o.dtype = dsc::DType::kUint8;
  o.layout = Layout::kNHWC;
  o.augment.normalize = false;
  return o;
}

// libjpeg-turbo's own decode of sample i (box chroma upsampling, dsc's default).
std::vector<uint8_t> Decoded(const Dataset& ds, uint32_t i) {
  std::vector<uint8_t> scratch;
  Payload p = ds.ReadPayload(i, &scratch);
  return ReferenceDecode(std::vector<uint8_t>(p.data, p.data + p.size), nullptr, nullptr, TJFLAG_FASTUPSAMPLE);
}

// Grayscale JPEGs (the first 4 CIFAR images of each class made gray losslessly with jpegtran's -grayscale
// equivalent) through the loader: every output pixel against TurboJPEG's own decode of the same file
// (gray replicated to R, G, B), with both upsampling modes, and the CIFAR augmentations against the naive
// reference on that decode.
std::string GrayTree() {
  namespace fs = std::filesystem;
  const std::string src = SubsetTree(4);
  const std::string root = ScratchDir("-gray") + "/tree";
  tjhandle h = tjInitTransform();
  for (const auto& cls : fs::directory_iterator(src)) {
    fs::create_directories(fs::path(root) / cls.path().filename());
    for (const auto& f : fs::directory_iterator(cls.path())) {
      auto jpg = ReadFile(f.path().string());
      unsigned char* out = nullptr;
      unsigned long len = 0;
      tjtransform xf{};
      xf.op = TJXOP_NONE;
      xf.options = TJXOPT_GRAY;
      if (tjTransform(h, jpg.data(), jpg.size(), 1, &out, &len, &xf, 0) != 0) {
        const std::string why = tjGetErrorStr2(h);
        tjDestroy(h);
        throw std::runtime_error("tjTransform " + f.path().string() + ": " + why);
      }
      WriteFile((fs::path(root) / cls.path().filename() / f.path().filename()).string(), out, len);
      tjFree(out);
    }
  }
  tjDestroy(h);
  return root;
}

TEST(Channels, GrayscaleJpegsFromATreeEqualAnIndependentDecode) {
  const std::string tree = GrayTree();
  const std::string file = ScratchDir("-graybeton") + "/gray.beton";
  writer::BuildOptions bo;
  bo.log = [](const std::string&) {};
  writer::Build(tree, file, bo);
  Dataset ds(file);
  ASSERT_EQ(ds.size(), 40u);
  int sub = -1;
  {
    int w, hh, cs;
    std::vector<uint8_t> scratch;
    Payload p = ds.ReadPayload(0, &scratch);
    tjhandle h = tjInitDecompress();
    ASSERT_EQ(tjDecompressHeader3(h, p.data, p.size, &w, &hh, &sub, &cs), 0);
    tjDestroy(h);
    ASSERT_EQ(cs, TJCS_GRAY) << "the fixture is not grayscale";
  }
  for (bool fancy : {false, true}) {
    LoaderOptions o = Uint8(LoaderOptions::CifarTest());
    o.batch_size = 8;
    o.fancy_upsampling = fancy;
    o.channels = 3;  // a gray file comes as one channel unless asked for 3 (images_test: Channels.*)
    Loader l(file, o);
    uint64_t n = 0;
    for (const Batch& b : l.epoch(0))
      for (uint32_t j = 0; j < b.size; ++j, ++n) {
        auto want = Decoded(ds, b.indices[j]);  // TurboJPEG: gray, replicated to RGB
        ASSERT_EQ(want.size(), b.image_bytes());
        ASSERT_EQ(std::memcmp(b.images_as<uint8_t>() + j * b.image_bytes(), want.data(), want.size()), 0)
            << "sample " << b.indices[j] << (fancy ? " fancy" : " box");
      }
    EXPECT_EQ(n, 40u);
  }
  // Flip + translate + cutout on gray sources, against the naive reference.
  LoaderOptions o = Uint8(LoaderOptions::CifarTrain());
  o.batch_size = 8;
  o.channels = 3;
  o.seed = 23;
  Loader l(file, o);
  for (const Batch& b : l.epoch(1))
    for (uint32_t j = 0; j < b.size; ++j) {
      const uint32_t idx = b.indices[j];
      auto src = Decoded(ds, idx);
      kernels::CropRect rect;
      kernels::SampleParams p;
      kernels::MakeParams(o.augment, 32, 32, 23, 1, idx, &rect, &p);
      const uint8_t* got = b.images_as<uint8_t>() + j * b.image_bytes();
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) {
          int sx = x - p.dx, sy = y - p.dy;
          const bool inside = sx >= 0 && sy >= 0 && sx < 32 && sy < 32;
          if (p.flip) sx = 31 - sx;
          const bool cut = x >= p.cut_x && x < p.cut_x + 4 && y >= p.cut_y && y < p.cut_y + 4;
          for (int c = 0; c < 3; ++c) {
            const uint8_t want = (inside && !cut) ? src[(size_t(sy) * 32 + sx) * 3 + c] : o.augment.fill[c];
            ASSERT_EQ(got[(y * 32 + x) * 3 + c], want) << "sample " << idx << " " << x << "," << y;
          }
        }
    }
}

}  // namespace
}  // namespace dsc::test
