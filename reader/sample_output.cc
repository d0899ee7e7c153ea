// SampleProcessor's output side (reader/sample_processor.h): a sample's pixels, once decoded, into
// its batch slot in the output's dtype and layout: the fused planes path (YCbCr rows through the
// geometry, flip, translate, cutout and normalisation one output row at a time), packed RGB rows,
// and the one-channel pass.
#include <algorithm>
#include <cstring>

#include "kernels/color.h"
#include "kernels/crop_resize.h"
#include "kernels/normalize_row.h"
#include "kernels/transform_ops.h"
#include "reader/sample_processor.h"

namespace dsc {

namespace {
// NHWC output through a per-channel table (float32 or IEEE-half bits): out[3x + c] = table[256c + v].
template <typename T>
void LookupInterleaved(const uint8_t* rgb, size_t w, const T* table, T* out) {
  for (size_t x = 0; x < w * 3; x += 3) {
    out[x] = table[rgb[x]];
    out[x + 1] = table[256 + rgb[x + 1]];
    out[x + 2] = table[512 + rgb[x + 2]];
  }
}

}  // namespace

void SampleProcessor::WriteGray(uint64_t index, uint8_t* dst) {
  const size_t n = size_t(gray_out_.width) * gray_out_.height;
  const uint8_t* rgb = gray_rgb_.data();
  const bool own = ds_.entry(index, gray_out_.image).channels == 1;  // decoded to R = G = B: exact
  auto value = [&](size_t i) { return own ? rgb[3 * i] : kernels::Gray(rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2]); };
  switch (gray_out_.dtype) {
    case DType::kUint8:
      for (size_t i = 0; i < n; ++i) dst[i] = value(i);
      return;
    case DType::kFloat32: {
      float* o = reinterpret_cast<float*>(dst);
      for (size_t i = 0; i < n; ++i) o[i] = gray_out_.table[value(i)];  // channel 0's normalisation
      return;
    }
    case DType::kFloat16: {
      uint16_t* o = reinterpret_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) o[i] = gray_out_.half[value(i)];
      return;
    }
  }
}

