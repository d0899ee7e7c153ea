#include <cstdio>

#include "tools/commands.h"

namespace dsc::tools {

int CmdBench(int, char**) {
  std::fprintf(stderr, "dsc bench: not available in this build yet\n");
  return kExitBad;
}

}  // namespace dsc::tools
