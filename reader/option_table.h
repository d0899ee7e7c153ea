// The loader's options, each described once. A row names a user-facing option, its type and range,
// one line of help and how to read and set it on a LoaderOptions; the CLI flags (tools/loader_flags.h),
// Python's keyword arguments (python/module.cc), the remote WorkSpec (remote/wire.h) and the presets
// all come from here. Adding an option is one row in option_table.cc plus its use.
//
// Names: a row's name is Python's keyword (snake_case); its CLI flag is the same with '-' for '_'
// (--batch-size). Values cross every front end as text in one canonical spelling (TextOf), so the
// parsing, range and choice checks, and their messages, are the same everywhere:
//   option batch_size = 0 is out of range [1, 1048576]
//   option order = 'shuffled' is not one of 'random', 'quasi_random', 'sequential'
// Cross-option rules (uint8 needs NHWC, a crop option the crop mode ignores, ...) stay in
// ValidateOptions, which the Loader's constructor runs whatever front end built the options.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "reader/loader.h"

namespace dsc {

// A value a row refuses, with its parts, so that each front end names the option in its own spelling
// around the same reason: Python "option batch_size = 0: out of range [1, 1048576]", the CLI
// "--batch-size 0: out of range [1, 1048576]".
class OptionValueError : public OptionError {
 public:
  OptionValueError(std::string option, std::string value, std::string why);
  const std::string& option() const { return option_; }
  const std::string& value() const { return value_; }
  const std::string& why() const { return why_; }

 private:
  std::string option_, value_, why_;
};

enum class OptionType : uint8_t {
  kBool,     // true | false (the CLI flag alone means true)
  kInt,      // a decimal integer in [min, max]
  kFloat,    // a finite or non-finite real (ValidateOptions bounds it)
  kChoice,   // one of `choices`
  kText,     // any string (a path, a token)
  kInts,     // exactly `count` integers in [min, max], comma-separated
  kFloats,   // exactly `count` reals, comma-separated
  kIndices,  // any number of integers in [min, max], comma-separated (subset)
  kTexts,    // any number of strings, comma-separated (remote addresses)
  kThreads,  // N, auto or auto:N (threads and autotune together)
  kSize,     // N (a square) or H,W
};

// Where a row is accepted. A row is on every front end unless a reason keeps it off one.
enum OptionWhere : uint8_t {
  kOnCli = 1,
  kOnPython = 2,
  kOnWire = 4,  // travels to remote workers in the WorkSpec (how a sample is decoded and augmented)
};

struct OptionRow {
  std::string name;  // snake_case
  OptionType type = OptionType::kBool;
  std::string help;  // one line
  int64_t min = 0;   // kInt, kInts, kIndices
  uint64_t max = 0;
  uint32_t count = 0;                // kInts, kFloats
  std::vector<std::string> choices;  // kChoice
  uint8_t where = kOnCli | kOnPython;
  std::string needs;  // a row that means nothing without this one set (the remote group: "remote")
  // For the test that walks the table: a valid value other than the default, and one that is refused
  // (empty: the type admits no bad value).
  std::string example, bad;
  std::function<std::string(const LoaderOptions&)> get;       // canonical text
  std::function<void(LoaderOptions&, std::string_view)> set;  // parses and checks; throws OptionError
};

// Every row, in the order help lists them.
const std::vector<OptionRow>& LoaderOptionTable();
// The row named `name` (snake_case, or the CLI's kebab-case), or nullptr.
const OptionRow* FindLoaderOption(std::string_view name);
// Sets one option from its text. Throws OptionError naming the option and the value: an unknown name
// (listing the accepted ones), text that is not of the row's type, a value out of its range.
void SetLoaderOption(LoaderOptions& o, std::string_view name, std::string_view text);
std::string GetLoaderOption(const LoaderOptions& o, std::string_view name);
std::string CliFlag(const OptionRow& row);  // "batch-size"
std::string TypeHint(const OptionRow& row);  // "N in 1..1048576", "random|quasi_random|sequential", ...

// Canonical text of values (shortest round-trip for reals), for front ends that convert their own
// values into a row's text.
std::string TextOf(bool v);
std::string TextOf(double v);
std::string TextOf(float v);

// Rules on which options were given, which only the front ends know: a row whose `needs` row is not
// set, and a crop option the crop mode ignores set to other than its default (out_size without a crop
// kept the stored size in silence). `spell` names a row as the front end does ("--tls-root",
// "option tls_root"). Throws OptionError.
void CheckGivenOptions(const LoaderOptions& o, const std::vector<std::string>& given,
                       const std::function<std::string(const std::string&)>& spell);

// What an unknown option name was probably meant to be, worded for the front end that `spell`s a row
// ("--batch-size", "batch_size"): the row of a habit from torch's DataLoader (shuffle -> order,
// num_workers -> threads, transform -> the transform options), else the nearest names by spelling
// among the rows on `where` and `extra` (the front end's own keywords). Empty when nothing is near.
std::string SuggestLoaderOption(std::string_view name, uint8_t where, const std::function<std::string(const std::string&)>& spell,
                                const std::vector<std::string>& extra = {});

// The files options name: a whole file (tls_root's PEM), and a token without trailing white space
// (token_file). Throw dsc::Error naming the file when it cannot be read (or the token is empty).
std::string ReadOptionFile(const std::string& path);
std::string ReadTokenFile(const std::string& path);

// The named option sets. Throws OptionError for an unknown name, listing the accepted ones.
const std::vector<std::string>& PresetNames();
LoaderOptions Preset(std::string_view name);

}  // namespace dsc
