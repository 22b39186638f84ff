#include "metrics/label_bounder.h"

#include <algorithm>

namespace reliableq::metrics {

LabelBounder::LabelBounder(std::vector<std::string> names) : names_(std::move(names)) {
  std::erase(names_, std::string(kOther));
  std::sort(names_.begin(), names_.end());
  names_.erase(std::unique(names_.begin(), names_.end()), names_.end());
}

LabelBounder LabelBounder::ForQueues(std::vector<std::string> specs) {
  std::vector<std::string> namespaces;
  for (const std::string& spec : specs) {
    if (spec.ends_with('*')) namespaces.push_back(spec);
  }
  LabelBounder bounder(std::move(specs));
  for (const std::string& spec : namespaces) {
    bounder.namespaces_.emplace_back(spec.substr(0, spec.size() - 1), bounder.Index(spec));
  }
  return bounder;
}

size_t LabelBounder::Index(std::string_view name) const {
  auto it = std::lower_bound(names_.begin(), names_.end(), name,
                             [](const std::string& a, std::string_view b) { return a < b; });
  if (it != names_.end() && *it == name) return static_cast<size_t>(it - names_.begin());
  for (const auto& [prefix, index] : namespaces_) {
    if (name.starts_with(prefix)) return index;
  }
  return other_index();
}

std::string_view LabelBounder::Name(size_t index) const {
  return index < names_.size() ? std::string_view(names_[index]) : kOther;
}

}  // namespace reliableq::metrics
