// What every typed-field build shares (tables, COCO, segmentation pairs, FFCV conversions): `dsc
// build`'s options as a dsc::Writer's, and the report once the writer has closed.
#pragma once
#include <chrono>
#include <string>

#include "writer/build.h"
#include "writer/writer.h"

namespace dsc::writer {

// o's encoding, tables, block size and threads; `source_format` is recorded as the build option
// `format`. No on_skip: each build counts and logs its own skips.
inline WriterOptions TypedWriterOptions(const BuildOptions& o, std::string source_format) {
  WriterOptions wo;
  wo.encode = o.encode;
  wo.jpeg_tables = o.jpeg_tables;
  wo.block_size = o.block_size;
  wo.threads = o.threads;
  wo.source_format = std::move(source_format);
  return wo;
}

// Closes `w` (the file appears) and fills rep's size, samples and seconds since t0.
inline void CloseTypedBuild(Writer* w, std::chrono::steady_clock::time_point t0, BuildReport* rep) {
  rep->file_size = w->Close();
  rep->samples = w->written();
  rep->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace dsc::writer
