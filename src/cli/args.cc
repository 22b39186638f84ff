#include "cli/args.h"

#include <charconv>
#include <cmath>

namespace reliableq::cli {

namespace {

const OptionSpec* FindLong(const std::vector<OptionSpec>& specs, std::string_view name) {
  for (const OptionSpec& spec : specs) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const OptionSpec* FindShort(const std::vector<OptionSpec>& specs, char name) {
  for (const OptionSpec& spec : specs) {
    if (spec.short_name != 0 && spec.short_name == name) return &spec;
  }
  return nullptr;
}

std::string Spelling(const OptionSpec& spec) { return "--" + std::string(spec.name); }

}  // namespace

std::optional<std::string> ParsedArgs::Value(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> ParsedArgs::Values(std::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

void ParsedArgs::SetDefault(std::string_view name, std::vector<std::string> values) {
  if (!Has(name)) values_.emplace(std::string(name), std::move(values));
}

Result<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                             const std::vector<OptionSpec>& specs) {
  ParsedArgs parsed;
  auto record = [&](const OptionSpec& spec, std::string value) {
    std::vector<std::string>& values = parsed.values_[std::string(spec.name)];
    // As with getopt, a later value overrides an earlier one, so a script
    // can append an option to override a default it was given.
    if (!spec.repeats) values.clear();
    // A flag is recorded with an empty value so that Has() sees it.
    values.push_back(std::move(value));
  };

  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      parsed.positionals_.insert(parsed.positionals_.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      parsed.positionals_.push_back(arg);
      continue;
    }
    const OptionSpec* spec = nullptr;
    std::optional<std::string> inline_value;
    if (arg[1] == '-') {
      std::string_view body = std::string_view(arg).substr(2);
      size_t eq = body.find('=');
      spec = FindLong(specs, body.substr(0, eq));
      if (spec == nullptr) {
        std::string shown = eq == std::string_view::npos ? arg : arg.substr(0, eq + 2);
        return Status::InvalidArgument("unknown option '" + shown + "'");
      }
      if (eq != std::string_view::npos) inline_value = std::string(body.substr(eq + 1));
      if (inline_value && !spec->takes_value) {
        return Status::InvalidArgument("option " + Spelling(*spec) + " takes no value");
      }
    } else {
      spec = FindShort(specs, arg[1]);
      if (spec == nullptr || (arg.size() > 2 && !spec->takes_value)) {
        return Status::InvalidArgument("unknown option '" + arg + "'");
      }
      if (arg.size() > 2) inline_value = arg.substr(2);
    }
    std::string value;
    if (spec->takes_value) {
      if (inline_value) {
        value = std::move(*inline_value);
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return Status::InvalidArgument("option " + Spelling(*spec) + " needs a value");
      }
    }
    record(*spec, std::move(value));
  }
  return parsed;
}

bool WantsHelp(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") return false;
    if (arg == "-h" || arg == "--help") return true;
  }
  return false;
}

std::optional<int> ParseCount(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  int value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

std::optional<double> ParseNumber(std::string_view text) {
  // from_chars also reads "inf", "nan" and exponents; only plain decimals
  // are meant here.
  if (text.empty() || text.find_first_not_of("0123456789.-+") != std::string_view::npos) {
    return std::nullopt;
  }
  if (text.front() == '+') text.remove_prefix(1);
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

}  // namespace reliableq::cli