void SampleProcessor::EmitPlanes(const kernels::SampleParams& p, const kernels::JpegPlanes& jp, uint8_t* dst,
                                 SampleForm* form) {
  // Planes where they are fewer bytes than RGB rows: a 4:4:4 JPEG is as large either way, so it
  // travels as rows (converted here, not on the loader's machine).
  const bool full_chroma = jp.components == 3 && jp.hshift[1] == 0 && jp.vshift[1] == 0 && jp.hshift[2] == 0 &&
                           jp.vshift[2] == 0;
  if (transforms_) {  // the RGB image for the transforms, then the rest as for any decoded image
    if (form) *form = SampleForm::kRgb;
    const size_t w = out_.width, h = out_.height, n = w * h;
    if (transformed_.size() < 3 * n) transformed_.resize(3 * n);
    // Transforms that run on planes (colour jitter) take the converted planes as they are, and the
    // output rows are assembled from them: no packing and unpacking of every pixel.
    uint8_t* pl = planar_transforms_ ? transformed_.data() : nullptr;
    if (pl && jp.components == 3) {  // the whole image in one call (kernels::YccRowsToPlanes)
      ycc_rows_.resize(h);
      for (size_t y = 0; y < h; ++y) {
        kernels::YccRow& q = ycc_rows_[y];
        q = kernels::YccRow{};
        q.y = jp.plane[0] + y * jp.stride[0];
        q.cb = jp.plane[1] + (y >> jp.vshift[1]) * jp.stride[1];
        q.cr = jp.plane[2] + (y >> jp.vshift[2]) * jp.stride[2];
        q.hshift = jp.hshift[1], q.w = int(w);
      }
      kernels::YccRowsToPlanes(ycc_rows_.data(), h, pl, pl + n, pl + 2 * n, w);
    } else {  // row by row: into the planes, or converted and packed
      if (!pl && planar_.size() < 3 * w) planar_.resize(3 * w);
      for (size_t y = 0; y < h; ++y) {
        const uint8_t* Y = jp.plane[0] + y * jp.stride[0];
        uint8_t* r = pl ? pl + y * w : planar_.data();
        uint8_t* g = pl ? r + n : r + w;
        uint8_t* b = pl ? g + n : g + w;
        if (jp.components == 3) {
          kernels::ColorConvertRow(Y, jp.plane[1] + (y >> jp.vshift[1]) * jp.stride[1],
                                   jp.plane[2] + (y >> jp.vshift[2]) * jp.stride[2], w, jp.hshift[1], r, g, b);
        } else {
          std::memcpy(r, Y, w);
          std::memcpy(g, Y, w);
          std::memcpy(b, Y, w);
        }
        if (!pl) kernels::InterleaveRow(r, g, b, w, transformed_.data() + y * 3 * w, false);
      }
    }
    if (pl) {
      try {
        transforms_->ApplyPlanes(kernels::PlanesU8{{pl, pl + n, pl + 2 * n}, int(w), int(h)}, current_.seed,
                                 current_.epoch, current_.index, transform_scratch_);
      } catch (const Error& ex) {
        throw Error(ds_.path() + ": sample " + std::to_string(current_.index) + ": " + ex.what());
      }
      const bool planar_out = out_.dtype == DType::kFloat32 && out_.layout == Layout::kNCHW;
      if (kernels::YccRowIsFast(w, 0) && (planar_out || out_.dtype == DType::kUint8)) {
        // The fused kernels read the planes as RGB rows (YccRow::rgb): shift, cut, fill, mirror and
        // normalise or interleave in one pass over the image.
        ycc_rows_.resize(h);
        for (size_t y = 0; y < h; ++y) {
          const OutputRow g = RowOf(p, int(y));
          kernels::YccRow& q = ycc_rows_[y];
          q = kernels::YccRow{};
          if (g.inside) q.y = pl + size_t(g.ty) * w, q.cb = q.y + n, q.cr = q.y + 2 * n;
          q.rgb = true, q.w = int(w);
          q.shift = g.shift, q.lo = g.lo, q.hi = g.hi, q.cut_from = g.cut_from, q.cut_to = g.cut_to;
        }
        if (planar_out) {
          float* f = reinterpret_cast<float*>(dst);
          kernels::YccRowsToFloat(ycc_rows_.data(), h, spec_.fill, out_.scale, out_.bias, p.flip != 0, f, f + n,
                                  f + 2 * n, w);
        } else {
          kernels::YccRowsToRgb(ycc_rows_.data(), h, spec_.fill, p.flip != 0, dst, 3 * w);
        }
        return;
      }
      WritePlaneRows(p, [pl, w](int ty) { return pl + size_t(ty) * w; }, n, dst);
      return;
    }
    ApplyTransforms(transformed_.data(), int(w), int(h), current_.index, current_.seed, current_.epoch);
    WriteRows(p, transformed_.data(), int(w), int(h), int(3 * w), dst);
    return;
  }
  if (form && !full_chroma) {
    *form = PackPlanes(jp, out_.width, out_.height, dst);
    return;
  }
  if (form) *form = SampleForm::kRgb;
  WritePlanes(p, jp, dst);
}

