// dsc convert: an FFCV .beton file to a dsc file (writer/source_ffcv.h), through the same build as
// `dsc build`: parallel, deterministic, atomic; JPEGs passed through (restart markers added losslessly);
// fields beyond an image and labels as typed fields.
#include <unistd.h>

#include <cstdio>

#include "format/error.h"
#include "reader/dataset.h"
#include "reader/file_source.h"
#include "tools/commands.h"
#include "tools/loader_flags.h"
#include "writer/build.h"
#include "writer/source_ffcv.h"

namespace dsc::tools {

int CmdConvert(int argc, char** argv) {
  cli::Options opts("dsc convert", "Convert an FFCV .beton file into a dsc file: the same samples in the same order,\n"
                    "JPEG payloads passed through without re-encoding (restart markers added losslessly, the same\n"
                    "pixels), raw images stored raw, IntFields as labels. Every other FFCV field becomes a typed field\n"
                    "of its name: IntField int64, FloatField float64, NDArrayField an array of its dtype and shape,\n"
                    "JSONField text, BytesField bytes (docs/ffcv-format.md).\n\n"
                    "  dsc convert cifar_train_ffcv.beton cifar_train.beton\n"
                    "  dsc convert https://data.example.org/train_ffcv.beton train.beton --cache-dir /scratch/cache\n");
  opts.positional_help("FFCV_FILE OUT");
  opts.add_options()
      ("restart-interval", "restart markers in JPEG payloads: auto, none (byte for byte) or N (every N MCUs)",
       cli::value<std::string>()->default_value("auto"))
      ("block-size", "block capacity in bytes (power of two)", cli::value<uint64_t>()->default_value("4194304"))
      ("threads", "threads (0 = all cores)", cli::value<int>()->default_value("0"))
      ("quiet", "no progress bar")
      ("h,help", "show this help")
      ("src", "", cli::value<std::string>())("out", "", cli::value<std::string>());
  const LoaderFlagSet source_flags = SourceFlags(true);  // FFCV_FILE may be a URL, streamed through a cache folder
  DeclareLoaderFlags(opts, source_flags, nullptr);
  opts.parse_positional({"src", "out"});
  writer::BuildOptions o;
  DatasetOptions source;
  std::string src, out;
  try {
    auto r = Parse(opts, argc, argv);
    RejectUnmatched(r);
    if (r.count("help")) {
      std::fputs(opts.help().c_str(), stdout);
      return kExitOk;
    }
    if (!r.count("src") || !r.count("out")) throw cli::UsageError("expected FFCV_FILE and OUT");
    src = r["src"].as<std::string>();
    out = r["out"].as<std::string>();
    o.format = "ffcv";
    o.encode.restart_interval = r["restart-interval"].as<std::string>();
    o.block_size = r["block-size"].as<uint64_t>();
    o.threads = r["threads"].as<int>();
    o.progress = !r.count("quiet") && ::isatty(2);
    source = SourceOptions(r, source_flags);
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "dsc convert: %s\n\n%s", e.what(), opts.help().c_str());
    return kExitUsage;
  }
  try {
    if (IsUrl(src))  // the writer reads it through the streaming source (the reader's), which checks it is FFCV
      o.ffcv_bytes = [source](const std::string& url) { return OpenSource(url, source); };
    else if (!writer::IsFfcvFile(src))
      throw Error(src + ": not an FFCV .beton file (dsc build compiles other sources)");
    auto rep = writer::Build(src, out, o);
    std::printf("wrote %s: %llu samples from FFCV file %s, %.1f MiB, %.2f s, %.0f samples/s", out.c_str(),
                (unsigned long long)rep.samples, src.c_str(), rep.file_size / 1048576.0, rep.seconds, rep.samples / rep.seconds);
    for (const auto& [name, n] : rep.encodings) std::printf(", %llu %s", (unsigned long long)n, name.c_str());
    if (rep.restart_images) std::printf(" (%llu with restart markers)", (unsigned long long)rep.restart_images);
    std::printf("\n");
    return kExitOk;
  } catch (const OptionError& e) {
    std::fprintf(stderr, "dsc convert: %s\n", e.what());
    return kExitUsage;
  } catch (const Error& e) {
    std::fprintf(stderr, "dsc convert: error: %s\n", e.what());
    return kExitBad;
  }
}

}  // namespace dsc::tools
