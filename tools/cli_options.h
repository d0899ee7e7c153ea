// Command-line options for the dsc programs: a thin front for cxxopts, which only cli_options.cc
// includes: cxxopts is header-only and built on std::regex, which makes every file that includes it
// slow to compile (most of all under the sanitizers). The names mirror cxxopts' (add_options()(...),
// value<T>()->default_value(...), r["x"].as<T>()), so a command reads as a cxxopts user expects; the
// semantics are cxxopts' own.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace dsc::tools::cli {

// A usage error (exit 2): an unknown flag, a missing or unparsable value, a missing argument. Every
// error cxxopts raises while parsing or reading a value reaches the caller as one of these (a malformed
// declaration in add_options() is a programming error and stays cxxopts' own exception).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The value types an option can take.
enum class Kind { kString, kInt, kUint32, kUint64, kDouble, kStrings };

template <class T>
constexpr Kind KindOf();
template <> constexpr Kind KindOf<std::string>() { return Kind::kString; }
template <> constexpr Kind KindOf<int>() { return Kind::kInt; }
template <> constexpr Kind KindOf<uint32_t>() { return Kind::kUint32; }
template <> constexpr Kind KindOf<uint64_t>() { return Kind::kUint64; }
template <> constexpr Kind KindOf<double>() { return Kind::kDouble; }
template <> constexpr Kind KindOf<std::vector<std::string>>() { return Kind::kStrings; }

// An option's value: its type and, optionally, the default it has when the flag is absent.
class ValueSpec : public std::enable_shared_from_this<ValueSpec> {
 public:
  explicit ValueSpec(Kind kind) : kind_(kind) {}
  std::shared_ptr<ValueSpec> default_value(std::string text) {
    default_ = std::move(text);
    has_default_ = true;
    return shared_from_this();
  }
  // The value of the flag given alone (--flip for --flip=true).
  std::shared_ptr<ValueSpec> implicit_value(std::string text) {
    implicit_ = std::move(text);
    has_implicit_ = true;
    return shared_from_this();
  }
  Kind kind() const { return kind_; }
  bool has_default() const { return has_default_; }
  const std::string& default_text() const { return default_; }
  bool has_implicit() const { return has_implicit_; }
  const std::string& implicit_text() const { return implicit_; }

 private:
  Kind kind_;
  bool has_default_ = false, has_implicit_ = false;
  std::string default_, implicit_;
};

template <class T>
std::shared_ptr<ValueSpec> value() {
  return std::make_shared<ValueSpec>(KindOf<T>());
}

class ParseResult;

// A command's options: declared with add_options(), then parsed with Parse() below.
class Options {
 public:
  Options(std::string program, std::string description);
  ~Options();
  Options(const Options&) = delete;
  Options& operator=(const Options&) = delete;

  // Declares options, one call each: ("n,name", "help") is a flag, ("name", "help", value<T>()) takes
  // a value. "n,name" gives a short and a long form.
  class Adder {
   public:
    Adder& operator()(const std::string& names, const std::string& help);
    Adder& operator()(const std::string& names, const std::string& help, const std::shared_ptr<ValueSpec>& value);

   private:
    friend class Options;
    Adder(Options* owner, std::string group) : owner_(owner), group_(std::move(group)) {}
    Options* owner_;
    std::string group_;
  };
  // Options of `group` are listed under its name in help(); a hidden group's are accepted but not
  // listed (test hooks).
  Adder add_options(std::string group = "") { return Adder(this, std::move(group)); }
  void hide_group(const std::string& group);

  void positional_help(const std::string& text);
  // The options that bare arguments fill, in order (a vector option takes all that remain).
  void parse_positional(const std::vector<std::string>& names);
  std::string help() const;

  // cxxopts' parse; cxxopts' errors as UsageError. Parse() below is what commands call.
  ParseResult parse(int argc, const char* const* argv);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class ParseResult {
 public:
  // How many times the option was given (a default does not count). Either name of "n,name" works.
  size_t count(const std::string& name) const;

  class Value {
   public:
    // The option's value as the type it was declared with (its default when absent); UsageError when it
    // has neither a value nor a default.
    template <class T>
    T as() const;

   private:
    friend class ParseResult;
    Value(const ParseResult* result, std::string name) : result_(result), name_(std::move(name)) {}
    const ParseResult* result_;
    std::string name_;
  };
  Value operator[](const std::string& name) const { return Value(this, name); }

  // Bare arguments no positional option took.
  const std::vector<std::string>& unmatched() const;

 private:
  friend class Options;
  struct Impl;
  explicit ParseResult(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Defined in cli_options.cc for the types KindOf knows.
extern template std::string ParseResult::Value::as<std::string>() const;
extern template int ParseResult::Value::as<int>() const;
extern template uint32_t ParseResult::Value::as<uint32_t>() const;
extern template uint64_t ParseResult::Value::as<uint64_t>() const;
extern template double ParseResult::Value::as<double>() const;
extern template std::vector<std::string> ParseResult::Value::as<std::vector<std::string>>() const;

}  // namespace dsc::tools::cli

namespace dsc::tools {

// opts.parse(), with a value that does not parse named by its flag: cxxopts says only "Argument 'x'
// failed to parse", which leaves the user to guess which flag of a long command line it was.
cli::ParseResult Parse(cli::Options& opts, int argc, char** argv);

// A usage error for the first argument that no option or positional took (`dsc info A B` must not
// describe A and exit 0 as if B had been looked at).
void RejectUnmatched(const cli::ParseResult& r);

}  // namespace dsc::tools
