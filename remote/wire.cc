#include "remote/wire.h"

#include <jconfig.h>

#include <algorithm>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "format/bytes.h"
#include "reader/option_table.h"

#ifndef DSC_VERSION
#define DSC_VERSION "0.0.0"
#endif

namespace dsc::remote {

const char* DscVersion() { return DSC_VERSION; }
uint32_t JpegVersion() { return LIBJPEG_TURBO_VERSION_NUMBER; }

void ToSpec(const LoaderOptions& o, uint32_t width, uint32_t height, WorkSpec* s) {
  s->clear_options();
  for (const OptionRow& row : LoaderOptionTable()) {
    if (!(row.where & kOnWire)) continue;
    SpecOption* e = s->add_options();
    e->set_name(row.name);
    e->set_value(row.get(o));
  }
  s->set_width(width);
  s->set_height(height);
}

LoaderOptions FromSpec(const WorkSpec& s, uint32_t* width, uint32_t* height) {
  LoaderOptions o;
  size_t at = 0;  // the entries come in table order, one per wire row
  for (const OptionRow& row : LoaderOptionTable()) {
    if (!(row.where & kOnWire)) continue;
    if (at >= size_t(s.options_size()) || s.options(int(at)).name() != row.name)
      throw OptionError("the spec lacks option " + row.name + " (entry " + std::to_string(at) + ")");
    row.set(o, s.options(int(at)).value());
    ++at;
  }
  if (at != size_t(s.options_size())) throw OptionError("the spec has an unknown option '" + s.options(int(at)).name() + "'");
  // A crop's output is the spec's size (Loader::set_output_size changes it between requests).
  if (o.augment.crop != kernels::CropMode::kNone) {
    o.augment.out_w = int(std::min<uint32_t>(s.width(), INT32_MAX));
    o.augment.out_h = int(std::min<uint32_t>(s.height(), INT32_MAX));
  }
  o.threads = 1;
  ValidateOptions(o, s.width(), s.height());
  if (s.width() == 0 || s.height() == 0 || uint64_t(s.width()) * s.height() > (1ull << 28))
    throw OptionError("output size " + std::to_string(s.width()) + "x" + std::to_string(s.height()) + " is out of range");
  *width = s.width();
  *height = s.height();
  return o;
}

std::string SpecKey(const WorkSpec& spec) {
  std::string out;
  google::protobuf::io::StringOutputStream os(&out);
  google::protobuf::io::CodedOutputStream cos(&os);
  cos.SetSerializationDeterministic(true);
  spec.SerializeToCodedStream(&cos);
  cos.Trim();
  return out;
}

void PutParams(const kernels::SampleParams& p, uint8_t* out) {
  const int64_t q[4] = {p.src_x, p.src_y, p.src_w, p.src_h};
  for (int i = 0; i < 4; ++i) le::put64(out + 8 * i, uint64_t(q[i]));
  const int32_t r[5] = {p.dx, p.dy, p.cut_x, p.cut_y, p.flip};
  for (int i = 0; i < 5; ++i) le::put32(out + 32 + 4 * i, uint32_t(r[i]));
}

kernels::SampleParams GetParams(const uint8_t* in) {
  kernels::SampleParams p;
  p.src_x = int64_t(le::get64(in));
  p.src_y = int64_t(le::get64(in + 8));
  p.src_w = int64_t(le::get64(in + 16));
  p.src_h = int64_t(le::get64(in + 24));
  p.dx = int32_t(le::get32(in + 32));
  p.dy = int32_t(le::get32(in + 36));
  p.cut_x = int32_t(le::get32(in + 40));
  p.cut_y = int32_t(le::get32(in + 44));
  p.flip = int32_t(le::get32(in + 48));
  return p;
}

}  // namespace dsc::remote
