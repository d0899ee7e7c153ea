// FFCV's .beton files (docs/ffcv-format.md): files written by FFCV's own writer checked against what
// FFCV decoded for them, files laid out by NumPy from the doc (tests/ffcv/ffcv_ref.py), and hostile
// edits of both.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "format/bytes.h"
#include "format/error.h"
#include "format/ffcv.h"
#include "format/file_view.h"
#include "reader/dataset.h"
#include "reader/decode_rgb.h"
#include "reader/loader.h"
#include "reader/order.h"
#include "writer/build.h"
#include "tests/ffcv_samples.h"
#include "tests/test_util.h"

namespace dsc::test {
namespace {

namespace fs = std::filesystem;
using format::MemorySource;
namespace ffcv = format::ffcv;

// (Samples, ReadArray, ErrorOf: tests/ffcv_samples.h)

TEST(Ffcv, CifarFileDecodesToFfcvsPixelsWithFastIdct) {
  ASSERT_FALSE(Samples().empty());
  const std::string ref = Samples() + "/cifar-ref/";
  Dataset ds(Samples() + "/ffcv-samples/cifar-test-smart.beton");
  ASSERT_NE(ds.view().ffcv(), nullptr);
  const auto images = ReadArray<uint8_t>(ref + "images.bin");
  const auto labels = ReadArray<int64_t>(ref + "labels.bin");
  const auto modes = ReadArray<uint8_t>(ref + "image_mode.bin");
  const auto sizes = ReadArray<uint64_t>(ref + "image_data_size.bin");
  const auto ptrs = ReadArray<uint64_t>(ref + "image_data_ptr.bin");
  ASSERT_EQ(ds.size(), 2000u);
  ASSERT_EQ(labels.size(), 2000u);
  EXPECT_EQ(ds.meta().fields[0].name, "image");
  EXPECT_EQ(ds.meta().fields[1].name, "label");
  SampleDecoder fast(ds, {.fast_idct = true});
  SampleDecoder accurate(ds, {.fancy_upsampling = true});
  std::vector<uint8_t> rgb;
  int jpeg = 0, raw = 0, jpeg_differs_accurate = 0;
  for (uint64_t i = 0; i < ds.size(); ++i) {
    const auto e = ds.entry(i);
    EXPECT_EQ(e.label[0], labels[i]) << i;
    EXPECT_EQ(e.offset, ptrs[i]) << i;
    EXPECT_EQ(e.size, sizes[i]) << i;
    EXPECT_EQ(e.encoding, modes[i] == 0 ? uint8_t(format::Encoding::kJpeg) : uint8_t(format::Encoding::kRaw)) << i;
    fast.Decode(i, &rgb);
    ASSERT_EQ(rgb.size(), 32u * 32 * 3);
    EXPECT_EQ(std::memcmp(rgb.data(), images.data() + i * 3072, 3072), 0) << "sample " << i;
    (modes[i] == 0 ? jpeg : raw)++;
    if (modes[i] == 0) {
      accurate.Decode(i, &rgb);
      jpeg_differs_accurate += std::memcmp(rgb.data(), images.data() + i * 3072, 3072) != 0;
    }
  }
  EXPECT_EQ(jpeg, 998);
  EXPECT_EQ(raw, 1002);
  // The option matters: the accurate IDCT gives other pixels on most JPEGs.
  EXPECT_GT(jpeg_differs_accurate, 500);
}

LoaderOptions PlainUint8(Order order) {
  LoaderOptions o = LoaderOptions::CifarTest();
  o.dtype = DType::kUint8;
  o.layout = Layout::kNHWC;
  o.augment.normalize = false;
  o.order = order;
  o.batch_size = 100;
  o.threads = 2;
  o.fast_idct = true;
  return o;
}

// The loader over the FFCV file, in every order, hands out FFCV's pixels and labels, each sample once.
TEST(Ffcv, LoaderReadsTheFfcvFileWithFfcvsPixels) {
  ASSERT_FALSE(Samples().empty());
  const std::string ref = Samples() + "/cifar-ref/";
  const auto images = ReadArray<uint8_t>(ref + "images.bin");
  const auto labels = ReadArray<int64_t>(ref + "labels.bin");
  for (Order order : {Order::kSequential, Order::kRandom, Order::kQuasiRandom}) {
    Loader l(Samples() + "/ffcv-samples/cifar-test-smart.beton", PlainUint8(order));
    std::vector<int> seen(2000, 0);
    for (const Batch& b : l.epoch(1)) {
      for (uint32_t j = 0; j < b.size; ++j) {
        const uint32_t i = b.indices[j];
        ASSERT_LT(i, 2000u);
        ++seen[i];
        ASSERT_EQ(std::memcmp(b.images_as<uint8_t>() + j * b.image_bytes(), images.data() + i * 3072, 3072), 0) << "sample " << i;
        ASSERT_EQ(b.labels[0][j], labels[i]);
      }
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 2000);
  }
}

// The default decode (box upsampling, accurate IDCT) groups JPEGs whose inline headers are equal
// (kernels' DecodePlanesGroup): the same pixels as libjpeg-turbo's own decode of each (FASTUPSAMPLE).
TEST(Ffcv, GroupedDecodeOfInlineHeadersEqualsLibjpegTurbo) {
  ASSERT_FALSE(Samples().empty());
  const std::string path = Samples() + "/ffcv-samples/cifar-test-smart.beton";
  LoaderOptions o = PlainUint8(Order::kRandom);
  o.fast_idct = false;
  Loader l(path, o);
  Dataset ds(path);
  std::vector<uint8_t> scratch;
  uint64_t jpegs = 0;
  for (const Batch& b : l.epoch(0)) {
    for (uint32_t j = 0; j < b.size; ++j) {
      const uint32_t i = b.indices[j];
      const Payload p = ds.ReadPayload(i, &scratch);
      std::vector<uint8_t> want(p.data, p.data + p.size);
      if (ds.entry(i).encoding == uint8_t(format::Encoding::kJpeg)) {
        want = ReferenceDecode(want, nullptr, nullptr, TJFLAG_FASTUPSAMPLE);
        ++jpegs;
      }
      ASSERT_EQ(std::memcmp(b.images_as<uint8_t>() + j * b.image_bytes(), want.data(), 3072), 0) << "sample " << i;
    }
  }
  EXPECT_EQ(jpegs, 998u);
}

// dsc convert: the same samples in the same order, JPEGs passed through (restart markers added
// losslessly), raw kept raw: the dsc file decodes to exactly FFCV's pixels.
TEST(Ffcv, ConvertedFileDecodesToFfcvsPixels) {
  ASSERT_FALSE(Samples().empty());
  const std::string ref = Samples() + "/cifar-ref/";
  const auto images = ReadArray<uint8_t>(ref + "images.bin");
  const auto labels = ReadArray<int64_t>(ref + "labels.bin");
  const std::string dir = ScratchDir();
  const std::string out = dir + "/converted.beton";
  writer::BuildOptions o;
  o.format = "ffcv";
  o.threads = 2;
  const auto rep = writer::Build(Samples() + "/ffcv-samples/cifar-test-smart.beton", out, o);
  EXPECT_EQ(rep.samples, 2000u);
  EXPECT_EQ(rep.encodings.at("jpeg"), 998u);
  EXPECT_EQ(rep.encodings.at("raw"), 1002u);
  Dataset ds(out, {.verify = true});
  EXPECT_EQ(ds.view().ffcv(), nullptr);
  SampleDecoder dec(ds, {.fast_idct = true});
  std::vector<uint8_t> rgb;
  for (uint64_t i = 0; i < 2000; ++i) {
    dec.Decode(i, &rgb);
    ASSERT_EQ(std::memcmp(rgb.data(), images.data() + i * 3072, 3072), 0) << "sample " << i;
    ASSERT_EQ(ds.label(i), labels[i]);
  }
  // An image and IntFields only: a format 1.0 file, as before typed fields, the same for any thread count.
  EXPECT_FALSE(ds.view().typed());
  EXPECT_EQ(ds.meta().fields.size(), 2u);
  EXPECT_EQ(ds.meta().fields[1].name, "label");
  o.threads = 3;
  writer::Build(Samples() + "/ffcv-samples/cifar-test-smart.beton", dir + "/converted3.beton", o);
  EXPECT_EQ(ReadFile(dir + "/converted3.beton"), ReadFile(out));
}

// What FFCV returned for allfields.beton (allfields.npz): the dsc fields its fields map to, and each
// value's bytes as dsc holds them.
struct AllFieldsRef {
  struct Want {
    const char* name;
    format::FieldType type;
    format::DType dtype;
    std::vector<uint32_t> dims;
  };
  // 'label' holds INT64_MIN and INT64_MAX: an int64 scalar, not a label.
  const std::vector<Want> fields = {{"image", format::FieldType::kImage, format::DType::kNone, {}},
                                    {"label", format::FieldType::kScalar, format::DType::kInt64, {}},
                                    {"score", format::FieldType::kScalar, format::DType::kFloat64, {}},
                                    {"emb", format::FieldType::kArray, format::DType::kFloat32, {16}},
                                    {"mask", format::FieldType::kArray, format::DType::kUInt8, {8, 8}},
                                    {"meta", format::FieldType::kText, format::DType::kNone, {}},
                                    {"blob", format::FieldType::kBytes, format::DType::kNone, {}}};
  const std::string dir = Samples() + "/all-ref/";
  const std::vector<uint8_t> label = ReadFile(dir + "label.bin"), score = ReadFile(dir + "score.bin");
  const std::vector<uint8_t> emb = ReadFile(dir + "emb.bin"), mask = ReadFile(dir + "mask.bin");
  const std::vector<uint8_t> text = ReadFile(dir + "meta_utf8.bin");  // FFCV's JSONField.unpack text, as UTF-8
  const std::vector<uint64_t> text_at = ReadArray<uint64_t>(dir + "meta_utf8_offsets.bin");
  const std::vector<uint8_t> blob = ReadFile(dir + "blob_data.bin");
  const std::vector<uint64_t> blob_at = ReadArray<uint64_t>(dir + "blob_offsets.bin");

