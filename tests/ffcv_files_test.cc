// FFCV's .beton files, continued from tests/ffcv_test.cc: FFCV's field descriptors as its writer
// made them, NumPy-written files of several page sizes, the command line, and hostile edits.
#include <gtest/gtest.h>

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
#include "tests/ffcv_samples.h"
#include "tests/test_util.h"
#include "writer/build.h"

namespace dsc::test {
namespace {

namespace fs = std::filesystem;
using format::MemorySource;
namespace ffcv = format::ffcv;

TEST(Ffcv, AllFieldsParsedAsFfcvNamedThem) {
  ASSERT_FALSE(Samples().empty());
  const std::string ref = Samples() + "/all-ref/";
  const std::string path = Samples() + "/ffcv-samples/allfields.beton";
  const std::vector<uint8_t> bytes = ReadFile(path);
  MemorySource src("allfields.beton", bytes.data(), bytes.size());
  auto f = ffcv::File::Open(&src);
  ASSERT_EQ(f->fields().size(), 7u);
  const char* names[] = {"image", "label", "score", "emb", "mask", "meta", "blob"};
  const uint8_t types[] = {2, 1, 0, 4, 4, 5, 3};
  const uint64_t offsets[] = {0, 16, 24, 32, 40, 48, 64};
  for (size_t k = 0; k < 7; ++k) {
    EXPECT_EQ(f->fields()[k].name, names[k]);
    EXPECT_EQ(f->fields()[k].type, types[k]);
    EXPECT_EQ(f->fields()[k].offset, offsets[k]);
  }
  EXPECT_EQ(f->record_size(), 80u);
  EXPECT_EQ(f->fields()[3].dtype, "<f4");
  EXPECT_EQ(f->fields()[3].shape, std::vector<uint64_t>({16}));
  EXPECT_EQ(f->fields()[4].shape, std::vector<uint64_t>({8, 8}));
  EXPECT_EQ(f->fields()[4].array_bytes, 64u);
  const auto label = ReadArray<int64_t>(ref + "label.bin");
  const auto score = ReadArray<double>(ref + "score.bin");
  const auto emb = ReadArray<uint8_t>(ref + "emb.bin");
  const auto mask = ReadArray<uint8_t>(ref + "mask.bin");
  const auto json = ReadArray<uint8_t>(ref + "meta_field_bytes.bin");
  const auto json_at = ReadArray<uint64_t>(ref + "meta_field_offsets.bin");
  const auto blob = ReadArray<uint8_t>(ref + "blob_data.bin");
  const auto blob_at = ReadArray<uint64_t>(ref + "blob_offsets.bin");
  ASSERT_EQ(f->sample_count(), 300u);
  auto bytes_of = [&](uint64_t i, size_t k) {
    const ffcv::Span s = f->span(i, k);
    return std::vector<uint8_t>(bytes.begin() + long(s.ptr), bytes.begin() + long(s.ptr + s.size));
  };
  for (uint64_t i = 0; i < 300; ++i) {
    EXPECT_EQ(f->int_value(i, 1), label[i]);
    EXPECT_EQ(f->float_value(i, 2), score[i]);
    EXPECT_EQ(bytes_of(i, 3), std::vector<uint8_t>(emb.begin() + long(i * 64), emb.begin() + long(i * 64 + 64))) << i;
    EXPECT_EQ(bytes_of(i, 4), std::vector<uint8_t>(mask.begin() + long(i * 64), mask.begin() + long(i * 64 + 64))) << i;
    EXPECT_EQ(bytes_of(i, 5), std::vector<uint8_t>(json.begin() + long(json_at[i]), json.begin() + long(json_at[i + 1]))) << i;
    EXPECT_EQ(bytes_of(i, 6), std::vector<uint8_t>(blob.begin() + long(blob_at[i]), blob.begin() + long(blob_at[i + 1]))) << i;
  }
  // The images, where FFCV's own Loader is wrong too (after an empty BytesField value: 4, 34, 52).
  Dataset ds(path);
  SampleDecoder dec(ds, {.fast_idct = true});
  std::vector<uint8_t> rgb;
  for (uint64_t i = 0; i < 300; ++i) {
    dec.Decode(i, &rgb);
    char key[32];
    std::snprintf(key, sizeof key, "image_%05llu.bin", (unsigned long long)i);
    EXPECT_EQ(rgb, ReadFile(ref + key)) << "sample " << i;
  }
  EXPECT_TRUE(ffcv::Verify(src).empty());
}

// Files written from docs/ffcv-format.md by NumPy: every field type, mixed JPEG/raw, pages filled by
// two interleaved writers (not in sample order), several page sizes.
TEST(Ffcv, NumpyWrittenFilesOfSeveralPageSizes) {
  for (int page : {8192, 16384, 1 << 21}) {
    for (int chunk : {1, 4}) {
      SCOPED_TRACE("page " + std::to_string(page) + " chunk " + std::to_string(chunk));
      const std::string path = ScratchDir() + "/syn.beton";
      ASSERT_EQ(std::system(("/usr/bin/python3 " + kRef + " write " + path + " " + std::to_string(page) + " " + std::to_string(chunk)).c_str()), 0);
      const auto pixels = ReadFile(path + ".pixels.bin");
      const auto dims = ReadArray<uint32_t>(path + ".dims.bin");
      const auto label = ReadArray<int64_t>(path + ".label.bin");
      const auto label2 = ReadArray<int64_t>(path + ".label2.bin");
      const auto pages = ReadArray<uint64_t>(path + ".pages.bin");
      Dataset ds(path);
      ASSERT_EQ(ds.size(), label.size());
      EXPECT_EQ(ds.view().ffcv()->page_count(), pages[0]);
      // Every field, as `dsc convert` maps it: 'label' has negative values, so 'label2' is the label.
      ASSERT_EQ(ds.meta().fields.size(), 8u);
      EXPECT_EQ(ds.meta().fields[1].name, "label2");
      EXPECT_EQ(ds.meta().fields[2].name, "label");
      EXPECT_EQ(ds.meta().fields[2].type, format::FieldType::kScalar);
      // PIL's decode is libjpeg's accurate IDCT with fancy upsampling.
      SampleDecoder dec(ds, {.fancy_upsampling = true});
      std::vector<uint8_t> rgb;
      size_t at = 0;
      for (uint64_t i = 0; i < ds.size(); ++i) {
        EXPECT_EQ(ds.entry(i).label[0], label2[i]);
        EXPECT_EQ(le::get64(ds.view().FixedValue(2, i)), uint64_t(label[i]));
        dec.Decode(i, &rgb);
        const size_t n = size_t(dims[2 * i]) * dims[2 * i + 1] * 3;
        ASSERT_EQ(rgb.size(), n) << i;
        EXPECT_EQ(std::memcmp(rgb.data(), pixels.data() + at, n), 0) << "sample " << i;
        at += n;
      }
      // Blocks are runs of consecutive samples in one page, covering every sample once.
      uint64_t next = 0;
      for (size_t b = 0; b < ds.view().block_count(); ++b) {
        EXPECT_EQ(ds.view().block(b).first_sample, next);
        next += ds.view().block(b).sample_count;
      }
      EXPECT_EQ(next, ds.size());
      if (chunk == 1 && page == 8192) {
        EXPECT_GT(ds.view().block_count(), pages[0]);
      }
      const auto bytes = ReadFile(path);
      MemorySource src("syn.beton", bytes.data(), bytes.size());
      EXPECT_TRUE(ffcv::Verify(src).empty());
      // quasi_random over the synthesised blocks (runs of one page): two ranks together read every
      // sample once, and the plan is a function of its options.
      std::vector<int> seen(ds.size(), 0);
      for (uint32_t rank = 0; rank < 2; ++rank) {
        OrderOptions oo;
        oo.order = Order::kQuasiRandom;
        oo.seed = 5;
        oo.rank = rank;
        oo.world_size = 2;
        oo.batch_size = 4;
        const EpochPlan plan = PlanEpoch(ds.view(), oo, 3);
        for (size_t k = 0; k < plan.samples.size(); ++k)
          if (!plan.padding[k]) ++seen[plan.samples[k]];
        EXPECT_EQ(plan.samples, PlanEpoch(ds.view(), oo, 3).samples);  // deterministic
      }
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), long(ds.size()));
    }
  }
}

