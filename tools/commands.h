// The `dsc` subcommands. Each takes its own argv (argv[0] is the subcommand) and returns the exit
// code: 0 success, 1 bad input or a damaged file, 2 usage error.
#pragma once
#include <string>

#include "reader/info.h"  // JsonString
#include "tools/cli_options.h"

namespace dsc::tools {

constexpr int kExitOk = 0;
constexpr int kExitBad = 1;
constexpr int kExitUsage = 2;

int CmdBuild(int argc, char** argv);
int CmdMerge(int argc, char** argv);  // joins dsc build --shard parts (writer/merge.h)
int CmdInfo(int argc, char** argv);
int CmdVerify(int argc, char** argv);
int CmdExport(int argc, char** argv);
int CmdBench(int argc, char** argv);
int CmdGenerate(int argc, char** argv);
int CmdTrain(int argc, char** argv);
int CmdServe(int argc, char** argv);  // needs gRPC (remote/)  // runs dsc-train, so that dsc itself never loads libtorch

using ::dsc::JsonString;

}  // namespace dsc::tools
