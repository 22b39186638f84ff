// Command-line option parsing shared by every verb of `reliableq`.
//
// Accepted forms: `--name value`, `--name=value`, `-x value`, `-xvalue`,
// `--flag`, `-f`, and `--` to end the options. A value is taken as it is,
// even when it starts with '-' (`--in -5`). An option given again overrides
// its earlier value, unless its spec says it repeats: then every value is
// kept. Anything else that starts with '-' (other than "-" alone) is an
// unknown option.
//
// Thread safety: plain values.

#ifndef RELIABLEQ_CLI_ARGS_H_
#define RELIABLEQ_CLI_ARGS_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reliableq/status.h"

namespace reliableq::cli {

struct OptionSpec {
  // Without the leading "--", e.g. "queue". Also the name results are
  // looked up by.
  std::string_view name;
  // The one-letter form, e.g. 'q'; 0 when there is none.
  char short_name = 0;
  // Takes a value (otherwise it is a flag).
  bool takes_value = false;
  // May be given more than once; every value is kept in order.
  bool repeats = false;
};

class ParsedArgs {
 public:
  // True when the option was given.
  bool Has(std::string_view name) const { return values_.count(name) != 0; }
  // The option's value, or nullopt when it was not given.
  std::optional<std::string> Value(std::string_view name) const;
  // Every value of a repeating option, in order; empty when not given.
  std::vector<std::string> Values(std::string_view name) const;
  // The arguments that are not options, in order.
  const std::vector<std::string>& positionals() const { return positionals_; }
  // Sets `name` to `values` unless it was given (a config file's values
  // yield to the command line). A flag's values are a single "".
  void SetDefault(std::string_view name, std::vector<std::string> values);
  // Whether the verb these arguments are for needs a queue group when its
  // Redis is a cluster (set by the program from the verb's declaration):
  // the Redis options read from them must then name one. False for
  // arguments made for no verb (a config file's key checked alone, whose
  // group may come from another key).
  bool cluster_needs_group() const { return cluster_needs_group_; }
  void set_cluster_needs_group(bool needs) { cluster_needs_group_ = needs; }

 private:
  friend Result<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                      const std::vector<OptionSpec>& specs);
  std::map<std::string, std::vector<std::string>, std::less<>> values_;
  std::vector<std::string> positionals_;
  bool cluster_needs_group_ = false;
};

// Parses `args` (no program name) against `specs`. kInvalidArgument with a
// one-line reason for an unknown option or a missing or unexpected value.
Result<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                             const std::vector<OptionSpec>& specs);

// True when `args` asks for help (-h or --help before any "--").
bool WantsHelp(const std::vector<std::string>& args);

// Parsers for option values; each returns nullopt on anything but a whole,
// plain decimal number in range.
// A non-negative integer that fits an int: "0", "25".
std::optional<int> ParseCount(std::string_view text);
// A finite decimal number such as "1.5", "-3", "1700000000.25".
std::optional<double> ParseNumber(std::string_view text);

}  // namespace reliableq::cli

#endif  // RELIABLEQ_CLI_ARGS_H_
