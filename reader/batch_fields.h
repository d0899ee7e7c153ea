// Typed fields (format 1.2) in batches: which fields a loader delivers and their columns per batch.
// Filled on the consumer's thread when a batch is handed out, from the file's columns section (fixed
// fields, no payload page touched) and the blocks (variable fields), by sample index only: the same
// for any thread count and for batches decoded by remote workers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "format/file_view.h"
#include "kernels/augment.h"
#include "reader/batch_memory.h"

namespace dsc {

// The field indices for LoaderOptions::fields (`names`, in that order), or every typed field of the
// file (not the images and labels) when `names` is empty. OptionError for a name the file lacks or an
// image field. `image`: the image field the loader decodes; masks follow the first image only, so
// with another they are left out of the default and refused by name.
std::vector<size_t> SelectFields(const format::FileView& v, const std::vector<std::string>& names, uint32_t image = 0);

// Joint geometry: which delivered fields follow the image (LoaderOptions::boxes, and every mask), and
// how it was drawn.
struct BoxGeometry {
  static constexpr size_t kNone = SIZE_MAX;
  size_t boxes = kNone;             // position of the box field among the delivered fields
  std::vector<size_t> companions;   // positions of the per-box fields
  std::vector<size_t> masks;        // positions of the mask fields (format 1.2 type 8)
  std::vector<size_t> points;       // positions of the point fields (LoaderOptions::points)
  kernels::AugmentSpec spec;        // the loader's whole augmentation (what MakeParams drew from)
  uint64_t seed = 0;
  bool active() const { return boxes != kNone; }
  bool moves_fields() const { return active() || !masks.empty() || !points.empty(); }
};
// Checks `names` against the file and the delivered `fields`: the first a variable float32 array of
// trailing shape [4], the others variable fields; OptionError naming the field otherwise. Notes every
// delivered mask, which always follows its image.
BoxGeometry SelectBoxes(const format::FileView& v, const std::vector<size_t>& fields, const std::vector<std::string>& names,
                        const kernels::AugmentSpec& spec, uint64_t seed);
// Checks LoaderOptions::points against the file and the delivered fields (float32 arrays whose last
// dimension is 2 or 3, not the box field) and notes them in *g; OptionError naming the field otherwise.
void SelectPoints(const format::FileView& v, const std::vector<size_t>& fields, const std::vector<std::string>& names,
                  BoxGeometry* g);

// Fills b's field columns for its first `len` samples (b->indices). With `geo` active, the boxes of each
// sample are mapped through the parameters its image was drawn with (epoch `epoch`), those left
// without area dropped, with the same rows of the companion fields. Masks are decoded and take the
// same crop, resize, flip and translate (nearest neighbour): a fixed column [len, H, W] (or
// [len, H, W, 3]) of the batch's image size.
void FillFieldColumns(const format::FileView& v, const std::vector<size_t>& fields, uint32_t len, BatchBuffer* b,
                      const BoxGeometry& geo = {}, uint64_t epoch = 0);

}  // namespace dsc