// dsc info, verify, export and convert on FFCV's files.
TEST(Ffcv, CommandLine) {
  ASSERT_FALSE(Samples().empty());
  const std::string dir = ScratchDir();
  const std::string cifar = Samples() + "/ffcv-samples/cifar-test-smart.beton", all = Samples() + "/ffcv-samples/allfields.beton";
  std::string out;
  ASSERT_EQ(RunDsc("info " + all, &out), 0) << out;
  EXPECT_NE(out.find("FFCV .beton file"), std::string::npos) << out;
  for (const char* line : {"image            RGBImageField", "score            FloatField        -> dsc float64",
                           "emb              NDArrayField     <f4 (16,)  -> dsc float32[16]", "label            IntField          -> dsc int64",
                           "mask             NDArrayField     |u1 (8, 8)  -> dsc uint8[8,8]", "meta             JSONField         -> dsc text",
                           "blob             BytesField        -> dsc bytes",
                           // the loader reads every field, as convert writes it
                           "dsc's loader reads: image 'image', typed fields 'label' int64, 'score' float64, 'emb' float32[16], "
                           "'mask' uint8[8,8], 'meta' text, 'blob' bytes\n"})
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  ASSERT_EQ(RunDsc("info --json " + cifar, &out), 0) << out;
  EXPECT_NE(out.find("\"format\": \"ffcv\""), std::string::npos) << out;
  ASSERT_EQ(RunDsc("verify " + cifar + " " + all, &out), 0) << out;
  EXPECT_NE(out.find("allfields.beton: OK (FFCV file: 300 samples"), std::string::npos) << out;
  // A JPEG's allocation cut short: verify names the sample and field.
  std::vector<uint8_t> b = ReadFile(cifar);
  const uint64_t table = le::get64(b.data() + 16);
  le::put64(b.data() + table + 24 * 4 + 16, 100);  // sample 4 is a JPEG of 998 bytes
  WriteFile(dir + "/cut.beton", b);
  EXPECT_EQ(RunDsc("verify " + dir + "/cut.beton", &out), 1);
  EXPECT_NE(out.find("sample 4"), std::string::npos) << out;
  EXPECT_NE(out.find("DAMAGED"), std::string::npos) << out;
  ASSERT_EQ(RunDsc("export " + cifar + " --index 4 --count 2 --ppm --idct fast --out " + dir + "/ppm", &out), 0) << out;
  const auto images = ReadArray<uint8_t>(Samples() + "/cifar-ref/images.bin");
  for (int i : {4, 5}) {
    const auto ppm = ReadFile(dir + "/ppm/0000000" + std::to_string(i) + ".ppm");
    ASSERT_GE(ppm.size(), 3072u);
    EXPECT_EQ(std::memcmp(ppm.data() + ppm.size() - 3072, images.data() + i * 3072, 3072), 0) << i;
  }
  ASSERT_EQ(RunDsc("convert " + cifar + " " + dir + "/c.beton --threads 1 --quiet", &out), 0) << out;
  EXPECT_NE(out.find("2000 samples from FFCV file"), std::string::npos) << out;
  ASSERT_EQ(RunDsc("verify " + dir + "/c.beton", &out), 0) << out;
  ASSERT_EQ(RunDsc("convert " + all + " " + dir + "/a.beton --quiet", &out), 0) << out;
  EXPECT_NE(out.find("300 samples from FFCV file"), std::string::npos) << out;
  ASSERT_EQ(RunDsc("verify " + dir + "/a.beton", &out), 0) << out;
  ASSERT_EQ(RunDsc("info " + dir + "/a.beton", &out), 0) << out;
  EXPECT_NE(out.find("field 'mask' (array uint8[8,8])"), std::string::npos) << out;
}

