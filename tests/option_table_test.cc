// The option table (reader/option_table.h) walked row by row: each option is a flag of `dsc bench` with
// the same name, keeps its value through the remote WorkSpec, and a refused value says the same reason
// on the command line as in C++ (python/tests/test_options.py does the same for Python).
#include <gtest/gtest.h>

#include <set>

#include "reader/option_table.h"
#include "tests/test_util.h"
#ifdef DSC_HAVE_REMOTE
#include "remote/wire.h"
#endif

namespace dsc::test {
namespace {

// `dsc bench --show-options ARGS`: the resolved options, name -> text.
std::map<std::string, std::string> Shown(const std::string& args, int* rc, std::string* out) {
  *rc = RunDsc("bench --show-options " + args, out);
  std::map<std::string, std::string> m;
  size_t at = 0;
  while (at < out->size()) {
    const size_t nl = out->find('\n', at);
    const std::string line = out->substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    const size_t eq = line.find(" = ");
    if (eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 3);
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return m;
}

#ifdef DSC_HAVE_REMOTE
constexpr bool kHaveRemote = true;
#else
constexpr bool kHaveRemote = false;
#endif

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

// What a row needs beside it on a command line: the remote group a worker, a crop option a crop mode
// that uses it. `base` gets the same.
std::string Needs(const OptionRow& row, LoaderOptions* base = nullptr) {
  const std::string& n = row.name;
  if (n == "out_size" || n == "out_w" || n == "out_h" || n == "scale" || n == "ratio") {
    if (base) *base = Preset("imagenet-train");
    return " --preset imagenet-train";
  }
  if (n == "resize") {
    if (base) *base = Preset("imagenet-test");
    return " --preset imagenet-test";
  }
  if (n == "center_ratio") {
    if (base) *base = Preset("imagenet-test"), base->augment.resize = 0;
    return " --preset imagenet-test --resize 0";
  }
  return row.needs == "remote" ? " --remote 127.0.0.1:1" : "";
}

TEST(OptionTable, RowsAreWellFormed) {
  std::set<std::string> names;
  for (const OptionRow& row : LoaderOptionTable()) {
    SCOPED_TRACE(row.name);
    EXPECT_TRUE(names.insert(row.name).second) << "names are unique";
    EXPECT_EQ(row.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_0123456789"), std::string::npos) << "snake_case";
    EXPECT_FALSE(row.help.empty());
    EXPECT_EQ(row.help.find('\n'), std::string::npos) << "one line";
    ASSERT_TRUE(row.get && row.set);
    EXPECT_EQ(FindLoaderOption(CliFlag(row)), &row) << "the kebab-case flag finds the row";
    if (!row.needs.empty()) {
      EXPECT_NE(FindLoaderOption(row.needs), nullptr);
    }
    const LoaderOptions defaults;
    if (!row.example.empty() && row.type != OptionType::kText) {
      LoaderOptions o;
      row.set(o, row.example);
      EXPECT_EQ(row.get(o), row.example) << "the example is in its canonical spelling";
      EXPECT_NE(row.get(o), row.get(defaults)) << "the example is not the default";
      LoaderOptions again;
      row.set(again, row.get(o));
      EXPECT_EQ(row.get(again), row.get(o)) << "text round trip";
    }
    if (!row.bad.empty()) {
      LoaderOptions o;
      try {
        row.set(o, row.bad);
        ADD_FAILURE() << row.bad << " was accepted";
      } catch (const OptionValueError& e) {
        EXPECT_EQ(e.option().rfind(row.name, 0), 0u) << e.what();
        EXPECT_NE(row.bad.find(e.value()), std::string::npos) << "the value or the entry refused: " << e.value();
        EXPECT_FALSE(e.why().empty());
      }
    }
  }
  EXPECT_GE(names.size(), 48u);
  EXPECT_THROW(SetLoaderOption(*std::make_unique<LoaderOptions>(), "batchsize", "3"), OptionError);
}

TEST(OptionTable, ParsingIsStrict) {
  LoaderOptions o;
  for (const char* bad : {"", "+3", "3x", "0x10", " 3", "99999999999999999999999"})
    EXPECT_THROW(SetLoaderOption(o, "seed", bad), OptionValueError) << bad;
  SetLoaderOption(o, "cache_budget", "3M");
  EXPECT_EQ(o.cache_budget, 3u << 20);
  EXPECT_THROW(SetLoaderOption(o, "cache_budget", "17179869184T"), OptionValueError);
  EXPECT_THROW(SetLoaderOption(o, "batch_size", "3M"), OptionValueError) << "suffixes are for byte counts";
  SetLoaderOption(o, "threads", "auto");
  EXPECT_TRUE(o.autotune);
  EXPECT_EQ(o.threads, 0);
  SetLoaderOption(o, "threads", "5");
  EXPECT_FALSE(o.autotune);
  EXPECT_EQ(o.threads, 5);
  for (const char* bad : {"auto:", "auto3", "autox", "-1", "auto:-2", "1025"})
    EXPECT_THROW(SetLoaderOption(o, "threads", bad), OptionValueError) << bad;
  SetLoaderOption(o, "mean", "0.485,0.456,0.406");
  EXPECT_EQ(o.augment.mean[1], 0.456f) << "a float spelled as the user wrote it";
  EXPECT_THROW(SetLoaderOption(o, "mean", "1,2"), OptionValueError);
  SetLoaderOption(o, "out_size", "24,32");
  EXPECT_EQ(o.augment.out_h, 24);
  EXPECT_EQ(o.augment.out_w, 32);
}

// Every CLI row is a `dsc bench` flag of its kebab-case name that sets what the row sets; a refused
// value is a usage error saying the row's reason.
TEST(OptionTable, EveryRowIsABenchFlag) {
  int rc = 0;
  std::string out;
  const auto defaults = Shown("", &rc, &out);
  ASSERT_EQ(rc, 0) << out;
  const LoaderOptions cifar = Preset("cifar-train");
  for (const OptionRow& row : LoaderOptionTable()) {
    SCOPED_TRACE(row.name);
    if (!(row.where & kOnCli)) {
      EXPECT_EQ(defaults.count(row.name), 0u) << "not on the command line";
      continue;
    }
    ASSERT_EQ(defaults.count(row.name), 1u) << out;
    EXPECT_EQ(defaults.at(row.name), row.get(cifar)) << "absent flags keep the preset's value";
    if (row.example.empty() || row.type == OptionType::kText) continue;
    if (!kHaveRemote && (row.name == "remote" || row.needs == "remote")) {  // a build without gRPC says so
      Shown("--" + CliFlag(row) + "=" + Quoted(row.example) + Needs(row), &rc, &out);
      EXPECT_EQ(rc, 2) << out;
      EXPECT_NE(out.find("built without gRPC"), std::string::npos) << out;
      continue;
    }
    LoaderOptions want = cifar;
    const auto shown = Shown("--" + CliFlag(row) + "=" + Quoted(row.example) + Needs(row, &want), &rc, &out);
    ASSERT_EQ(rc, 0) << out;
    row.set(want, row.example);
    EXPECT_EQ(shown.at(row.name), row.get(want)) << out;
    if (row.bad.empty()) continue;
    Shown("--" + CliFlag(row) + "=" + Quoted(row.bad) + Needs(row), &rc, &out);
    EXPECT_EQ(rc, 2) << out;
    try {
      LoaderOptions o;
      row.set(o, row.bad);
    } catch (const OptionValueError& e) {
      EXPECT_NE(out.find(": " + e.why()), std::string::npos) << "the same reason: " << e.why() << "\n" << out;
    }
  }
  Shown("--local-threads 2", &rc, &out);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("--local-threads needs --remote"), std::string::npos) << out;
  Shown("--preset imagenet-test --scale 0.5,1", &rc, &out);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("--scale has no effect with crop='center'"), std::string::npos) << out;
  Shown("--flip=maybe", &rc, &out);
  EXPECT_NE(out.find("--flip maybe: expected true or false"), std::string::npos) << out;
}

#ifdef DSC_HAVE_REMOTE
// `dsc serve --help` lists what an operator sets; the fault-injection hooks the tests use are accepted
// but not listed.
TEST(OptionTable, ServeHelpHidesTestHooks) {
  std::string out;
  ASSERT_EQ(RunDsc("serve --help", &out), 0) << out;
  EXPECT_NE(out.find("--max-memory-mb"), std::string::npos) << out;
  for (const char* hook : {"--fail-after", "--stall-after", "--stall-ms", "--die-after", "--report-version", "--report-data-port"})
    EXPECT_EQ(out.find(hook), std::string::npos) << hook << " is listed:\n" << out;
  EXPECT_EQ(RunDsc("serve --die-after x", &out), 2) << "a hook is still parsed: " << out;
  EXPECT_NE(out.find("--die-after x"), std::string::npos) << out;
}

// Every wire row keeps its value through ToSpec / FromSpec, from a base where the example is valid.
TEST(OptionTable, WireRowsRoundTrip) {
  LoaderOptions deferred = Preset("cifar-train");
  deferred.dtype = DType::kUint8;
  deferred.layout = Layout::kNHWC;
  deferred.defer_augment = true;
  const std::vector<LoaderOptions> bases = {Preset("cifar-train"), Preset("imagenet-train"), Preset("imagenet-test"), deferred};
  size_t rows = 0;
  for (const OptionRow& row : LoaderOptionTable()) {
    if (!(row.where & kOnWire)) continue;
    SCOPED_TRACE(row.name);
    ++rows;
    bool tried = false;
    for (LoaderOptions o : bases) {
      row.set(o, row.example);
      const uint32_t w = o.augment.crop == kernels::CropMode::kNone ? 32 : uint32_t(o.augment.out_w);
      const uint32_t h = o.augment.crop == kernels::CropMode::kNone ? 32 : uint32_t(o.augment.out_h);
      try {
        ValidateOptions(o, w, h);
      } catch (const OptionError&) {
        continue;  // the example needs another base
      }
      tried = true;
      remote::WorkSpec spec;
      remote::ToSpec(o, w, h, &spec);
      uint32_t gw = 0, gh = 0;
      const LoaderOptions back = remote::FromSpec(spec, &gw, &gh);
      EXPECT_EQ(gw, w);
      EXPECT_EQ(gh, h);
      for (const OptionRow& r : LoaderOptionTable()) {
        if (r.where & kOnWire) {
          EXPECT_EQ(r.get(back), r.get(o)) << r.name;
        }
      }
      break;
    }
    EXPECT_TRUE(tried) << "no base takes the example " << row.example;
  }
  EXPECT_GE(rows, 20u);
  // A spec without an option, or with one the table does not know, is refused.
  remote::WorkSpec spec;
  remote::ToSpec(Preset("cifar-train"), 32, 32, &spec);
  uint32_t w = 0, h = 0;
  remote::WorkSpec missing = spec;
  missing.mutable_options()->RemoveLast();
  EXPECT_THROW(remote::FromSpec(missing, &w, &h), OptionError);
  remote::WorkSpec extra = spec;
  auto* e = extra.add_options();
  e->set_name("bogus");
  e->set_value("1");
  EXPECT_THROW(remote::FromSpec(extra, &w, &h), OptionError);
  remote::WorkSpec bad = spec;
  bad.mutable_options(0)->set_value("bogus");
  EXPECT_THROW(remote::FromSpec(bad, &w, &h), OptionError);
}
#endif

// Unknown names: torch's DataLoader words point at the row meant, typos at the nearest names, each in
// the front end's spelling; a name near nothing gets no hint.
TEST(OptionTable, UnknownNamesSuggestTheOptionMeant) {
  const auto flag = [](const std::string& row) { return "--" + CliFlag(*FindLoaderOption(row)); };
  EXPECT_EQ(SuggestLoaderOption("batchsize", kOnCli, flag), "did you mean --batch-size?");
  EXPECT_EQ(SuggestLoaderOption("seeed", kOnCli, flag), "did you mean --seed?");
  EXPECT_NE(SuggestLoaderOption("shuffle", kOnCli, flag).find("--order random"), std::string::npos);
  EXPECT_NE(SuggestLoaderOption("num-workers", kOnCli, flag).find("--threads"), std::string::npos);
  EXPECT_NE(SuggestLoaderOption("prefetch_factor", kOnCli, flag).find("--prefetch"), std::string::npos);
  const std::string t = SuggestLoaderOption("transform", kOnCli, flag);
  EXPECT_NE(t.find(FindLoaderOption("transforms") ? "--transforms" : "--flip"), std::string::npos) << t;
  EXPECT_EQ(SuggestLoaderOption("zzzzzz", kOnCli, flag), "");
  // Rows off the front end are not suggested; its own keywords are.
  EXPECT_EQ(SuggestLoaderOption("lease_memroy", kOnCli, flag), "");
  const auto same = [](const std::string& n) { return n; };
  EXPECT_EQ(SuggestLoaderOption("lease_memroy", kOnPython, same), "did you mean lease_memory?");
  EXPECT_EQ(SuggestLoaderOption("pin_memroy", kOnPython, same, {"pin_memory"}), "did you mean pin_memory?");
}

}  // namespace
}  // namespace dsc::test
