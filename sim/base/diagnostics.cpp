#include "sim/base/diagnostics.hpp"

#include <algorithm>
#include <numeric>

namespace ccsim {

Status Diagnostics::to_status(std::string_view file) const {
  if (items_.empty()) return ok_status();
  std::string msg;
  for (size_t i = 0; i < items_.size(); ++i) {
    if (i) msg += '\n';
    msg += std::string(file) + ": " + (items_[i].path.empty() ? "/" : items_[i].path) + ": " + items_[i].message;
  }
  return Status(not_found_ && items_.size() == 1 ? StatusCode::kNotFound : StatusCode::kInvalidArgument, msg);
}

void Diagnostics::add(const std::string& prefix, const Status& status) {
  if (status.ok()) return;
  add(prefix + status.pointer(),
      status.context().empty() ? status.detail() : status.context() + ": " + status.detail());
  if (status.code() == StatusCode::kNotFound) mark_not_found();
}

void Diagnostics::merge(const std::string& prefix, const Diagnostics& other) {
  for (const Diagnostic& d : other.items_) add(prefix + d.path, d.message);
  not_found_ = not_found_ || other.not_found_;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  // Suggest only near misses: at most 2 edits, or a third of the word for long words.
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string json_pointer_escape(std::string_view key) {
  std::string out;
  for (char ch : key) {
    if (ch == '~') out += "~0";
    else if (ch == '/') out += "~1";
    else out += ch;
  }
  return out;
}

}  // namespace ccsim