void SampleProcessor::WritePlanes(const kernels::SampleParams& p, const kernels::JpegPlanes& jp, uint8_t* dst) {
  const int ow = int(out_.width), oh = int(out_.height);
  const size_t w = size_t(ow), plane = size_t(ow) * size_t(oh);
  // planar_: the converted source row (3 x w), then the three output rows being assembled (3 x w).
  if (planar_.size() < 6 * w) planar_.resize(6 * w);
  uint8_t* src_rgb = planar_.data();
  const bool mirror = p.flip != 0;  // a flipped row is built mirrored (RowOf)
  const bool planar_out = out_.dtype == DType::kFloat32 && out_.layout == Layout::kNCHW;
  // From YCbCr: each row converted, shifted, cut and normalised (float32 NCHW) or interleaved (the
  // others) in one pass where the CPU has a vector path for it (kernels::YccRowsToFloat / YccRowsToRgb,
  // the whole image in one call); else converted to planes, assembled, then normalised or interleaved.
  const bool fused = jp.components == 3 && kernels::YccRowIsFast(w, jp.hshift[1]);
  // An output row's source row and bounds (RowOf), for the fused kernels.
  auto ycc_row = [&](const OutputRow& g) {
    kernels::YccRow q;
    if (g.inside) {
      q.y = jp.plane[0] + size_t(g.ty) * jp.stride[0];
      q.cb = jp.plane[1] + size_t(g.ty >> jp.vshift[1]) * jp.stride[1];
      q.cr = jp.plane[2] + size_t(g.ty >> jp.vshift[2]) * jp.stride[2];
    }
    q.hshift = jp.hshift[1];
    q.w = ow;
    q.shift = g.shift, q.lo = g.lo, q.hi = g.hi, q.cut_from = g.cut_from, q.cut_to = g.cut_to;
    return q;
  };
  if (fused && (planar_out || out_.dtype == DType::kUint8)) {  // the whole image in one call
    ycc_rows_.resize(size_t(oh));
    for (int y = 0; y < oh; ++y) ycc_rows_[size_t(y)] = ycc_row(RowOf(p, y));
    if (planar_out) {
      float* f = reinterpret_cast<float*>(dst);
      kernels::YccRowsToFloat(ycc_rows_.data(), size_t(oh), spec_.fill, out_.scale, out_.bias, mirror, f, f + plane,
                              f + 2 * plane, w);
    } else {  // uint8 NHWC, straight into the batch
      kernels::YccRowsToRgb(ycc_rows_.data(), size_t(oh), spec_.fill, mirror, dst, 3 * w);
    }
    return;
  }
  if (fused) {  // another dtype or layout: each row through row_
    for (int y = 0; y < oh; ++y) {
      kernels::YccRowToRgb(ycc_row(RowOf(p, y)), spec_.fill, mirror, row_.data());
      EmitRow(row_.data(), y, dst);
    }
    return;
  }
  // Each source row converted to planes (src_rgb) as it is needed.
  WritePlaneRows(
      p,
      [&](int ty) {
        const uint8_t* Y = jp.plane[0] + size_t(ty) * jp.stride[0];
        if (jp.components == 3) {
          kernels::ColorConvertRow(Y, jp.plane[1] + size_t(ty >> jp.vshift[1]) * jp.stride[1],
                                   jp.plane[2] + size_t(ty >> jp.vshift[2]) * jp.stride[2], w, jp.hshift[1], src_rgb,
                                   src_rgb + w, src_rgb + 2 * w);
        } else {
          for (int c = 0; c < 3; ++c) std::memcpy(src_rgb + c * w, Y, w);
        }
        return static_cast<const uint8_t*>(src_rgb);
      },
      w, dst);
}

