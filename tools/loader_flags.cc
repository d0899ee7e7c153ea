#include "tools/loader_flags.h"

#include <algorithm>

#include "reader/option_table.h"
#ifdef DSC_HAVE_REMOTE
#include "remote/client.h"
#endif

namespace dsc::tools {

namespace {

bool Declared(const LoaderFlagSet& set, const OptionRow& row) {
  if (!(row.where & kOnCli)) return false;
  return set.only.empty() || std::find(set.only.begin(), set.only.end(), row.name) != set.only.end();
}

std::string FlagOf(const LoaderFlagSet& set, const std::string& row) {
  const auto it = set.rename.find(row);
  if (it != set.rename.end()) return it->second;
  const OptionRow* r = FindLoaderOption(row);
  return r ? CliFlag(*r) : row;
}

std::string PresetList() {
  std::string s;
  for (const auto& n : PresetNames()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

void DeclareLoaderFlags(cli::Options& opts, const LoaderFlagSet& set, const char* preset_default) {
  const std::string group = "Loader";  // cxxopts heads it " Loader options:"
  auto add = opts.add_options(group);
  if (preset_default) add("preset", "options to start from: " + PresetList(), cli::value<std::string>()->default_value(preset_default));
  for (const OptionRow& row : LoaderOptionTable()) {
    if (!Declared(set, row)) continue;
    auto v = cli::value<std::string>();
    if (row.type == OptionType::kBool) v->implicit_value("true");
    add(FlagOf(set, row.name), row.help + " [" + TypeHint(row) + "]", v);
  }
}

LoaderFlagSet SourceFlags(bool budget) {
  LoaderFlagSet set{{"cache_dir"}, {}};
  if (budget) set.only.push_back("cache_budget");
  return set;
}

DatasetOptions SourceOptions(const cli::ParseResult& r, const LoaderFlagSet& set) {
  const LoaderOptions o = ApplyLoaderFlags(r, set, false);
  DatasetOptions d;
  d.cache_dir = o.cache_dir;
  d.cache_budget = o.cache_budget;
  return d;
}

bool LoaderFlagGiven(const cli::ParseResult& r, const LoaderFlagSet& set, const std::string& row) {
  const OptionRow* o = FindLoaderOption(row);
  return o && Declared(set, *o) && r.count(FlagOf(set, row)) > 0;
}

LoaderOptions ApplyLoaderFlags(const cli::ParseResult& r, const LoaderFlagSet& set, bool has_preset, LoaderOptions base) {
  LoaderOptions o = std::move(base);
  if (has_preset) {
    try {
      o = Preset(r["preset"].as<std::string>());
    } catch (const OptionError& e) {  // "unknown preset 'x'; accepted: ..."
      throw cli::UsageError(std::string("--preset: ") + e.what());
    }
  }
  std::vector<std::string> given;
  for (const OptionRow& row : LoaderOptionTable()) {
    if (!Declared(set, row)) continue;
    const std::string flag = FlagOf(set, row.name);
    if (!r.count(flag)) continue;
    const std::string text = r[flag].as<std::string>();
    try {
      row.set(o, text);
    } catch (const OptionValueError& e) {
      throw cli::UsageError("--" + flag + " " + e.value() + ": " + e.why());
    }
    given.push_back(row.name);
  }
  try {
    CheckGivenOptions(o, given, [&](const std::string& row) { return "--" + FlagOf(set, row); });
  } catch (const OptionError& e) {
    throw cli::UsageError(e.what());
  }
  if (!o.remote.addresses.empty()) {
#ifdef DSC_HAVE_REMOTE
    o.remote.connect = remote::Connector();
#else
    throw cli::UsageError("--remote: this dsc was built without gRPC (install libgrpc++-dev, protobuf-compiler-grpc and rebuild)");
#endif
  }
  return o;
}

}  // namespace dsc::tools
