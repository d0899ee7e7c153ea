// Compiled with -mavx2 on x86-64 (CMakeLists.txt); elsewhere it offers nothing.
#if defined(__AVX2__)
#include "format/checksum_xxh.inc"

namespace dsc::checksum_impl {

const Functions* Avx2() {
  static const Functions f{Hash, Create, Destroy, Reset, Update, Digest};
  return &f;
}

}  // namespace dsc::checksum_impl
#else
#include "format/checksum_impl.h"

namespace dsc::checksum_impl {

const Functions* Avx2() { return nullptr; }

}  // namespace dsc::checksum_impl
#endif