template <typename RowAt>
void SampleProcessor::WritePlaneRows(const kernels::SampleParams& p, RowAt row_at, size_t pstride, uint8_t* dst) {
  const int ow = int(out_.width), oh = int(out_.height);
  const size_t w = size_t(ow), plane = size_t(ow) * size_t(oh);
  if (planar_.size() < 6 * w) planar_.resize(6 * w);
  uint8_t* out_rgb = planar_.data() + 3 * w;  // WritePlanes converts source rows into the first 3 * w
  const bool mirror = p.flip != 0;
  const bool planar_out = out_.dtype == DType::kFloat32 && out_.layout == Layout::kNCHW;
  for (int y = 0; y < oh; ++y) {
    const OutputRow g = RowOf(p, y);
    const int shift = g.shift, lo = g.lo, hi = g.hi, cut_from = g.cut_from, cut_to = g.cut_to;
    const uint8_t* src = g.inside ? row_at(g.ty) : nullptr;
    // The output row's three planes: the source row itself unless it is shifted or cut.
    const uint8_t* planes = src;
    size_t ps = pstride;
    if (!g.inside || shift != 0 || cut_to > cut_from) {
      planes = out_rgb;
      ps = w;
      for (size_t c = 0; c < 3; ++c) {
        uint8_t* row = out_rgb + c * w;
        if (!g.inside) {
          std::memset(row, spec_.fill[c], w);
        } else {
          std::memset(row, spec_.fill[c], size_t(lo));
          std::memset(row + hi, spec_.fill[c], size_t(ow - hi));
          std::memcpy(row + lo, src + c * pstride + (lo - shift), size_t(hi - lo));
        }
        if (cut_to > cut_from) std::memset(row + cut_from, spec_.fill[c], size_t(cut_to - cut_from));
      }
    }
    if (planar_out) {
      for (size_t c = 0; c < 3; ++c)
        kernels::NormalizePlaneRow(planes + c * ps, w, reinterpret_cast<float*>(dst) + c * plane + size_t(y) * w,
                                   out_.scale[c], out_.bias[c], mirror);
    } else {  // interleaved (and mirrored) once, straight into a uint8 batch
      const bool direct = out_.dtype == DType::kUint8;
      uint8_t* rgb = direct ? dst + size_t(y) * w * 3 : row_.data();
      kernels::InterleaveRow(planes, planes + ps, planes + 2 * ps, w, rgb, mirror);
      if (!direct) EmitRow(rgb, y, dst);
    }
  }
}

size_t SampleProcessor::DecodeStride(size_t width) { return (width * 3 + 31) / 32 * 32; }

uint8_t* SampleProcessor::DecodeBuffer(size_t width, size_t height) {
  // libjpeg-turbo's SIMD colour conversion switches to non-temporal stores when a row is 32-byte
  // aligned; reading those rows straight back then runs from memory instead of the cache. Rows
  // therefore start 16 bytes past a 32-byte boundary: the stride
  // is a multiple of 32 and the base is offset by 16.
  const size_t need = DecodeStride(width) * height + 64;
  if (decode_buf_.size() < need) decode_buf_.resize(need);
  const uintptr_t base = reinterpret_cast<uintptr_t>(decode_buf_.data());
  return decode_buf_.data() + ((32 - base % 32) % 32) + 16;
}

void SampleProcessor::WriteRows(const kernels::SampleParams& p, const uint8_t* src, int sw, int sh, int stride,
                                uint8_t* dst) {
  const int ow = int(out_.width), oh = int(out_.height);
  if (sw != ow || sh != oh) throw Error("internal: a " + std::to_string(sw) + "x" + std::to_string(sh) + " image for a " +
                                        std::to_string(ow) + "x" + std::to_string(oh) + " output");
  WriteRowsAt(p, [src, stride](int ty) { return src + size_t(ty) * size_t(stride); }, dst);
}

// Where output row y of a sample with parameters p comes from (OutputPixel, kernels/augment.h): a
// flipped row is built mirrored (out[x] = row[ow - 1 - x], which makes the translate a plain shift by
// -dx, and mirrors the cutout) and reversed when it is written.
inline SampleProcessor::OutputRow SampleProcessor::RowOf(const kernels::SampleParams& p, int y) const {
  const int ow = int(out_.width), oh = int(out_.height);
  OutputRow g;
  g.shift = p.flip ? -p.dx : p.dx;
  g.ty = y - p.dy;
  g.inside = g.ty >= 0 && g.ty < oh;
  if (g.inside) {  // 0 <= x - shift < ow
    g.lo = g.shift > 0 ? std::min(g.shift, ow) : 0;
    g.hi = g.shift < 0 ? std::max(ow + g.shift, 0) : ow;
  }
  if (p.cut_x >= 0 && y >= p.cut_y && y < p.cut_y + spec_.cutout) {
    g.cut_from = p.cut_x;
    g.cut_to = std::min(ow, p.cut_x + spec_.cutout);
    if (p.flip) {
      const int f = ow - g.cut_to, t = ow - g.cut_from;
      g.cut_from = f;
      g.cut_to = t;
    }
  }
  return g;
}

