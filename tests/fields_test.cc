// Typed fields (format 1.2): dsc::Writer writes every kind and dtype and FileView gives back exactly
// the values written (compared with the inputs, not with the writer's code); the file is the same for
// any thread count; a classification schema still writes a 1.0 file; bad values and hostile tables
// are refused naming the field and sample.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>

#include "format/error.h"
#include "format/fields.h"
#include "format/file_view.h"
#include "reader/digest.h"
#include "reader/loader.h"
#include "tests/fuzz/fixup_checksums.h"
#include "tests/test_util.h"
#include "writer/writer.h"

namespace dsc::test {
namespace {

using format::DType;
using format::FieldType;

// One sample's values as the test made them (the independent reference).
struct Values {
  std::vector<uint8_t> jpeg;
  int32_t label = 0;
  int8_t i8 = 0;
  int16_t i16 = 0;
  int32_t i32 = 0;
  int64_t i64 = 0;
  uint8_t u8 = 0;
  uint16_t u16 = 0, f16 = 0;
  uint32_t u32 = 0;
  uint64_t u64 = 0;
  float f32 = 0;
  double f64 = 0;
  bool flag = false;
  uint8_t cls = 0;
  std::vector<float> mat;          // [3, 2]
  std::vector<float> boxes;        // [N, 4]
  std::vector<int64_t> tokens;     // [N]
  std::vector<uint8_t> blob;
  std::string caption;
};

Schema TestSchema() {
  return {ImageField("image"), LabelField("label", {"a", "b", "c"}),
          ScalarField("i8", DType::kInt8), ScalarField("i16", DType::kInt16), ScalarField("i32", DType::kInt32),
          ScalarField("i64", DType::kInt64), ScalarField("u8", DType::kUInt8), ScalarField("u16", DType::kUInt16),
          ScalarField("u32", DType::kUInt32), ScalarField("u64", DType::kUInt64), ScalarField("f16", DType::kFloat16),
          ScalarField("f32", DType::kFloat32), ScalarField("f64", DType::kFloat64), ScalarField("flag", DType::kBool),
          ScalarField("cls", DType::kUInt8, {"x", "y"}), ArrayField("mat", DType::kFloat32, {3, 2}),
          VarArrayField("boxes", DType::kFloat32, {4}), VarArrayField("tokens", DType::kInt64),
          BytesField("blob"), TextField("caption")};
}

std::vector<Values> MakeValues(size_t n) {
  std::mt19937_64 rng(7);
  std::vector<Values> out;
  const auto files = CifarTestJpegs(n);
  for (size_t i = 0; i < files.size(); ++i) {
    Values v;
    v.jpeg = ReadFile(files[i]);
    v.label = int32_t(rng() % 3);
    v.i8 = int8_t(rng()); v.i16 = int16_t(rng()); v.i32 = int32_t(rng()); v.i64 = int64_t(rng());
    v.u8 = uint8_t(rng()); v.u16 = uint16_t(rng()); v.u32 = uint32_t(rng()); v.u64 = rng(); v.f16 = uint16_t(rng());
    v.f32 = float(int64_t(rng() % 100000) - 50000) / 7.0f;
    v.f64 = double(int64_t(rng())) / 3.0;
    v.flag = rng() & 1;
    v.cls = uint8_t(rng() % 2);
    for (int k = 0; k < 6; ++k) v.mat.push_back(float(rng() % 1000) * 0.5f);
    for (size_t k = 0, boxes = rng() % 6; k < 4 * boxes; ++k) v.boxes.push_back(float(rng() % 32));
    for (size_t k = 0, t = rng() % 9; k < t; ++k) v.tokens.push_back(int64_t(rng()));
    for (size_t k = 0, b = rng() % 300; k < b; ++k) v.blob.push_back(uint8_t(rng()));
    v.caption = i % 3 ? "caf\xC3\xA9 " + std::to_string(i) : "";  // some empty values
    out.push_back(std::move(v));
  }
  return out;
}

Sample ToSample(const Values& v) {
  Sample s;
  s.SetImage("image", v.jpeg);
  s.SetLabel("label", v.label);
  s.SetScalar("i8", v.i8); s.SetScalar("i16", v.i16); s.SetScalar("i32", v.i32); s.SetScalar("i64", v.i64);
  s.SetScalar("u8", v.u8); s.SetScalar("u16", v.u16); s.SetScalar("u32", v.u32); s.SetScalar("u64", v.u64);
  s.SetRaw("f16", DType::kFloat16, &v.f16, 2);
  s.SetScalar("f32", v.f32); s.SetScalar("f64", v.f64); s.SetScalar("flag", v.flag); s.SetScalar("cls", v.cls);
  s.SetArray("mat", v.mat.data(), v.mat.size());
  s.SetArray("boxes", v.boxes.data(), v.boxes.size());
  s.SetArray("tokens", v.tokens.data(), v.tokens.size());
  s.SetBytes("blob", v.blob);
  s.SetText("caption", v.caption);
  return s;
}

std::string Write(const std::string& path, const std::vector<Values>& vals, int threads) {
  WriterOptions o;
  o.threads = threads;
  o.block_size = 8192;  // several blocks, samples packed up to their edges
  o.jpeg_tables = "inline";
  Writer w(path, TestSchema(), o);
  for (const auto& v : vals) w.Add(ToSample(v));
  w.Close();
  return path;
}

template <class T>
T Fixed(const format::FileView& v, const std::string& name, uint64_t i) {
  const auto& f = v.meta().fields;
  const size_t k = size_t(std::find_if(f.begin(), f.end(), [&](const format::Field& x) { return x.name == name; }) - f.begin());
  EXPECT_LT(k, f.size()) << name;
  EXPECT_EQ(v.layout().width[k], sizeof(T)) << name;
  T x;
  std::memcpy(&x, v.FixedValue(k, i), sizeof(T));
  return x;
}

std::vector<uint8_t> Var(const format::FileView& v, const std::string& name, uint64_t i) {
  const auto& f = v.meta().fields;
  const size_t k = size_t(std::find_if(f.begin(), f.end(), [&](const format::Field& x) { return x.name == name; }) - f.begin());
  const auto r = v.VarValue(k, i);
  std::vector<uint8_t> scratch;
  const uint8_t* p = v.source().Read(r.offset, r.size, &scratch);
  return std::vector<uint8_t>(p, p + r.size);
}

template <class T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(Fields, EveryKindAndDtypeRoundTrips) {
  const auto vals = MakeValues(60);
  ASSERT_EQ(vals.size(), 60u);
  const std::string dir = ScratchDir("-fields");
  const auto bytes = ReadFile(Write(dir + "/f.beton", vals, 2));
  format::MemorySource src("f.beton", bytes.data(), bytes.size());
  auto v = format::FileView::Open(&src);
  ASSERT_TRUE(v->typed());
  EXPECT_EQ(v->header().incompat_flags, format::kTypedFieldsFlag);
  EXPECT_EQ(v->header().version_minor, format::kTypedMinor);
  EXPECT_GT(v->block_count(), 3u);
  const auto schema = TestSchema();
  ASSERT_EQ(v->meta().fields.size(), schema.size());
  for (size_t f = 0; f < schema.size(); ++f) {
    EXPECT_EQ(v->meta().fields[f].name, schema[f].name);
    EXPECT_EQ(v->meta().fields[f].type, schema[f].type);
    EXPECT_EQ(v->meta().fields[f].dtype, schema[f].dtype);
    EXPECT_EQ(v->meta().fields[f].dims, schema[f].dims);
    EXPECT_EQ(v->meta().fields[f].classes, schema[f].classes);
  }
  ASSERT_EQ(v->sample_count(), vals.size());
  std::vector<uint8_t> scratch;
  for (uint64_t i = 0; i < vals.size(); ++i) {
    const Values& x = vals[i];
    const auto e = v->entry(i);
    const uint8_t* payload = src.Read(e.offset, e.size, &scratch);
    EXPECT_EQ(std::vector<uint8_t>(payload, payload + e.size), x.jpeg) << i;  // 32x32: passed through
    EXPECT_EQ(e.label[0], x.label);
    EXPECT_EQ(Fixed<int8_t>(*v, "i8", i), x.i8);
    EXPECT_EQ(Fixed<int16_t>(*v, "i16", i), x.i16);
    EXPECT_EQ(Fixed<int32_t>(*v, "i32", i), x.i32);
    EXPECT_EQ(Fixed<int64_t>(*v, "i64", i), x.i64);
    EXPECT_EQ(Fixed<uint8_t>(*v, "u8", i), x.u8);
    EXPECT_EQ(Fixed<uint16_t>(*v, "u16", i), x.u16);
    EXPECT_EQ(Fixed<uint32_t>(*v, "u32", i), x.u32);
    EXPECT_EQ(Fixed<uint64_t>(*v, "u64", i), x.u64);
    EXPECT_EQ(Fixed<uint16_t>(*v, "f16", i), x.f16);
    EXPECT_EQ(Fixed<float>(*v, "f32", i), x.f32);
    EXPECT_EQ(Fixed<double>(*v, "f64", i), x.f64);
    EXPECT_EQ(Fixed<uint8_t>(*v, "flag", i), x.flag ? 1 : 0);
    EXPECT_EQ(Fixed<uint8_t>(*v, "cls", i), x.cls);
    const size_t mat = size_t(std::find_if(schema.begin(), schema.end(), [](const auto& f) { return f.name == "mat"; }) - schema.begin());
    EXPECT_EQ(std::vector<uint8_t>(v->FixedValue(mat, i), v->FixedValue(mat, i) + 24), Bytes(x.mat));
    EXPECT_EQ(Var(*v, "boxes", i), Bytes(x.boxes)) << i;
    EXPECT_EQ(Var(*v, "tokens", i), Bytes(x.tokens)) << i;
    EXPECT_EQ(Var(*v, "blob", i), x.blob) << i;
    EXPECT_EQ(Var(*v, "caption", i), std::vector<uint8_t>(x.caption.begin(), x.caption.end())) << i;
  }
  EXPECT_TRUE(format::VerifyFile(src).empty());
  RemoveScratch(dir);
}

TEST(Fields, SameFileForAnyThreadCount) {
  const auto vals = MakeValues(300);  // more than one window at 1 thread
  const std::string dir = ScratchDir("-fields-threads");
  EXPECT_EQ(ReadFile(Write(dir + "/t1.beton", vals, 1)), ReadFile(Write(dir + "/t4.beton", vals, 4)));
  RemoveScratch(dir);
}

TEST(Fields, ClassificationSchemaWritesAVersion10File) {
  const auto files = CifarTestJpegs(5);
  const std::string dir = ScratchDir("-fields-cls");
  Writer w(dir + "/c.beton", {ImageField("image"), LabelField("label")});
  for (const auto& f : files) {
    Sample s;
    s.SetImage("image", ReadFile(f));
    s.SetLabel("label", 1);
    w.Add(std::move(s));
  }
  w.Close();
  const auto bytes = ReadFile(dir + "/c.beton");
  format::MemorySource src("c", bytes.data(), bytes.size());
  auto v = format::FileView::Open(&src);
  EXPECT_FALSE(v->typed());
  EXPECT_EQ(v->header().incompat_flags, 0u);
  EXPECT_EQ(v->header().version_minor, 0u);
  EXPECT_EQ(v->header().optional.size(), 0u);
  RemoveScratch(dir);
}

// Adds `s` to a writer of TestSchema and returns the message it is refused with.
std::string Refusal(Writer* w, Sample s) {
  try {
    w->Add(std::move(s));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Fields, BadValuesNameFieldAndSample) {
  const auto vals = MakeValues(2);
  const std::string dir = ScratchDir("-fields-bad");
  const std::string out = dir + "/bad.beton";
  {
    Writer w(out, TestSchema());
    w.Add(ToSample(vals[0]));
    Sample s = ToSample(vals[1]);
    s.SetScalar("i16", int32_t(1));
    EXPECT_TRUE(Has(Refusal(&w, s), "sample 1: field 'i16': expected int16 values, got int32")) << Refusal(&w, s);
    s = ToSample(vals[1]);
    const float two[2] = {1, 2};
    s.SetArray("mat", two, 2);
    EXPECT_TRUE(Has(Refusal(&w, s), "field 'mat': expected 6 elements, got 2"));
    s = ToSample(vals[1]);
    s.SetArray("boxes", two, 2);
    EXPECT_TRUE(Has(Refusal(&w, s), "field 'boxes': 8 bytes, not a whole number of 16-byte rows"));
    s = ToSample(vals[1]);
    s.SetText("caption", "\xC3(");
    EXPECT_TRUE(Has(Refusal(&w, s), "field 'caption': not UTF-8"));
    s = ToSample(vals[1]);
    s.SetScalar("cls", uint8_t(2));
    EXPECT_TRUE(Has(Refusal(&w, s), "field 'cls': value 2 outside its 2 classes"));
    s = ToSample(vals[1]);
    s.SetRaw("flag", DType::kBool, "\x02", 1);
    EXPECT_TRUE(Has(Refusal(&w, s), "field 'flag': bool byte is 2"));
    s = ToSample(vals[1]);
    s.values().erase("blob");
    EXPECT_TRUE(Has(Refusal(&w, s), "sample 1: field 'blob': missing"));
    s = ToSample(vals[1]);
    s.SetText("nope", "x");
    EXPECT_TRUE(Has(Refusal(&w, s), "no field named 'nope'"));
    s = ToSample(vals[1]);
    s.SetImage("image", {1, 2, 3});
    w.Add(std::move(s));  // accepted now; refused when the window is encoded, naming the sample
    try {
      w.Close();
      ADD_FAILURE() << "a broken image was written";
    } catch (const Error& e) {
      EXPECT_TRUE(Has(e.what(), "bad.beton: sample 1")) << e.what();
    }
  }
  EXPECT_FALSE(std::filesystem::exists(out));  // nothing partial left behind
  EXPECT_THROW(Writer(out, {ImageField("image"), TextField("image")}), Error);  // duplicate name
  EXPECT_THROW(Writer(out, {TextField("t")}), Error);                          // no image first
  EXPECT_THROW(Writer(out, {ImageField("i"), ArrayField("a", DType::kFloat32, {1u << 16, 1u << 16})}), Error);
  RemoveScratch(dir);
}

// A field table built by hand: what a hostile file could hold.
std::string HostileMeta(uint32_t fields, uint8_t type, uint8_t dtype, uint8_t ndim, std::vector<uint32_t> dims) {
  std::string s;
  auto u32 = [&](uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); };
  u32(fields);
  s += char(1); s += '\0'; s += '\0'; s += '\0';
  u32(5); s += "image"; u32(0);
  for (uint32_t f = 1; f < std::min<uint32_t>(fields, 3); ++f) {
    s += char(type); s += char(dtype); s += char(ndim); s += '\0';
    u32(1); s += char('a' + f);
    for (uint32_t d : dims) u32(d);
    u32(0);
  }
  u32(0);                  // build options
  s.append(8, '\0');       // skipped
  u32(0);                  // tables
  return s;
}

TEST(Fields, HostileFieldTablesAreRefusedBeforeAllocation) {
  auto decode = [](const std::string& m) {
    try {
      format::DecodeMeta(reinterpret_cast<const uint8_t*>(m.data()), m.size(), true);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_TRUE(Has(decode(HostileMeta(0xFFFFFFFF, 3, 3, 0, {})), "field count 4294967295"));
  EXPECT_TRUE(Has(decode(HostileMeta(65, 3, 3, 0, {})), "field count 65"));
  EXPECT_TRUE(Has(decode(HostileMeta(2, 4, 10, 200, {})), "200 dims, at most 8"));
  EXPECT_TRUE(Has(decode(HostileMeta(2, 4, 10, 2, {0x80000000u, 0x80000000u})), "wider than 16 MiB"));
  EXPECT_TRUE(Has(decode(HostileMeta(2, 4, 10, 1, {0})), "a dim is 0"));
  EXPECT_TRUE(Has(decode(HostileMeta(2, 3, 99, 0, {})), "bad dtype 99"));
  EXPECT_TRUE(Has(decode(HostileMeta(2, 9, 0, 0, {})), "unknown type 9"));
  EXPECT_EQ(decode(HostileMeta(2, 5, 10, 1, {4})), "");  // the same table, well formed
  // A 1.0 reader's rules still hold for a file without the flag: typed entries are refused.
  const std::string typed = HostileMeta(2, 5, 10, 1, {4});
  EXPECT_THROW(format::DecodeMeta(reinterpret_cast<const uint8_t*>(typed.data()), typed.size(), false), Error);
}

TEST(Fields, DamageIsFoundAndNamed) {
  const auto vals = MakeValues(30);
  const std::string dir = ScratchDir("-fields-damage");
  const auto intact = ReadFile(Write(dir + "/f.beton", vals, 1));
  format::MemorySource isrc("f", intact.data(), intact.size());
  auto v = format::FileView::Open(&isrc);
  const auto sections = v->Extents();
  auto section = [&](const std::string& name) {
    return *std::find_if(sections.begin(), sections.end(), [&](const auto& s) { return s.name == name; });
  };
  // Every byte of the two new sections is under a checksum (and the fix-up makes the checksums right,
  // so the rules behind them are reached too).
  for (const char* name : {"columns", "varsizes"}) {
    const auto s = section(name);
    ASSERT_GT(s.content, 0u) << name;
    for (uint64_t at : {s.offset, s.offset + s.content / 2, s.offset + s.content - 1, s.offset + s.size - 1}) {
      auto b = intact;
      b[at] ^= 0x10;
      format::MemorySource src("f", b.data(), b.size());
      const auto problems = format::VerifyFile(src);
      ASSERT_FALSE(problems.empty()) << name << " byte " << at;
      EXPECT_EQ(problems[0].section, name) << format::Describe(problems[0]);
      EXPECT_THROW(format::FileView::Open(&src), Error);
    }
  }
  // A length pointing past the block, checksums fixed up: refused at open, naming the sample.
  {
    auto b = intact;
    const auto s = section("varsizes");
    const uint32_t huge = 0x7FFFFFFF;
    std::memcpy(&b[s.offset + 4 * 4 * 5], &huge, 4);  // sample 5's first variable field (4 per sample)
    fuzz::FixupChecksums(b.data(), b.size());
    format::MemorySource src("f", b.data(), b.size());
    try {
      format::FileView::Open(&src);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_TRUE(!RegexSearch(e.what(), "index: sample 5: variable fields \\([0-9]+ bytes\\) run past its block").empty()) << e.what();
    }
  }
  // A caption that is no longer UTF-8, block checksum fixed up: verify names field and sample.
  {
    auto b = intact;
    const size_t caption = v->meta().fields.size() - 1;
    const auto r = v->VarValue(caption, 4);
    ASSERT_GT(r.size, 0u);
    b[r.offset] = 0xFF;
    fuzz::FixupChecksums(b.data(), b.size());
    format::MemorySource src("f", b.data(), b.size());
    const auto problems = format::VerifyFile(src);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(format::Describe(problems[0]), "data: block " + std::to_string(v->entry(4).block) + ": sample 4: field 'caption': not UTF-8");
  }
  // A bool byte of 2 in the columns: open names field and sample.
  {
    auto b = intact;
    const size_t flag = 13;
    ASSERT_EQ(v->meta().fields[flag].name, "flag");
    b[section("columns").offset + v->FixedValue(flag, 7) - v->FixedValue(2, 0)] = 2;
    fuzz::FixupChecksums(b.data(), b.size());
    format::MemorySource src("f", b.data(), b.size());
    const auto problems = format::VerifyFile(src);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(format::Describe(problems[0]), "columns: sample 7: field 'flag': bool byte is 2");
  }
  RemoveScratch(dir);
}

// A file in memory that records what VerifyFile releases (DontNeed) and counts reads of released bytes.
class ReleaseWatch : public format::ByteSource {
 public:
  ReleaseWatch(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  const std::string& name() const override { return name_; }
  uint64_t size() const override { return size_; }
  const uint8_t* Read(uint64_t off, size_t n, std::vector<uint8_t>*) const override {
    CheckRange(off, n);
    for (const auto& [a, len] : released_)
      if (off < a + len && a < off + n) ++late_reads;
    return data_ + off;
  }
  void DontNeed(uint64_t off, uint64_t n) const override { released_.push_back({off, n}); }
  mutable int late_reads = 0;

 private:
  std::string name_ = "watched";
  const uint8_t* data_;
  size_t size_;
  mutable std::vector<std::pair<uint64_t, uint64_t>> released_;
};

// VerifyFile checks each sample's variable values while the block pass still holds the sample's
// block, never after releasing it (a URL's block would be fetched a second time), and after_block
// sees the checked bytes grow block by block. Damage found later still keeps those findings out.
TEST(Fields, VerifyReadsValuesBeforeReleasingTheirBlock) {
  const auto vals = MakeValues(30);
  const std::string dir = ScratchDir("-fields-release");
  const auto intact = ReadFile(Write(dir + "/f.beton", vals, 1));
  format::MemorySource isrc("f", intact.data(), intact.size());
  auto v = format::FileView::Open(&isrc);
  ASSERT_GT(v->block_count(), 3u);
  ReleaseWatch watch(intact.data(), intact.size());
  std::vector<uint64_t> ends;
  EXPECT_TRUE(format::VerifyFile(watch, [&](uint64_t end) { ends.push_back(end); }).empty());
  EXPECT_EQ(watch.late_reads, 0);
  ASSERT_EQ(ends.size(), v->block_count());
  EXPECT_EQ(ends.back(), v->header().sections[format::kIndex].offset);
  EXPECT_TRUE(std::is_sorted(ends.begin(), ends.end()));
  // A caption that is not UTF-8 in a sample of block 1 and a damaged last block: only the block is
  // reported.
  uint64_t i = 0;
  while (i < v->sample_count() && v->entry(i).block < 1) ++i;
  ASSERT_EQ(v->entry(i).block, 1u);
  auto b = intact;
  const size_t caption = v->meta().fields.size() - 1;
  ASSERT_GT(v->VarValue(caption, i).size, 0u);
  b[v->VarValue(caption, i).offset] = 0xFF;
  fuzz::FixupChecksums(b.data(), b.size());
  const format::BlockEntry& last = v->block(v->block_count() - 1);
  b[last.offset] ^= 1;
  format::MemorySource src("f", b.data(), b.size());
  const auto problems = format::VerifyFile(src);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(format::Describe(problems[0]), "data: block " + std::to_string(v->block_count() - 1) + ": checksum mismatch (offset " +
                                               std::to_string(last.offset) + ")");
  RemoveScratch(dir);
}

// The loader's Batch::fields: every value as written, in sample order; the same batches (digest of
// images, labels and every field column) for 1 and 3 threads; fields= selects and orders.
TEST(Fields, LoaderDeliversFieldsTheSameForAnyThreadCount) {
  const auto vals = MakeValues(50);
  const std::string dir = ScratchDir("-fields-loader");
  const std::string path = Write(dir + "/f.beton", vals, 2);
  LoaderOptions o;
  o.order = Order::kSequential;
  o.batch_size = 16;
  o.threads = 2;
  o.fields = {"caption", "boxes", "i32", "mat"};
  size_t seen = 0;
  {
    Loader l(path, o);
    for (const Batch& b : l.epoch(0)) {
      ASSERT_EQ(b.field_count, 4u);
      EXPECT_STREQ(b.fields[0].name, "caption");
      EXPECT_STREQ(b.fields[3].name, "mat");
      for (uint32_t j = 0; j < b.size; ++j, ++seen) {
        const Values& x = vals[seen];
        const FieldColumn& cap = b.fields[0];
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(cap.data) + cap.offsets[j], cap.offsets[j + 1] - cap.offsets[j]), x.caption);
        const FieldColumn& box = b.fields[1];
        EXPECT_EQ(std::vector<uint8_t>(box.data + box.offsets[j], box.data + box.offsets[j + 1]), Bytes(x.boxes)) << seen;
        int32_t i32;
        std::memcpy(&i32, b.fields[2].data + 4 * j, 4);
        EXPECT_EQ(i32, x.i32);
        EXPECT_EQ(std::vector<uint8_t>(b.fields[3].data + 24 * j, b.fields[3].data + 24 * (j + 1)), Bytes(x.mat));
      }
    }
  }
  EXPECT_EQ(seen, vals.size());
  auto digest = [&](int threads) {
    LoaderOptions r;
    r.order = Order::kRandom;
    r.seed = 3;
    r.batch_size = 8;
    r.threads = threads;
    Loader l(path, r);
    BatchDigest d;
    for (const Batch& b : l.epoch(1)) {
      EXPECT_EQ(b.field_count, TestSchema().size() - 2);  // every typed field by default
      d.Add(b);
    }
    return d.Hex();
  };
  EXPECT_EQ(digest(1), digest(3));
  o.fields = {"nope"};
  EXPECT_THROW(Loader(path, o), OptionError);
  RemoveScratch(dir);
}

// WriterOptions::on_skip (dsc build --skip-invalid): an image that cannot be decoded is left out and
// reported, the file holds the others in order and counts the skipped one.
TEST(Fields, UndecodableImagesAreSkippedWhenAsked) {
  const auto vals = MakeValues(6);
  const std::string dir = ScratchDir("-fields-skip");
  std::vector<std::string> skipped;
  WriterOptions o;
  o.threads = 2;
  o.on_skip = [&](const std::string& why) { skipped.push_back(why); };
  {
    Writer w(dir + "/s.beton", TestSchema(), o);
    for (size_t i = 0; i < vals.size(); ++i) {
      Sample s = ToSample(vals[i]);
      if (i == 2) s.SetImage("image", {0xFF, 0xD8, 0xFF, 0x00});
      w.Add(std::move(s));
    }
    w.Close();
    EXPECT_EQ(w.written(), 5u);
  }
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_TRUE(Has(skipped[0], "s.beton: sample 2")) << skipped[0];
  const auto bytes = ReadFile(dir + "/s.beton");
  format::MemorySource src("s", bytes.data(), bytes.size());
  auto v = format::FileView::Open(&src);
  ASSERT_EQ(v->sample_count(), 5u);
  EXPECT_EQ(v->meta().skipped_count, 1u);
  EXPECT_EQ(Var(*v, "caption", 2), std::vector<uint8_t>(vals[3].caption.begin(), vals[3].caption.end()));
  RemoveScratch(dir);
}

// Sample::SetFile: an image read by the encode threads and a bytes field read by Add give the file
// that the same bytes given directly give, for any thread count and across windows; a file missing
// at Add fails that Add (naming sample and file) and leaves the writer usable; one gone before its
// read fails the writer at Close, naming its sample, and leaves no file.
TEST(Fields, FilesGivenByPathWriteTheSameFile) {
  const auto files = CifarTestJpegs(300);  // more than one window at 1 and 2 threads
  const std::string dir = ScratchDir("-fields-files");
  const Schema schema = {ImageField("image"), LabelField("label"), BytesField("raw")};
  auto write = [&](const std::string& out, int threads, bool by_path) {
    WriterOptions o;
    o.threads = threads;
    o.block_size = 8192;
    Writer w(out, schema, o);
    for (size_t i = 0; i < files.size(); ++i) {
      Sample s;
      if (by_path) s.SetFile("image", files[i]), s.SetFile("raw", files[i]);
      else s.SetImage("image", ReadFile(files[i])), s.SetBytes("raw", ReadFile(files[i]));
      s.SetLabel("label", int32_t(i % 10));
      w.Add(std::move(s));
    }
    w.Close();
    return ReadFile(out);
  };
  const auto want = write(dir + "/bytes.beton", 2, false);
  EXPECT_EQ(write(dir + "/p1.beton", 1, true), want);
  EXPECT_EQ(write(dir + "/p3.beton", 3, true), want);

  const std::string gone = dir + "/gone.jpg";
  WriteFile(gone, ReadFile(files[0]));
  {
    Writer w(dir + "/late.beton", schema, WriterOptions{});
    auto add = [&](const std::string& image) {
      Sample s;
      s.SetFile("image", image);
      s.SetLabel("label", 0);
      s.SetBytes("raw", {1});
      w.Add(std::move(s));
    };
    add(files[1]);
    try {
      add(dir + "/missing.jpg");
      ADD_FAILURE() << "a missing file was accepted";
    } catch (const Error& e) {
      EXPECT_TRUE(Has(e.what(), "late.beton: sample 1: field 'image': " + dir + "/missing.jpg: cannot open")) << e.what();
    }
    add(gone);  // sample 1 again: the refused one was not counted
    std::filesystem::remove(gone);
    try {
      w.Close();
      ADD_FAILURE() << "a file removed before its read was written";
    } catch (const Error& e) {
      EXPECT_TRUE(Has(e.what(), "late.beton: sample 1: field 'image': " + gone + ": cannot open")) << e.what();
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/late.beton"));
  RemoveScratch(dir);
}

}  // namespace
}  // namespace dsc::test