// Hostile edits of a file FFCV wrote: every one a clear error naming what is wrong, never a crash or
// a huge allocation.
TEST(Ffcv, HostileFilesGiveClearErrors) {
  ASSERT_FALSE(Samples().empty());
  const std::vector<uint8_t> good = ReadFile(Samples() + "/ffcv-samples/cifar-test-smart.beton");
  const uint64_t table = le::get64(good.data() + 16), meta = 24 + 2 * 1041;
  struct Case {
    const char* what;
    std::function<void(std::vector<uint8_t>*)> edit;
    std::string want;
  };
  const Case cases[] = {
      {"samples overflow", [](auto* b) { le::put64(b->data() + 8, ~uint64_t(0) / 3); }, "run past the end of the file"},
      {"metadata longer than file", [](auto* b) { le::put64(b->data() + 8, 1u << 20); }, "run past the end of the file"},
      {"table pointer past end", [&](auto* b) { le::put64(b->data() + 16, b->size() + 24); }, "FFCV file: truncated: the file is"},
      {"cut short", [&](auto* b) { b->resize(table / 2); }, "the allocation table (written last) at byte " + std::to_string(table)},
      {"image pointer past end", [&](auto* b) { le::put64(b->data() + meta + 24 * 7 + 5, 1ull << 40); }, "sample 7: field 'image'"},
      {"65535x65535 raw image", [&](auto* b) {
         (*b)[meta + 24 * 1] = 1;
         le::put16(b->data() + meta + 24 * 1 + 1, 65535);
         le::put16(b->data() + meta + 24 * 1 + 3, 65535);
       }, "sample 1: field 'image': raw image of 65535x65535 needs"},
      {"alloc size crosses page", [&](auto* b) { le::put64(b->data() + table + 24 * 5 + 16, 1ull << 23); }, "cross the end of page 0"},
      {"alloc size overflows", [&](auto* b) { le::put64(b->data() + table + 24 * 5 + 16, ~uint64_t(0)); }, "sample 5: field 'image'"},
      {"alloc twice", [&](auto* b) { std::memcpy(b->data() + table + 24 * 6, b->data() + table + 24 * 5, 24); }, "a second allocation"},
      {"sample out of range", [&](auto* b) { le::put64(b->data() + table + 24 * 9, 2000); }, "sample out of range"},
      {"custom field", [](auto* b) { (*b)[24 + 1041] = 255; }, "field 1 'label' is a custom field (type 255)"},
      {"unknown type", [](auto* b) { (*b)[24] = 7; }, "unknown type id 7"},
      {"mode 2", [&](auto* b) { (*b)[meta + 24 * 3] = 2; }, "sample 3: field 'image': image mode 2"},
      {"torn table", [](auto* b) { b->resize(b->size() - 5); }, "not whole 24-byte entries"},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> b = good;
    c.edit(&b);
    MemorySource src("h.beton", b.data(), b.size());
    const std::string err = ErrorOf([&] { format::FileView::Open(&src); });
    EXPECT_NE(err.find(c.want), std::string::npos) << c.what << ": " << err;
    const auto problems = format::VerifyFile(src);
    EXPECT_FALSE(problems.empty()) << c.what;
  }
  // Overlapping allocations are found by verify (open does not read the data pages).
  {
    std::vector<uint8_t> b = good;
    const uint64_t p4 = le::get64(b.data() + meta + 24 * 4 + 5);
    le::put64(b.data() + meta + 24 * 5 + 5, p4 + 1);
    for (uint64_t k = 0; k < 2000; ++k)
      if (le::get64(b.data() + table + 24 * k) == 5) le::put64(b.data() + table + 24 * k + 8, p4 + 1);
    MemorySource src("o.beton", b.data(), b.size());
    const auto problems = format::VerifyFile(src);
    ASSERT_FALSE(problems.empty());
    EXPECT_NE(format::Describe(problems[0]).find("sample 5: field 'image': bytes"), std::string::npos) << format::Describe(problems[0]);
    EXPECT_NE(problems[0].message.find("overlap sample 4"), std::string::npos);
  }
  // A JPEG whose header disagrees with the metadata's size.
  {
    std::vector<uint8_t> b = good;
    le::put16(b.data() + meta + 24 * 4 + 1, 31);  // sample 4 is a JPEG
    MemorySource src("d.beton", b.data(), b.size());
    const auto problems = format::VerifyFile(src);
    ASSERT_FALSE(problems.empty());
    EXPECT_NE(problems[0].message.find("JPEG is 32x32, the metadata says 31x32"), std::string::npos) << problems[0].message;
    // Convert stops there too, naming the sample and field, and writes nothing.
    const std::string dir = ScratchDir("-hostile");
    WriteFile(dir + "/d.beton", b);
    writer::BuildOptions o;
    o.format = "ffcv";
    o.log = [](const std::string&) {};
    const std::string err = ErrorOf([&] { writer::Build(dir + "/d.beton", dir + "/out.beton", o); });
    EXPECT_NE(err.find("sample 4: field 'image': JPEG is 32x32, the metadata says 31x32"), std::string::npos) << err;
    EXPECT_FALSE(fs::exists(dir + "/out.beton"));
  }
}

}  // namespace
}  // namespace dsc::test