template <typename RowAt>
void SampleProcessor::WriteRowsAt(const kernels::SampleParams& p, RowAt row_at, uint8_t* dst) {
  const int ow = int(out_.width), oh = int(out_.height);
  const bool mirror = p.flip != 0;
  uint8_t* row = row_.data();
  for (int y = 0; y < oh; ++y) {
    const OutputRow g = RowOf(p, y);
    const bool cut = g.cut_to > g.cut_from;
    if (g.inside && g.shift == 0 && !cut) {  // the source row as it is: no copy to assemble it
      const uint8_t* s = row_at(g.ty);
      if (mirror) EmitMirroredRow(s, y, dst);
      else EmitRow(s, y, dst);
      continue;
    }
    // Assembled (mirrored when flipped) and reversed after normalisation, where reversing is a few
    // vector permutes.
    for (int x = 0; x < g.lo; ++x) std::memcpy(row + x * 3, spec_.fill, 3);
    for (int x = std::max(g.hi, g.lo); x < ow; ++x) std::memcpy(row + x * 3, spec_.fill, 3);
    if (g.hi > g.lo) std::memcpy(row + g.lo * 3, row_at(g.ty) + (g.lo - g.shift) * 3, size_t(g.hi - g.lo) * 3);
    for (int x = g.cut_from; x < g.cut_to; ++x) std::memcpy(row + x * 3, spec_.fill, 3);
    if (mirror) EmitMirroredRow(row, y, dst);
    else EmitRow(row, y, dst);
  }
}

void SampleProcessor::EmitMirroredRow(const uint8_t* rgb, int y, uint8_t* dst) {
  const size_t w = out_.width, plane = size_t(out_.width) * out_.height;
  if (out_.dtype == DType::kFloat32 && out_.layout == Layout::kNCHW) {
    float* r = reinterpret_cast<float*>(dst) + size_t(y) * w;
    kernels::NormalizeRowPlanar(rgb, w, r, r + plane, r + 2 * plane, out_.scale, out_.bias, /*reverse=*/true);
    return;
  }
  if (out_.dtype == DType::kUint8) {  // straight into the batch
    kernels::MirrorRgbRow(rgb, w, dst + size_t(y) * w * 3);
    return;
  }
  kernels::MirrorRgbRow(rgb, w, mirrored_.data());  // rgb may be row_
  EmitRow(mirrored_.data(), y, dst);
}

void SampleProcessor::EmitPixels(const uint8_t* rgb, size_t at, size_t n, uint8_t* dst) {
  const size_t plane = size_t(out_.width) * out_.height;
  const float* t = out_.table;
  switch (out_.dtype) {
    case DType::kUint8:
      std::memcpy(dst + at * 3, rgb, n * 3);
      return;
    case DType::kFloat32: {
      float* o = reinterpret_cast<float*>(dst);
      if (out_.layout == Layout::kNCHW) {
        float* r = o + at;
        kernels::NormalizeRowPlanar(rgb, n, r, r + plane, r + 2 * plane, out_.scale, out_.bias);
      } else {
        LookupInterleaved(rgb, n, t, o + at * 3);
      }
      return;
    }
    case DType::kFloat16: {
      const uint16_t* h = out_.half;
      uint16_t* o = reinterpret_cast<uint16_t*>(dst);
      if (out_.layout == Layout::kNCHW) {
        uint16_t* r = o + at;
        for (size_t x = 0; x < n; ++x) {
          r[x] = h[rgb[x * 3]];
          r[x + plane] = h[256 + rgb[x * 3 + 1]];
          r[x + 2 * plane] = h[512 + rgb[x * 3 + 2]];
        }
      } else {
        LookupInterleaved(rgb, n, h, o + at * 3);
      }
      return;
    }
  }
}

}  // namespace dsc
