#include "tools/cli_options.h"

#include <cxxopts.hpp>

#include <algorithm>
#include <cctype>

#include "reader/option_table.h"

namespace dsc::tools::cli {

struct Options::Impl {
  Impl(std::string program, std::string description) : opts(std::move(program), std::move(description)) {}
  cxxopts::Options opts;
  std::vector<std::string> groups, hidden;  // in declaration order
  std::string names;  // every "a,long-name" given, for LoaderFlagHint
  void Saw(const std::string& group) {
    if (std::find(groups.begin(), groups.end(), group) == groups.end()) groups.push_back(group);
  }
};

struct ParseResult::Impl {
  cxxopts::ParseResult result;
};

namespace {

// A value that does not parse as its option's type, told apart so that Parse() can name the flag.
class BadValue : public UsageError {
 public:
  using UsageError::UsageError;
};

// "; did you mean --batch-size?" for cxxopts' "Option ‘batchsize’ does not exist", from the loader's
// option table (reader/option_table.h), which words the same hints for Python's keywords; only when
// every flag it names is one this command takes (`names`: its "a,long-name" specs, comma-joined).
std::string LoaderFlagHint(const std::string& what, const std::string& names) {
  const std::string open = "\u2018", close = "\u2019";
  const size_t a = what.find(open), b = what.rfind(close);
  if (a == std::string::npos || b == std::string::npos || b < a + open.size()) return "";
  const std::string hint = SuggestLoaderOption(what.substr(a + open.size(), b - a - open.size()), kOnCli, [](const std::string& row) {
    std::string flag = "--" + row;
    std::replace(flag.begin(), flag.end(), '_', '-');
    return flag;
  });
  for (size_t at = hint.find("--"); at != std::string::npos; at = hint.find("--", at + 2)) {
    size_t end = at + 2;
    while (end < hint.size() && (std::isalnum(static_cast<unsigned char>(hint[end])) || hint[end] == '-')) ++end;
    if (("," + names + ",").find("," + hint.substr(at + 2, end - at - 2) + ",") == std::string::npos) return "";
  }
  return hint.empty() ? "" : "; " + hint;
}

std::shared_ptr<cxxopts::Value> MakeValue(const ValueSpec& spec) {
  std::shared_ptr<cxxopts::Value> v;
  switch (spec.kind()) {
    case Kind::kString: v = cxxopts::value<std::string>(); break;
    case Kind::kInt: v = cxxopts::value<int>(); break;
    case Kind::kUint32: v = cxxopts::value<uint32_t>(); break;
    case Kind::kUint64: v = cxxopts::value<uint64_t>(); break;
    case Kind::kDouble: v = cxxopts::value<double>(); break;
    case Kind::kStrings: v = cxxopts::value<std::vector<std::string>>(); break;
  }
  if (spec.has_default()) v->default_value(spec.default_text());
  if (spec.has_implicit()) v->implicit_value(spec.implicit_text());
  return v;
}

}  // namespace

Options::Options(std::string program, std::string description)
    : impl_(std::make_unique<Impl>(std::move(program), std::move(description))) {}

Options::~Options() = default;

Options::Adder& Options::Adder::operator()(const std::string& names, const std::string& help) {
  owner_->impl_->Saw(group_);
  owner_->impl_->names += "," + names;
  owner_->impl_->opts.add_options(group_)(names, help);
  return *this;
}

Options::Adder& Options::Adder::operator()(const std::string& names, const std::string& help,
                                           const std::shared_ptr<ValueSpec>& value) {
  owner_->impl_->Saw(group_);
  owner_->impl_->names += "," + names;
  owner_->impl_->opts.add_options(group_)(names, help, MakeValue(*value));
  return *this;
}

void Options::hide_group(const std::string& group) { impl_->hidden.push_back(group); }

void Options::positional_help(const std::string& text) { impl_->opts.positional_help(text); }

void Options::parse_positional(const std::vector<std::string>& names) { impl_->opts.parse_positional(names); }

std::string Options::help() const {
  std::vector<std::string> shown;
  for (const auto& g : impl_->groups)
    if (std::find(impl_->hidden.begin(), impl_->hidden.end(), g) == impl_->hidden.end()) shown.push_back(g);
  return impl_->opts.help(shown);
}

ParseResult Options::parse(int argc, const char* const* argv) {
  try {
    return ParseResult(std::make_shared<const ParseResult::Impl>(ParseResult::Impl{impl_->opts.parse(argc, argv)}));
  } catch (const cxxopts::exceptions::incorrect_argument_type& e) {
    throw BadValue(e.what());
  } catch (const cxxopts::exceptions::no_such_option& e) {
    throw UsageError(std::string(e.what()) + LoaderFlagHint(e.what(), impl_->names));
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(e.what());
  }
}

size_t ParseResult::count(const std::string& name) const { return impl_->result.count(name); }

const std::vector<std::string>& ParseResult::unmatched() const { return impl_->result.unmatched(); }

template <class T>
T ParseResult::Value::as() const {
  try {
    return result_->impl_->result[name_].as<T>();
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(e.what());
  }
}

template std::string ParseResult::Value::as<std::string>() const;
template int ParseResult::Value::as<int>() const;
template uint32_t ParseResult::Value::as<uint32_t>() const;
template uint64_t ParseResult::Value::as<uint64_t>() const;
template double ParseResult::Value::as<double>() const;
template std::vector<std::string> ParseResult::Value::as<std::vector<std::string>>() const;

}  // namespace dsc::tools::cli

namespace dsc::tools {

cli::ParseResult Parse(cli::Options& opts, int argc, char** argv) {
  try {
    return opts.parse(argc, argv);
  } catch (const cli::BadValue& e) {
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
      } catch (const cli::BadValue&) {
        throw cli::UsageError(flag + " " + value + ": not a value " + flag + " takes");
      } catch (const cli::UsageError&) {
      }
    }
    throw;
  }
}

void RejectUnmatched(const cli::ParseResult& r) {
  if (!r.unmatched().empty()) throw cli::UsageError("unexpected argument '" + r.unmatched()[0] + "'");
}

}  // namespace dsc::tools
