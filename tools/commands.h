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

// opts.parse(), with a value that does not parse named by its option: cxxopts says only "Argument
// 'x' failed to parse", which leaves the user to guess which flag of a long command line it was.
inline cxxopts::ParseResult Parse(cxxopts::Options& opts, int argc, char** argv) {
  try {
    return opts.parse(argc, argv);
  } catch (const cxxopts::exceptions::incorrect_argument_type& e) {
    const std::string what = e.what();
    const std::string open = "\u2018", close = "\u2019";  // cxxopts quotes the value thus
    const size_t a = what.find(open), b = what.rfind(close);
    if (a == std::string::npos || b == std::string::npos || b < a + open.size()) throw;
    const std::string value = what.substr(a + open.size(), b - a - open.size());
    // Each flag given that value, alone, until one does not parse: an earlier flag may take the same
    // text as a valid value (--loader-threads auto --torch-threads auto).
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      std::string flag;
      if (arg == value && i > 1 && argv[i - 1][0] == '-') flag = argv[i - 1];
      const size_t eq = arg.find('=');
      if (arg[0] == '-' && eq != std::string::npos && arg.substr(eq + 1) == value) flag = arg.substr(0, eq);
      if (flag.empty()) continue;
      const std::string alone = flag + "=" + value;
      const char* probe[] = {argv[0], alone.c_str(), nullptr};
      try {
        opts.parse(2, probe);
      } catch (const cxxopts::exceptions::incorrect_argument_type&) {
        throw cxxopts::exceptions::exception(flag + " " + value + ": not a value " + flag + " takes");
      } catch (const cxxopts::exceptions::exception&) {
      }
    }
    throw;
  }
}

}  // namespace dsc::tools
