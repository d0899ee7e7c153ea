#include "remote/wire.h"

#include <jconfig.h>

#include <algorithm>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "format/bytes.h"

#ifndef DSC_VERSION
#define DSC_VERSION "0.0.0"
#endif

namespace dsc::remote {

const char* DscVersion() { return DSC_VERSION; }
uint32_t JpegVersion() { return LIBJPEG_TURBO_VERSION_NUMBER; }

void ToSpec(const LoaderOptions& o, uint32_t width, uint32_t height, WorkSpec* s) {
  const auto& a = o.augment;
  s->set_crop(uint32_t(a.crop));
  s->set_out_w(a.out_w);
  s->set_out_h(a.out_h);
  s->set_scale_min(a.scale_min);
  s->set_scale_max(a.scale_max);
  s->set_ratio_min(a.ratio_min);
  s->set_ratio_max(a.ratio_max);
  s->set_center_ratio(a.center_ratio);
  s->set_resize(a.resize);
  s->set_flip(a.flip);
  s->set_translate(a.translate);
  s->set_cutout(a.cutout);
  s->set_fill(std::string(reinterpret_cast<const char*>(a.fill), 3));
  s->set_normalize(a.normalize);
  s->clear_mean();
  s->clear_std();
  for (int c = 0; c < 3; ++c) {
    s->add_mean(a.mean[c]);
    s->add_std(a.std[c]);
  }
  s->set_dtype(uint32_t(o.dtype));
  s->set_layout(uint32_t(o.layout));
  s->set_fancy_upsampling(o.fancy_upsampling);
  s->set_dct_scaling(o.dct_scaling);
  s->set_defer_augment(o.defer_augment);
  s->set_verify(o.verify);
  s->set_max_pixels(o.max_pixels);
  s->set_width(width);
  s->set_height(height);
}

LoaderOptions FromSpec(const WorkSpec& s, uint32_t* width, uint32_t* height) {
  if (s.crop() > 2) throw OptionError("crop mode " + std::to_string(s.crop()) + " is unknown");
  if (s.dtype() > 2) throw OptionError("dtype " + std::to_string(s.dtype()) + " is unknown");
  if (s.layout() > 1) throw OptionError("layout " + std::to_string(s.layout()) + " is unknown");
  if (s.fill().size() != 3 || s.mean_size() != 3 || s.std_size() != 3)
    throw OptionError("fill, mean and std need 3 values each");
  LoaderOptions o;
  auto& a = o.augment;
  a.crop = kernels::CropMode(s.crop());
  a.out_w = s.out_w();
  a.out_h = s.out_h();
  a.scale_min = s.scale_min();
  a.scale_max = s.scale_max();
  a.ratio_min = s.ratio_min();
  a.ratio_max = s.ratio_max();
  a.center_ratio = s.center_ratio();
  a.resize = s.resize();
  a.flip = s.flip();
  a.translate = s.translate();
  a.cutout = s.cutout();
  for (int c = 0; c < 3; ++c) {
    a.fill[c] = uint8_t(s.fill()[size_t(c)]);
    a.mean[c] = s.mean(c);
    a.std[c] = s.std(c);
  }
  a.normalize = s.normalize();
  o.dtype = DType(s.dtype());
  o.layout = Layout(s.layout());
  o.fancy_upsampling = s.fancy_upsampling();
  o.dct_scaling = s.dct_scaling();
  o.defer_augment = s.defer_augment();
  o.verify = s.verify();
  o.max_pixels = s.max_pixels();
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
