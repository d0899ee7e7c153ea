// `dsc train` hands over to the dsc-train program next to dsc (built only with libtorch), so that
// dsc itself never loads libtorch.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "tools/commands.h"

namespace dsc::tools {

int CmdTrain(int argc, char** argv) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto trainer = (ec ? std::filesystem::path(".") : self.parent_path()) / "dsc-train";
  if (!std::filesystem::exists(trainer, ec)) {
    std::fprintf(stderr, "dsc train: not available: this dsc was built without libtorch (%s not found; install "
                 "libtorch-dev and rebuild)\n", trainer.c_str());
    return kExitBad;
  }
  std::vector<char*> args;
  std::string path = trainer.string();
  args.push_back(path.data());
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execv(path.c_str(), args.data());
  std::fprintf(stderr, "dsc train: cannot run %s: %s\n", path.c_str(), std::strerror(errno));
  return kExitBad;
}

}  // namespace dsc::tools
