#include "format/checksum_xxh.inc"

namespace dsc::checksum_impl {

const Functions& Baseline() {
  static const Functions f{Hash, Create, Destroy, Reset, Update, Digest};
  return f;
}

}  // namespace dsc::checksum_impl