  void ExpectSchema(const std::vector<format::Field>& f) const {
    ASSERT_EQ(f.size(), fields.size());
    for (size_t k = 0; k < f.size(); ++k) {
      EXPECT_EQ(f[k].name, fields[k].name);
      EXPECT_EQ(f[k].type, fields[k].type) << k;
      EXPECT_EQ(f[k].dtype, fields[k].dtype) << k;
      EXPECT_EQ(f[k].dims, fields[k].dims) << k;
    }
  }
  // Sample i's value of field k (1 'label' .. 6 'blob').
  std::vector<uint8_t> Value(size_t k, uint64_t i) const {
    auto slice = [](const std::vector<uint8_t>& b, uint64_t from, uint64_t to) {
      return std::vector<uint8_t>(b.begin() + long(from), b.begin() + long(to));
    };
    switch (k) {
      case 1: return slice(label, i * 8, i * 8 + 8);
      case 2: return slice(score, i * 8, i * 8 + 8);  // bits: denormals, extremes
      case 3: return slice(emb, i * 64, i * 64 + 64);
      case 4: return slice(mask, i * 64, i * 64 + 64);
      case 5: return slice(text, text_at[i], text_at[i + 1]);
      default: return slice(blob, blob_at[i], blob_at[i + 1]);
    }
  }
};

// FFCV's allfields.beton converted: every field a typed field under FFCV's name, every value what FFCV
// returned (allfields.npz), and the file the same for any thread count.
TEST(Ffcv, ConvertedAllFieldsHoldFfcvsValues) {
  ASSERT_FALSE(Samples().empty());
  const AllFieldsRef want;
  const std::string dir = ScratchDir();
  writer::BuildOptions o;
  o.format = "ffcv";
  o.threads = 1;
  const auto rep = writer::Build(Samples() + "/ffcv-samples/allfields.beton", dir + "/a1.beton", o);
  EXPECT_EQ(rep.samples, 300u);
  o.threads = 3;
  writer::Build(Samples() + "/ffcv-samples/allfields.beton", dir + "/a3.beton", o);
  const std::vector<uint8_t> file = ReadFile(dir + "/a1.beton");
  EXPECT_EQ(ReadFile(dir + "/a3.beton"), file);

  Dataset ds(dir + "/a1.beton", {.verify = true});
  const format::FileView& v = ds.view();
  ASSERT_TRUE(v.typed());
  want.ExpectSchema(ds.meta().fields);
  SampleDecoder dec(ds, {.fast_idct = true});
  std::vector<uint8_t> rgb;
  ASSERT_EQ(ds.size(), 300u);
  for (uint64_t i = 0; i < 300; ++i) {
    for (size_t k = 1; k < 5; ++k)
      EXPECT_EQ(std::vector<uint8_t>(v.FixedValue(k, i), v.FixedValue(k, i) + v.layout().width[k]), want.Value(k, i)) << k << " " << i;
    for (size_t k = 5; k < 7; ++k) {
      const auto r = v.VarValue(k, i);
      EXPECT_EQ(std::vector<uint8_t>(file.begin() + long(r.offset), file.begin() + long(r.offset + r.size)), want.Value(k, i)) << k << " " << i;
    }
    dec.Decode(i, &rgb);
    char key[32];
    std::snprintf(key, sizeof key, "image_%05llu.bin", (unsigned long long)i);
    EXPECT_EQ(rgb, ReadFile(want.dir + key)) << "sample " << i;  // also 4, 34, 52, where FFCV's Loader is wrong
  }
}

// FFCV's allfields.beton read as it is, no conversion: the loader's batches carry every FFCV field as
// the dsc field `dsc convert` writes for it (names, types, dtypes, shapes) and each value is what FFCV
// returned (allfields.npz), bit for bit, in any order and for any thread count; `dsc export` writes them.
TEST(Ffcv, LoaderGivesEveryFfcvFieldDirectly) {
  ASSERT_FALSE(Samples().empty());
  const AllFieldsRef want;
  const std::string path = Samples() + "/ffcv-samples/allfields.beton";
  {
    Dataset ds(path);
    ASSERT_NE(ds.view().ffcv(), nullptr);
    ASSERT_TRUE(ds.view().typed());
    want.ExpectSchema(ds.meta().fields);
  }
  for (int threads : {1, 3}) {
    LoaderOptions o = PlainUint8(Order::kRandom);
    o.threads = threads;
    o.batch_size = 64;
    o.augment.crop = kernels::CropMode::kCenter;  // the images are of several sizes
    o.augment.out_w = o.augment.out_h = 20;
    Loader l(path, o);
    std::vector<int> seen(300, 0);
    for (const Batch& b : l.epoch(2)) {
      ASSERT_EQ(b.field_count, want.fields.size() - 1);  // every field but the image, by default
      for (size_t k = 0; k < b.field_count; ++k) {
        EXPECT_STREQ(b.fields[k].name, want.fields[k + 1].name);
        EXPECT_EQ(format::FieldType(b.fields[k].type), want.fields[k + 1].type);
      }
      for (uint32_t j = 0; j < b.size; ++j) {
        const uint32_t i = b.indices[j];
        ASSERT_LT(i, 300u);
        if (b.padding[j]) continue;
        ++seen[i];
        for (size_t k = 0; k < b.field_count; ++k) {
          const FieldColumn& c = b.fields[k];
          const uint64_t from = c.offsets ? c.offsets[j] : j * c.elem_bytes, to = c.offsets ? c.offsets[j + 1] : from + c.elem_bytes;
          EXPECT_EQ(std::vector<uint8_t>(c.data + from, c.data + to), want.Value(k + 1, i)) << c.name << " sample " << i;
        }
      }
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 300) << threads << " threads";
  }
  // dsc export writes them to fields.jsonl, exactly as for the converted file.
  const std::string dir = ScratchDir();
  std::string out;
  ASSERT_EQ(RunDsc("export " + path + " --count 300 --ppm --out " + dir + "/x", &out), 0) << out;
  ASSERT_EQ(RunDsc("convert " + path + " " + dir + "/c.beton --quiet", &out), 0) << out;
  ASSERT_EQ(RunDsc("export " + dir + "/c.beton --count 300 --ppm --out " + dir + "/y", &out), 0) << out;
  const auto jsonl = ReadFile(dir + "/x/fields.jsonl");
  EXPECT_EQ(jsonl, ReadFile(dir + "/y/fields.jsonl"));
  const std::string text(jsonl.begin(), jsonl.end());
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 300);
  for (const char* key : {"\"label\":", "\"score\":", "\"emb\":[", "\"mask\":[[", "\"meta\":", "\"blob\":"})
    EXPECT_NE(text.find(key), std::string::npos) << key;
}

// A NumPy-written file (docs/ffcv-format.md) converted, and read as it is: TorchTensorField, mixed
// JPEG/raw images, interleaved pages; a label IntField with negative values stays an int64 scalar
// (dsc's labels are 0 .. 2^31 - 1), the other becomes the label.
TEST(Ffcv, ConvertedNumpyFileKeepsEveryField) {
  const std::string dir = ScratchDir();
  const std::string path = dir + "/syn.beton";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + kRef + " write " + path + " 8192 4").c_str()), 0);
  writer::BuildOptions o;
  o.format = "ffcv";
  o.threads = 2;
  writer::Build(path, dir + "/c.beton", o);
  const std::vector<uint8_t> file = ReadFile(dir + "/c.beton");
  Dataset ds(dir + "/c.beton", {.verify = true});
  Dataset src(path);
  const format::FileView& v = ds.view();
  const auto& f = ds.meta().fields;
  ASSERT_EQ(f.size(), 8u);
  const char* names[] = {"image", "label2", "label", "score", "emb", "mask", "meta", "blob"};
  for (size_t k = 0; k < 8; ++k) EXPECT_EQ(f[k].name, names[k]);
  EXPECT_EQ(f[1].type, format::FieldType::kLabel);
  EXPECT_EQ(f[2].dtype, format::DType::kInt64);
  EXPECT_EQ(f[5].dtype, format::DType::kUInt8);  // the TorchTensorField
  EXPECT_EQ(f[5].dims, std::vector<uint32_t>({3, 4}));
  const auto label = ReadArray<int64_t>(path + ".label.bin"), label2 = ReadArray<int64_t>(path + ".label2.bin");
  const auto score = ReadArray<double>(path + ".score.bin");
  ASSERT_EQ(ds.size(), label.size());
  SampleDecoder dec(ds, {.fancy_upsampling = true}), ref(src, {.fancy_upsampling = true});
  std::vector<uint8_t> a, b;
  for (uint64_t i = 0; i < ds.size(); ++i) {
    EXPECT_EQ(ds.label(i), label2[i]);
    EXPECT_EQ(std::memcmp(v.FixedValue(2, i), &label[i], 8), 0) << i;
    EXPECT_EQ(std::memcmp(v.FixedValue(3, i), &score[i], 8), 0) << i;
    dec.Decode(i, &a);
    ref.Decode(i, &b);  // the FFCV file read as it is (checked against PIL above)
    EXPECT_EQ(a, b) << "sample " << i;
  }
  // The converted file, and the FFCV file read as it is (the same schema: one mapping for both).
  const std::vector<uint8_t> ffcv_file = ReadFile(path);
  ASSERT_EQ(src.meta().fields.size(), f.size());
  for (size_t k = 0; k < 8; ++k) {
    EXPECT_EQ(src.meta().fields[k].name, names[k]);
    EXPECT_EQ(src.meta().fields[k].type, f[k].type) << k;
    EXPECT_EQ(src.meta().fields[k].dtype, f[k].dtype) << k;
    EXPECT_EQ(src.meta().fields[k].dims, f[k].dims) << k;
  }
  for (const auto& [view, bytes_of] : {std::pair{&v, &file}, std::pair{&src.view(), &ffcv_file}}) {
    SCOPED_TRACE(view->ffcv() ? "FFCV file" : "converted file");
    std::vector<uint8_t> scratch;
    for (uint64_t i = 0; i < ds.size(); ++i) {
      EXPECT_EQ(view->meta().label_field_count(), 1u);
      EXPECT_EQ(std::memcmp(view->FixedValue(2, i, &scratch), &label[i], 8), 0) << i;
      EXPECT_EQ(std::memcmp(view->FixedValue(3, i, &scratch), &score[i], 8), 0) << i;
    }
    for (size_t k = 4; k < 8; ++k) {
      const auto bytes = ReadFile(path + "." + names[k] + ".bin");
      const auto ends = ReadArray<uint64_t>(path + "." + names[k] + "_ends.bin");
      for (uint64_t i = 0; i < ds.size(); ++i) {
        const std::vector<uint8_t> want(bytes.begin() + long(ends[i]), bytes.begin() + long(ends[i + 1]));
        std::vector<uint8_t> got;
        if (k < 6) {
          const uint8_t* p = view->FixedValue(k, i, &scratch);
          got.assign(p, p + view->layout().width[k]);
        } else {
          const auto r = view->VarValue(k, i);
          got.assign(bytes_of->begin() + long(r.offset), bytes_of->begin() + long(r.offset + r.size));
        }
        EXPECT_EQ(got, want) << names[k] << " sample " << i;
      }
    }
  }
}

