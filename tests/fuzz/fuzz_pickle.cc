// The pickle subset parser behind CIFAR's python version.
#include "format/error.h"
#include "tests/fuzz/fuzz_targets.h"
#include "writer/pickle.h"

DSC_FUZZ_TARGET {
  try {
    auto root = dsc::pickle::Parse(data, size);
    for (const char* key : {"data", "labels", "fine_labels", "label_names"}) {
      if (const auto* v = dsc::pickle::DictGet(*root, key)) {
        try {
          (void)dsc::pickle::ToInts(*v, key);
        } catch (const dsc::Error&) {
        }
        try {
          (void)dsc::pickle::ToStrings(*v, key);
        } catch (const dsc::Error&) {
        }
      }
    }
  } catch (const dsc::Error&) {
  }
  return 0;
}
