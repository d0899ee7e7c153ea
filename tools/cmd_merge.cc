#include <cstdio>
#include <string>
#include <vector>

#include "format/error.h"
#include "tools/commands.h"
#include "writer/merge.h"

namespace dsc::tools {

int CmdMerge(int argc, char** argv) {
  cli::Options opts("dsc merge", "Join the parts of a build split across machines (dsc build SRC part-I.beton --shard I/N)\n"
                    "into OUT, byte for byte the file one dsc build of SRC writes. Payloads are copied, not\n"
                    "re-encoded; the parts may be given in any order.\n\n"
                    "  dsc merge part-*.beton train.beton\n");
  opts.positional_help("PART... OUT");
  opts.add_options()("h,help", "show this help")("files", "", cli::value<std::vector<std::string>>());
  opts.parse_positional({"files"});
  std::vector<std::string> files;
  try {
    auto r = Parse(opts, argc, argv);
    RejectUnmatched(r);
    if (r.count("help")) {
      std::fputs(opts.help().c_str(), stdout);
      return kExitOk;
    }
    if (r.count("files")) files = r["files"].as<std::vector<std::string>>();
    if (files.size() < 2) throw cli::UsageError("expected one or more parts and the output file");
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "dsc merge: %s\n\n%s", e.what(), opts.help().c_str());
    return kExitUsage;
  }
  const std::string out = files.back();
  files.pop_back();
  try {
    const auto rep = writer::Merge(files, out);
    std::printf("wrote %s: %llu samples from %llu parts, %.1f MiB, %.2f s\n", out.c_str(), (unsigned long long)rep.samples,
                (unsigned long long)rep.parts, rep.file_size / 1048576.0, rep.seconds);
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
