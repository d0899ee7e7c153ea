// The loader's options as flags of a dsc command, declared from the option table (reader/option_table.h):
// each row a --kebab-case flag with the row's help, under "Loader options" in --help. A flag that is
// absent leaves the preset's value; a given one is set through the row, so its parsing, checks and
// messages are the Python module's too.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "reader/dataset.h"
#include "reader/loader.h"
#include "tools/cli_options.h"

namespace dsc::tools {

struct LoaderFlagSet {
  // The rows to declare (snake_case names); empty: every row the CLI takes.
  std::vector<std::string> only;
  // Rows a command spells otherwise ({"threads", "loader-threads"}: dsc train's loader threads beside
  // its --torch-threads).
  std::map<std::string, std::string> rename;
};

// Declares --preset (when `preset_default` is not null, with that default) and the rows' flags.
void DeclareLoaderFlags(cli::Options& opts, const LoaderFlagSet& set, const char* preset_default);

// The preset named by --preset (when declared; else `base`), then every given flag in table order. Throws
// cli::UsageError naming the flag as typed: "--batch-size 0: out of range [1, 1048576]", "--tls-root
// needs --remote", a crop option the crop mode ignores. With remote workers, attaches the connector
// (or refuses --remote in a build without gRPC).
LoaderOptions ApplyLoaderFlags(const cli::ParseResult& r, const LoaderFlagSet& set, bool has_preset,
                               LoaderOptions base = {});

// The flags of a command that opens a file without loading it (dsc verify, dsc info): where a URL's
// blocks are cached (--cache-dir) and, when `budget`, how many bytes of them (--cache-budget).
LoaderFlagSet SourceFlags(bool budget);
// What those flags give, for opening the file (OpenSource).
DatasetOptions SourceOptions(const cli::ParseResult& r, const LoaderFlagSet& set);

// Whether the row's flag was given.
bool LoaderFlagGiven(const cli::ParseResult& r, const LoaderFlagSet& set, const std::string& row);

}  // namespace dsc::tools
