// Typed fields (format 1.2) in batches: which fields a loader delivers and their columns per batch.
// Filled on the consumer's thread when a batch is handed out, from the file's columns section (fixed
// fields, no payload page touched) and the blocks (variable fields), by sample index only: the same
// for any thread count and for batches decoded by remote workers.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "format/file_view.h"
#include "reader/batch_memory.h"

namespace dsc {

// The field indices for LoaderOptions::fields (`names`, in that order), or every typed field of the
// file (not the image and labels) when `names` is empty. OptionError for a name the file lacks.
std::vector<size_t> SelectFields(const format::FileView& v, const std::vector<std::string>& names);

// Fills b's field columns for its first `len` samples (b->indices).
void FillFieldColumns(const format::FileView& v, const std::vector<size_t>& fields, uint32_t len, BatchBuffer* b);

}  // namespace dsc
