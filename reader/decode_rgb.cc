#include "reader/decode_rgb.h"

#include <zstd.h>

#include <cstring>

#include "format/error.h"
#include "format/layout.h"

namespace dsc {

void DecodeSampleRGB(const Dataset& ds, uint64_t i, kernels::JpegCodec* codec, std::vector<uint8_t>* scratch,
                     std::vector<uint8_t>* rgb) {
  const format::IndexEntry e = ds.entry(i);
  const Payload p = ds.ReadPayload(i, scratch);
  const size_t n = size_t(e.width) * e.height * 3;
  rgb->resize(n);
  auto fail = [&](const std::string& why) {
    return Error(ds.path() + ": sample " + std::to_string(i) + ": " + why);
  };
  switch (format::Encoding(e.encoding)) {
    case format::Encoding::kRaw:
      std::memcpy(rgb->data(), p.data, n);
      return;
    case format::Encoding::kRawZstd: {
      unsigned long long want = ZSTD_getFrameContentSize(p.data, p.size);
      if (want != n) throw fail("zstd frame does not hold " + std::to_string(n) + " bytes");
      size_t r = ZSTD_decompress(rgb->data(), n, p.data, p.size);
      if (ZSTD_isError(r) || r != n) throw fail(std::string("corrupt zstd payload: ") + (ZSTD_isError(r) ? ZSTD_getErrorName(r) : "short"));
      return;
    }
    case format::Encoding::kJpeg: {
      kernels::JpegInfo info;
      if (!codec->ReadHeader(p.data, p.size, &info)) throw fail("corrupt JPEG: " + codec->error());
      if (info.width != e.width || info.height != e.height) throw fail("JPEG size disagrees with the index");
      if (!codec->DecodeRGB(p.data, p.size, info, rgb->data())) throw fail("corrupt JPEG: " + codec->error());
      return;
    }
  }
  throw fail("unknown encoding");
}

}  // namespace dsc