// A second RGBImageField is a further image (format 1.3): read in place with PIL's pixels, converted
// to a 1.3 file that decodes the same, and loaded by name (LoaderOptions::image) from either file
// with the same batches.
TEST(Ffcv, SecondImageFieldIsAFurtherImage) {
  const std::string dir = ScratchDir();
  const std::string path = dir + "/two.beton";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + kRef + " write " + path + " 8192 3 2").c_str()), 0);
  const auto pixels = ReadFile(path + ".thumb_pixels.bin");
  const auto dims = ReadArray<uint32_t>(path + ".thumb_dims.bin");
  writer::BuildOptions bo;
  bo.format = "ffcv";
  bo.threads = 2;
  writer::Build(path, dir + "/c.beton", bo);
  Dataset src(path), conv(dir + "/c.beton", {.verify = true});
  for (const std::string& f : {path, dir + "/c.beton"}) {
    const std::vector<uint8_t> bytes = ReadFile(f);
    MemorySource ms(f, bytes.data(), bytes.size());
    EXPECT_TRUE(format::VerifyFile(ms).empty()) << f;
  }
  for (const Dataset* ds : {&src, &conv}) {
    SCOPED_TRACE(ds->view().ffcv() ? "FFCV file" : "converted file");
    const uint32_t thumb = ds->ImageField("thumb");
    ASSERT_GT(thumb, 0u);
    EXPECT_EQ(ds->meta().fields[thumb].type, format::FieldType::kImage);
    EXPECT_TRUE(ds->meta().further_images());
    SampleDecoder dec(*ds, {.fancy_upsampling = true});  // PIL's decode: accurate IDCT, fancy upsampling
    std::vector<uint8_t> rgb;
    size_t at = 0, jpegs = 0;
    for (uint64_t i = 0; i < ds->size(); ++i) {
      const format::IndexEntry e = ds->entry(i, thumb);
      ASSERT_EQ(e.height, dims[2 * i]);
      ASSERT_EQ(e.width, dims[2 * i + 1]);
      jpegs += e.encoding == uint8_t(format::Encoding::kJpeg);
      dec.Decode(i, &rgb, thumb);
      const size_t n = size_t(dims[2 * i]) * dims[2 * i + 1] * 3;
      ASSERT_EQ(rgb.size(), n) << i;
      EXPECT_EQ(std::memcmp(rgb.data(), pixels.data() + at, n), 0) << "sample " << i;
      at += n;
    }
    EXPECT_GT(jpegs, 0u);
    EXPECT_LT(jpegs, ds->size());
  }
  LoaderOptions o = PlainUint8(Order::kRandom);
  o.fast_idct = false;
  o.image = "thumb";
  o.augment.crop = kernels::CropMode::kCenter;
  o.augment.resize = 8;
  o.augment.out_w = o.augment.out_h = 8;
  o.batch_size = 8;
  Loader a(path, o), b(dir + "/c.beton", o);
  auto ra = a.epoch(1), rb = b.epoch(1);
  size_t batches = 0;
  for (auto ia = ra.begin(), ib = rb.begin(); ia != ra.end() && ib != rb.end(); ++ia, ++ib, ++batches) {
    ASSERT_EQ(std::memcmp(ia->indices, ib->indices, ia->size * 4), 0);
    ASSERT_EQ(std::memcmp(ia->images, ib->images, ia->image_bytes() * ia->size), 0) << "batch " << batches;
  }
  EXPECT_EQ(batches, a.batches_per_epoch());
}

