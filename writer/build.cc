#include "writer/build.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>

#include "format/error.h"
#include "format/layout.h"
#include "format/optional.h"
#include "kernels/cpu.h"
#include "writer/atomic_file.h"
#include "writer/encode_pool.h"
#include "writer/file_builder.h"
#include "writer/source.h"
#include "writer/source_ffcv.h"
#include "writer/source_wds.h"

namespace dsc::writer {

namespace {

void DrawProgress(size_t done, size_t total, double seconds) {
  const int width = 30;
  int filled = total ? int(width * done / total) : width;
  std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu  %.0f images/s ", filled, "##############################",
               width - filled, "", done, total, seconds > 0 ? done / seconds : 0.0);
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace

std::string ShardLine(uint32_t index, uint32_t count, uint64_t source_samples) {
  if (count == 0) return "";
  return std::string(kShardKey) + "=" + std::to_string(index) + "/" + std::to_string(count) + " of " +
         std::to_string(source_samples) + "\n";
}

ShardRange ShardOf(const BuildOptions& o, size_t all) {
  if (o.shard_count == 0) return {0, all};
  if (o.shard_index >= o.shard_count)
    throw OptionError("--shard " + std::to_string(o.shard_index) + "/" + std::to_string(o.shard_count) +
                      ": the part number runs from 0 to " + std::to_string(o.shard_count - 1));
  return {size_t(uint64_t(o.shard_index) * all / o.shard_count), size_t(uint64_t(o.shard_index + 1) * all / o.shard_count)};
}

BuildReport Build(const std::string& source, const std::string& out, const BuildOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  auto log = o.log ? o.log : [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
  o.encode.Validate();
  if (o.jpeg_tables != "shared" && o.jpeg_tables != "inline") throw OptionError("--jpeg-tables must be 'shared' or 'inline'");
  if (o.block_size < format::kPageSize || (o.block_size & (o.block_size - 1)) || o.block_size > (1ull << 31))
    throw OptionError("--block-size must be a power of two between 4096 and 2^31");
  // Each thread has an encoder and 512 samples in the window: a typo must not become a million threads.
  if (o.threads < 0 || o.threads > 1024) throw OptionError("--threads must be 0 (all cores) to 1024, not " + std::to_string(o.threads));
  auto src = o.ffcv_bytes ? OpenFfcv(o.ffcv_bytes(source)) : OpenSource(source, o.format, o.split, o.max_file_size);
  const auto ignored = src->ignored();
  if (!ignored.empty()) {
    log("warning: " + std::to_string(ignored.size()) + " entr" + (ignored.size() == 1 ? "y" : "ies") + " of the source not included:");
    for (size_t i = 0; i < ignored.size(); ++i) log("  ignored: " + ignored[i]);
  }
  for (const auto& n : src->notes()) log("note: " + n);
  const int threads = o.threads > 0 ? o.threads : kernels::UsableCores();
  {  // the finished file replaces `out`: it must not be what the build reads
    std::error_code ec;
    if (std::filesystem::exists(out, ec) && std::filesystem::equivalent(source, out, ec))
      throw Error(out + ": is the source itself; name another output file");
    if (const std::string s = src->SampleFileAt(out); !s.empty())
      throw Error(out + ": is the source's sample " + s + "; name another output file");
  }
  if (FfcvNeedsTypedFields(*src)) return BuildFfcvTyped(*src, out, o);  // FFCV's arrays, JSON, bytes: dsc::Writer
  if (WdsNeedsTypedFields(*src)) return BuildWdsTyped(*src, out, o);    // WebDataset's KEY.json as text

  AtomicFile file(out);
  FileBuilder builder(&file, o.block_size, o.jpeg_tables == "shared");
  BuildReport rep;
  rep.format = src->format();
  const size_t all = src->size();
  const ShardRange range = ShardOf(o, all);
  const size_t begin = range.begin, end = range.end;
  const size_t total = end - begin;
  // A window's encoded payloads are all held until it is packed, so the window is sized in bytes: as
  // many samples as kWindowBytes holds at the mean payload size seen so far (4 to 512 per thread;
  // the first window is small, to measure). 512 per thread alone held 18 GB of raw photos on 64
  // cores. The windows do not change the output: samples are packed in source order.
  constexpr double kWindowBytes = 256 << 20;
  const size_t min_window = 4 * size_t(threads), max_window = 512 * size_t(threads);
  size_t window = 16 * size_t(threads);
  double seen_bytes = 0;
  uint64_t seen = 0;
  std::vector<Slot> slots;
  format::RestartStats restart;
  if (o.encode.restart_enabled()) {
    const auto p = o.encode.restart_policy();
    restart.mode = p.fixed ? format::RestartStats::kFixed : format::RestartStats::kAuto;
    restart.target = uint32_t(p.fixed ? p.fixed : p.target);
    restart.min_mcus = uint64_t(p.min_mcus);
  }
  {
    WindowPool pool(*src, o.encode, threads);
    for (size_t first = 0; first < total; first += slots.size()) {
      slots.clear();  // no payload buffer of the last window outlives it
      slots.resize(std::min(window, total - first));
      pool.Run(begin + first, &slots);
      for (size_t i = 0; i < slots.size(); ++i) {
        seen_bytes += double(slots[i].enc.payload.size());
        ++seen;
        if (!slots[i].error.empty()) {
          if (slots[i].machine) throw Error(slots[i].error);
          if (!o.skip_invalid) throw Error(slots[i].error + " (use --skip-invalid to skip such samples)");
          log("skipped: " + slots[i].error);
          ++rep.skipped;
          continue;
        }
        builder.Add(slots[i].enc, slots[i].labels);
        CountRestart(slots[i].enc, &restart);
        ++rep.encodings[format::EncodingName(format::Encoding(slots[i].enc.encoding))];
      }
      if (o.progress) DrawProgress(first + slots.size(), total, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      window = std::clamp(size_t(kWindowBytes / std::max(1.0, seen_bytes / double(seen))), min_window, max_window);
    }
  }
  if (builder.samples() == 0 && o.shard_count > 0 && total == 0)
    throw Error(source + ": part " + std::to_string(o.shard_index) + " of " + std::to_string(o.shard_count) +
                " is empty (the source has " + std::to_string(all) + " samples): use fewer parts");
  if (builder.samples() == 0) throw Error(source + ": no samples to write (all were skipped)");

  format::Meta meta;
  meta.fields.push_back({format::FieldType::kImage, "image", {}});
  for (const auto& f : src->label_fields()) meta.fields.push_back({format::FieldType::kLabel, f.name, f.classes});
  meta.build_options = SortedLines("block_size=" + std::to_string(o.block_size) + "\n" + o.encode.Describe() +
                                   "format=" + src->format() + "\n" + "jpeg_tables=" + o.jpeg_tables + "\n" +
                                   "skip_invalid=" + (o.skip_invalid ? "1" : "0") + "\n" + "split=" + o.split + "\n" +
                                   ShardLine(o.shard_index, o.shard_count, all));
  meta.skipped_count = rep.skipped;
  // Format 1.1's restart section, only when some payload got markers: a build that changed nothing
  // (CIFAR's 32x32 images, --restart-interval none) stays a 1.0 file.
  if (restart.images > 0) builder.AddOptional(format::kRestartSection, format::EncodeRestartStats(restart));
  rep.restart_images = restart.images;
  rep.restart_whole_row = restart.whole_row;
  rep.file_size = builder.Finish(meta);
  file.Commit();
  rep.samples = builder.samples();
  rep.payload_bytes = builder.payload_bytes();  // as stored, as dsc info counts them
  rep.jpeg_tables = builder.jpeg_table_sets();
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace dsc::writer
