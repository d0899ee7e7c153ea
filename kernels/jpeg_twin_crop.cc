#include "kernels/jpeg_twin_crop.h"

#include "format/error.h"
#include "kernels/crop_resize.h"

namespace dsc::kernels {

namespace {
int DivUp(int a, int b) { return (a + b - 1) / b; }
}  // namespace

int PlanTwinCrop(const TwinCropInput& in, const TwinFrame& f, TwinCropPlan* p) {
  const CropRect& r = in.rect;
  if (ChooseDctScale(r.w, r.h, in.min_w, in.min_h) != 8) return kReasonCropScaled;
  const uint32_t ri = f.restart_interval;
  if (ri == 0 || f.mcus_x % ri != 0) return kReasonCropIntervals;
  if (r.w <= 0 || r.h <= 0 || r.x < 0 || r.y < 0 || r.x + r.w > f.width || r.y + r.h > f.height)
    return kReasonCropGeometry;
  // jpeg_crop_scanline's buffer: from the iMCU column holding the crop's left edge (an MCU is
  // 8 x hmax pixels wide; a grayscale image's, whose hmax the parser sets to 1, 8), rows exactly the
  // crop's. With fancy upsampling the CPU path widens it by an iMCU on each side (within the image),
  // keeping the columns its cut makes wrong away from the crop (JpegDecoder::DecodeScaled).
  const int mcu_w = 8 * f.hmax, mcu_h = 8 * f.vmax;
  const int pad = in.fancy ? mcu_w : 0;
  p->region.x = r.x / mcu_w * mcu_w - pad;
  if (p->region.x < 0) p->region.x = 0;
  const int right = r.x + r.w + pad < f.width ? r.x + r.w + pad : f.width;
  p->region.y = r.y;
  p->region.width = right - p->region.x;
  p->region.height = r.h;
  p->region.scale_num = 8;
  SampleParams rebased = in.params;
  RebaseParams(p->region.x, p->region.y, 8, &rebased);
  try {
    CropResizeSpans(*in.spec, in.img_w, in.img_h, rebased, p->region, false, &p->h, &p->v);
  } catch (const Error&) {
    return kReasonCropGeometry;  // the CPU path reports it, naming the sample
  }
  p->ksize_h = ResampleMaxTaps(p->h.filter, p->h.in0, p->h.in1, p->h.out_size);
  p->ksize_v = ResampleMaxTaps(p->v.filter, p->v.in0, p->v.in1, p->v.out_size);
  if (p->ksize_h > kTwinMaxTaps || p->ksize_v > kTwinMaxTaps) return kReasonTooLarge;
  const int per_row = int(f.mcus_x / ri);
  p->col0 = p->region.x / mcu_w / int(ri);
  p->col1 = DivUp(DivUp(p->region.x + p->region.width, mcu_w), int(ri));
  if (p->col1 > per_row) p->col1 = per_row;
  // Fancy upsampling reads the chroma rows above and below: one MCU row of margin, where the image has
  // one, keeps the crop frame's edges (TwinSample repeats a frame's first and last rows) off the region.
  const int vpad = in.fancy ? 1 : 0;
  p->row0 = p->region.y / mcu_h - vpad;
  if (p->row0 < 0) p->row0 = 0;
  p->row1 = DivUp(p->region.y + p->region.height, mcu_h) + vpad;
  if (p->row1 > f.mcus_y) p->row1 = f.mcus_y;
  p->x0 = p->col0 * int(ri) * mcu_w;
  p->y0 = p->row0 * mcu_h;
  return kReasonNone;
}

TwinFrame TwinCropFrame(const TwinFrame& f, const TwinCropPlan& p) {
  TwinFrame s = f;
  const int mcu_w = 8 * f.hmax, mcu_h = 8 * f.vmax;
  const int per_row = int(f.mcus_x / f.restart_interval);
  s.mcus_x = uint16_t((p.col1 - p.col0) * int(f.restart_interval));
  s.mcus_y = uint16_t(p.row1 - p.row0);
  // Clipped at the image's right and bottom edges, so that partial MCUs there stay partial.
  s.width = uint16_t(p.col1 == per_row ? f.width - p.x0 : s.mcus_x * mcu_w);
  s.height = uint16_t(p.row1 == f.mcus_y ? f.height - p.y0 : s.mcus_y * mcu_h);
  uint32_t blocks = 0;
  for (int c = 0; c < f.ncomp; ++c) {
    TwinComponent& k = s.comp[c];
    k.blocks_w = uint16_t(s.mcus_x * k.h);
    k.blocks_h = uint16_t(s.mcus_y * k.v);
    k.block_offset = blocks;
    blocks += uint32_t(k.blocks_w) * k.blocks_h;
  }
  s.total_blocks = blocks;
  s.intervals = uint32_t(p.col1 - p.col0) * uint32_t(p.row1 - p.row0);
  return s;
}

}  // namespace dsc::kernels
