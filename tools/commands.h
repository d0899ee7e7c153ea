// The `dsc` subcommands. Each takes its own argv (argv[0] is the subcommand) and returns the exit
// code: 0 success, 1 bad input or a damaged file, 2 usage error.
#pragma once
#include <cxxopts.hpp>
#include <string>

#include "reader/info.h"  // JsonString

namespace dsc::tools {

constexpr int kExitOk = 0;
constexpr int kExitBad = 1;
constexpr int kExitUsage = 2;

int CmdBuild(int argc, char** argv);
int CmdInfo(int argc, char** argv);
int CmdVerify(int argc, char** argv);
int CmdExport(int argc, char** argv);
int CmdBench(int argc, char** argv);
int CmdGenerate(int argc, char** argv);
int CmdTrain(int argc, char** argv);
int CmdServe(int argc, char** argv);  // needs gRPC (remote/)  // runs dsc-train, so that dsc itself never loads libtorch

using ::dsc::JsonString;

// A usage error for the first argument that no option or positional took (`dsc info A B` must not
// describe A and exit 0 as if B had been looked at).
inline void RejectUnmatched(const cxxopts::ParseResult& r) {
  if (!r.unmatched().empty()) throw cxxopts::exceptions::exception("unexpected argument '" + r.unmatched()[0] + "'");
}

}  // namespace dsc::tools
