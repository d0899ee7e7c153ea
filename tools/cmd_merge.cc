#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "format/error.h"
#include "tools/commands.h"
#include "writer/merge.h"

namespace dsc::tools {

int CmdMerge(int argc, char** argv) {
  cli::Options opts("dsc merge", "Join the parts of a sharded build into one file, byte-identical to a\n"
                    "one-machine build of the same source and options (payloads are copied, not re-encoded).\n\n"
                    "  for i in 0 1 2 3; do dsc build imagenet/ part-$i.beton --shard $i/4; done\n"
                    "  dsc merge part-*.beton imagenet.beton\n");
  opts.positional_help("PART... OUT");
  opts.add_options()
      ("quiet", "no progress line")
      ("h,help", "show this help")
      ("files", "", cli::value<std::vector<std::string>>());
  opts.parse_positional({"files"});
  std::vector<std::string> files;
  bool progress = false;
  try {
    auto r = Parse(opts, argc, argv);
    RejectUnmatched(r);
    if (r.count("help")) {
      std::fputs(opts.help().c_str(), stdout);
      return kExitOk;
    }
    if (r.count("files")) files = r["files"].as<std::vector<std::string>>();
    if (files.size() < 2) throw cli::UsageError("expected one or more PART files and OUT");
    progress = !r.count("quiet") && ::isatty(2);
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "dsc merge: %s\n\n%s", e.what(), opts.help().c_str());
    return kExitUsage;
  }
  const std::string out = files.back();
  files.pop_back();
  try {
    const auto rep = writer::Merge(files, out, {progress});
    std::printf("wrote %s: %llu samples from %llu parts, %.1f MiB, %.2f s (%.0f MB/s)\n", out.c_str(),
                (unsigned long long)rep.samples, (unsigned long long)rep.parts, rep.file_size / 1048576.0, rep.seconds,
                rep.seconds > 0 ? rep.file_size / 1e6 / rep.seconds : 0.0);
    return kExitOk;
  } catch (const OptionError& e) {
    std::fprintf(stderr, "dsc merge: %s\n", e.what());
    return kExitUsage;
  } catch (const Error& e) {
    std::fprintf(stderr, "dsc merge: error: %s\n", e.what());
    return kExitBad;
  }
}

}  // namespace dsc::tools
