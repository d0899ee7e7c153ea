#include <unistd.h>

#include <cstdio>
#include <string>

#include "format/error.h"
#include "kernels/limits.h"
#include "tools/commands.h"
#include "writer/build.h"
#include "writer/coco.h"
#include "writer/seg_build.h"
#include "writer/table_build.h"

namespace dsc::tools {

namespace {

// "I/N" with 0 <= I < N <= 1,000,000.
void ParseShard(const std::string& text, uint32_t* index, uint32_t* count) {
  unsigned long long i = 0, n = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%llu/%llu%c", &i, &n, &tail) != 2 || text.find_first_of("+- ") != std::string::npos)
    throw cli::UsageError("--shard " + text + ": expected I/N, e.g. 0/8");
  if (n == 0 || n > 1000000 || i >= n)
    throw cli::UsageError("--shard " + text + ": needs 1 <= N <= 1000000 and 0 <= I < N");
  *index = uint32_t(i);
  *count = uint32_t(n);
}

}  // namespace

int CmdBuild(int argc, char** argv) {
  cli::Options opts("dsc build", "Compile a dataset into one indexed, checksummed file.\n"
                    "SRC is a CIFAR-10/100 download folder (binary or python version), a class-per-folder\n"
                    "image tree (ROOT/<class>/*.jpg or ROOT/{train,test}/<class>/*.jpg), or a manifest\n"
                    "file of 'path<TAB>label' lines, or a table of any samples: JSON Lines (.jsonl) or CSV/TSV\n"
                    "with a header (image paths, numbers, lists, strings; typed fields, format 1.2).\n\n"
                    "  dsc build cifar-10-batches-bin/ cifar10-train.beton\n"
                    "  dsc build cifar10/ cifar10-test.beton --split test\n"
                    "  dsc build imagenet/ in.beton --max-resolution 256 --quality 90\n");
  opts.positional_help("SRC OUT");
  opts.add_options()
      ("format", "auto, cifar-binary, cifar-python, tree, manifest, jsonl, csv, tsv, coco, webdataset (tar shards: a .tar, a folder "
       "of them, or shard-{000..099}.tar)", cli::value<std::string>()->default_value("auto"))
      ("schema", "tables: column types, space-separated NAME:TYPE (image, label, text, a dtype such as int64 or float32, "
       "DTYPE[D,..] fixed array, DTYPE[*,D,..] variable array); other columns are inferred", cli::value<std::string>()->default_value(""))
      ("images", "COCO instances files: the folder their \"file_name\"s are in", cli::value<std::string>()->default_value(""))
      ("coco-masks", "COCO instances files: also a mask field of instance ids (instance) or category ids (semantic)",
       cli::value<std::string>()->default_value(""))
      ("masks", "segmentation pairs: a folder of PNG masks, one per image of SOURCE (a folder) with the same stem",
       cli::value<std::string>()->default_value(""))
      ("image-column", "tables: the column of image paths (default: 'image', else the first column of .jpg/.png paths)",
       cli::value<std::string>()->default_value(""))
      ("split", "train or test", cli::value<std::string>()->default_value("train"))
      ("encoding", "jpeg, raw, raw-zstd, auto, or default: raw for pixel sources, JPEG pass-through for JPEG sources",
       cli::value<std::string>()->default_value("default"))
      ("quality", "JPEG quality when encoding", cli::value<int>()->default_value("90"))
      ("subsampling", "444, 422, 420 or gray when encoding (JPEG sources passed through keep theirs: add --reencode)", cli::value<std::string>()->default_value("420"))
      ("max-resolution", "downscale images whose longest side exceeds N (area averaging)", cli::value<int>()->default_value("0"))
      ("center-crop", "crop a centred square of side RATIO x the shorter side", cli::value<double>()->default_value("0"))
      ("reencode", "re-encode JPEG sources even when nothing requires it")
      ("restart-interval", "restart markers in JPEG payloads: auto (intervals dividing each MCU row), none (pass "
       "JPEGs through byte for byte) or N (every N MCUs)", cli::value<std::string>()->default_value("auto"))
      ("jpeg-tables", "shared (store identical JPEG headers once) or inline", cli::value<std::string>()->default_value("shared"))
      ("block-size", "block capacity in bytes (power of two)", cli::value<uint64_t>()->default_value("4194304"))
      ("threads", "encoder threads (0 = all cores)", cli::value<int>()->default_value("0"))
      ("max-pixels", "refuse images of more than N pixels (width x height), checked from the header",
       cli::value<uint64_t>()->default_value(std::to_string(kernels::kDefaultMaxPixels)))
      ("max-file-size", "refuse image files larger than N bytes, checked before reading",
       cli::value<uint64_t>()->default_value(std::to_string(writer::kDefaultMaxFileSize)))
      ("skip-invalid", "skip unreadable samples (each is printed) instead of failing")
      ("shard", "build part I of N (I = 0..N-1) of the source, for `dsc merge` to join: e.g. 3/8",
       cli::value<std::string>())
      ("quiet", "no progress bar")
      ("h,help", "show this help")
      ("src", "", cli::value<std::string>())("out", "", cli::value<std::string>());
  opts.parse_positional({"src", "out"});
  writer::BuildOptions o;
  writer::TableOptions table;
  std::string src, out;
  try {
    auto r = Parse(opts, argc, argv);
    RejectUnmatched(r);
    if (r.count("help")) {
      std::fputs(opts.help().c_str(), stdout);
      return kExitOk;
    }
    if (!r.count("src") || !r.count("out")) throw cli::UsageError("expected SRC and OUT");
    src = r["src"].as<std::string>();
    out = r["out"].as<std::string>();
    o.format = r["format"].as<std::string>();
    o.split = r["split"].as<std::string>();
    o.encode.encoding = r["encoding"].as<std::string>();
    o.encode.quality = r["quality"].as<int>();
    o.encode.subsampling = r["subsampling"].as<std::string>();
    o.encode.max_resolution = r["max-resolution"].as<int>();
    o.encode.center_crop = r["center-crop"].as<double>();
    o.encode.reencode = r.count("reencode") > 0;
    o.encode.restart_interval = r["restart-interval"].as<std::string>();
    o.jpeg_tables = r["jpeg-tables"].as<std::string>();
    o.block_size = r["block-size"].as<uint64_t>();
    o.threads = r["threads"].as<int>();
    o.encode.max_pixels = r["max-pixels"].as<uint64_t>();
    o.max_file_size = r["max-file-size"].as<uint64_t>();
    o.skip_invalid = r.count("skip-invalid") > 0;
    if (r.count("shard")) ParseShard(r["shard"].as<std::string>(), &o.shard_index, &o.shard_count);
    o.images_dir = r["images"].as<std::string>();
    o.masks_dir = r["masks"].as<std::string>();
    o.coco_masks = r["coco-masks"].as<std::string>();
    table.schema = r["schema"].as<std::string>();
    table.image_column = r["image-column"].as<std::string>();
    o.progress = !r.count("quiet") && ::isatty(2);
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "dsc build: %s\n\n%s", e.what(), opts.help().c_str());
    return kExitUsage;
  }
  try {
    const bool is_table = writer::IsTableSource(src, o.format);
    if (!is_table && (!table.schema.empty() || !table.image_column.empty()))
      throw OptionError("--schema and --image-column apply to tables (.jsonl, .csv, --format jsonl/csv/tsv)");
    const bool is_coco = !is_table && writer::IsCocoSource(src, o.format);
    if (!is_coco && !o.images_dir.empty()) throw OptionError("--images applies to COCO instances files (.json, --format coco)");
    if (!is_coco && !o.coco_masks.empty()) throw OptionError("--coco-masks applies to COCO instances files (.json, --format coco)");
    const bool is_seg = !o.masks_dir.empty();
    if (is_seg && (is_table || is_coco)) throw OptionError("--masks pairs a folder of images with a folder of masks");
    auto rep = is_seg     ? writer::BuildSegmentation(src, out, o)
               : is_table ? writer::BuildTable(src, out, o, table)
               : is_coco ? writer::BuildCoco(src, out, o)
                         : writer::Build(src, out, o);
    std::printf("wrote %s: %llu samples from %s (%s), %.1f MiB, %.2f s, %.0f images/s", out.c_str(),
                (unsigned long long)rep.samples, src.c_str(), rep.format.c_str(), rep.file_size / 1048576.0,
                rep.seconds, rep.samples / rep.seconds);
    if (rep.skipped) std::printf(", %llu skipped", (unsigned long long)rep.skipped);
    if (rep.restart_images)
      std::printf(", %llu with restart markers (%llu whole-row)", (unsigned long long)rep.restart_images,
                  (unsigned long long)rep.restart_whole_row);
    std::printf("\n");
    return kExitOk;
  } catch (const OptionError& e) {
    std::fprintf(stderr, "dsc build: %s\n", e.what());
    return kExitUsage;
  } catch (const Error& e) {
    std::fprintf(stderr, "dsc build: error: %s\n", e.what());
    return kExitBad;
  }
}

}  // namespace dsc::tools