// What dsc cannot store, or cannot read, is refused naming the FFCV file, sample and field: by
// convert, writing nothing, and by the loader, which checks FFCV's values as it reads them. A field
// dsc has no type for is left out by the loader (and `dsc info` says so) where convert refuses the file.
TEST(Ffcv, ConvertAndLoaderRefuseWhatDscCannotStore) {
  ASSERT_FALSE(Samples().empty());
  const std::vector<uint8_t> good = ReadFile(Samples() + "/ffcv-samples/allfields.beton");
  const std::string dir = ScratchDir();
  MemorySource gsrc("allfields.beton", good.data(), good.size());
  const auto g = ffcv::File::Open(&gsrc);
  const ffcv::Span json = g->span(7, 5);  // sample 7's JSON value
  struct Case {
    const char* what;
    std::function<void(std::vector<uint8_t>*)> edit;
    const char* convert;
    const char* loader;  // nullptr: the loader reads the file
  };
  const Case cases[] = {
      {"big-endian array", [](auto* b) {
         uint8_t* args = b->data() + 24 + 3 * 1041 + 17;  // field 3 'emb': its dtype text after shape and length
         auto* at = std::search(args + 264, args + 1024, "<f4", "<f4" + 3);
         ASSERT_NE(at, args + 1024);
         *at = '>';
       }, "FFCV field 'emb' (NDArrayField): dsc has no element type for NumPy's >f4", nullptr},
      {"custom field", [](auto* b) { (*b)[24 + 6 * 1041] = 255; }, "field 6 'blob' is a custom field (type 255)",
       "field 6 'blob' is a custom field (type 255)"},
      {"JSON without NUL", [&](auto* b) { (*b)[json.ptr + json.size - 1] = ' '; },
       "sample 7: field 'meta' (JSONField): JSON value of", "sample 7: field 'meta': JSON value of"},
      {"JSON with a NUL inside", [&](auto* b) { (*b)[json.ptr + 1] = 0; },
       "sample 7: field 'meta' (JSONField): JSON value with a NUL at byte 1", "sample 7: field 'meta': JSON value with a NUL at byte 1"},
      {"JSON not UTF-8", [&](auto* b) { (*b)[json.ptr + 2] = 0xff; },
       "sample 7: field 'meta' (JSONField): not UTF-8", "sample 7: field 'meta': not UTF-8"},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> b = good;
    c.edit(&b);
    WriteFile(dir + "/bad.beton", b);
    writer::BuildOptions o;
    o.format = "ffcv";
    std::string err = ErrorOf([&] { writer::Build(dir + "/bad.beton", dir + "/out.beton", o); });
    EXPECT_NE(err.find(dir + "/bad.beton"), std::string::npos) << c.what << ": " << err;
    EXPECT_NE(err.find(c.convert), std::string::npos) << c.what << ": " << err;
    EXPECT_FALSE(fs::exists(dir + "/out.beton")) << c.what;
    LoaderOptions lo = PlainUint8(Order::kSequential);
    lo.augment.crop = kernels::CropMode::kCenter;  // the images are of several sizes
    lo.augment.out_w = lo.augment.out_h = 20;
    err = ErrorOf([&] {
      Loader l(dir + "/bad.beton", lo);
      for (const Batch& batch : l.epoch(0)) (void)batch;
    });
    if (!c.loader) {
      EXPECT_EQ(err, "") << c.what;
      WriteFile(dir + "/left-out.beton", b);
      continue;
    }
    EXPECT_NE(err.find(dir + "/bad.beton"), std::string::npos) << c.what << ": " << err;
    EXPECT_NE(err.find(c.loader), std::string::npos) << c.what << ": " << err;
  }
  // The big-endian array: the loader leaves 'emb' out and gives the rest; dsc info says so.
  Dataset ds(dir + "/left-out.beton");
  std::vector<std::string> names;
  for (const auto& f : ds.meta().fields) names.push_back(f.name);
  EXPECT_EQ(names, std::vector<std::string>({"image", "label", "score", "mask", "meta", "blob"}));
  std::string out;
  ASSERT_EQ(RunDsc("info " + dir + "/left-out.beton", &out), 0) << out;
  EXPECT_NE(out.find("left out: 'emb' (NDArrayField): dsc has no element type for NumPy's >f4"), std::string::npos) << out;
}

}  // namespace
}  // namespace dsc::test
