// dsc: the dataset compiler and loader's command-line program.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "tools/commands.h"

#ifndef DSC_VERSION
#define DSC_VERSION "0.0.0"
#endif

namespace {

const char* kUsage =
    "dsc " DSC_VERSION " - dataset compiler and fast loader for deep-learning training\n"
    "\n"
    "usage: dsc COMMAND [options]   (dsc COMMAND --help for each)\n"
    "\n"
    "commands:\n"
    "  build SRC OUT      compile a dataset (CIFAR binary/python download, class-per-folder tree,\n"
    "                     or a manifest) into one indexed, checksummed file\n"
    "  merge PARTS... OUT join the parts of dsc build --shard I/N into the file one build writes\n"
    "  info FILE          describe a file (fields, classes, encodings, sections); --json\n"
    "  verify FILE...     check every checksum, index entry and must-be-zero byte\n"
    "  export FILE        write samples as PNG files plus a labels file\n"
    "  bench FILE         measure loader throughput and name the bottleneck\n"
    "  generate OUT       write a synthetic class-per-folder JPEG dataset to try dsc on\n"
    "  serve FILE...      decode and augment for loaders on other machines (their --remote)\n"
    "  train FILE         train ResNet-9 on CIFAR-10 (when built with libtorch: runs dsc-train)\n"
    "  --version          print the version\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return dsc::tools::kExitUsage;
  }
  std::string cmd = argv[1];
  if (cmd == "--version" || cmd == "version") {
    std::printf("dsc %s (format version 1)\n", DSC_VERSION);
    return 0;
  }
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  try {
    if (cmd == "build") return dsc::tools::CmdBuild(argc - 1, argv + 1);
    if (cmd == "merge") return dsc::tools::CmdMerge(argc - 1, argv + 1);
    if (cmd == "info") return dsc::tools::CmdInfo(argc - 1, argv + 1);
    if (cmd == "verify") return dsc::tools::CmdVerify(argc - 1, argv + 1);
    if (cmd == "export") return dsc::tools::CmdExport(argc - 1, argv + 1);
    if (cmd == "bench") return dsc::tools::CmdBench(argc - 1, argv + 1);
    if (cmd == "generate") return dsc::tools::CmdGenerate(argc - 1, argv + 1);
    if (cmd == "serve") return dsc::tools::CmdServe(argc - 1, argv + 1);
    if (cmd == "train") return dsc::tools::CmdTrain(argc - 1, argv + 1);
  } catch (const std::exception& e) {
    // Each command reports its own errors; this is the last resort (a library's exception type a
    // command did not expect) so that nothing ends in std::terminate's abort.
    std::fprintf(stderr, "dsc %s: error: %s\n", cmd.c_str(), e.what());
    return dsc::tools::kExitBad;
  }
  std::fprintf(stderr, "dsc: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return dsc::tools::kExitUsage;
}
