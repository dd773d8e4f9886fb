#pragma once
/// \file
/// Diagnostics: collects every input error of one validation pass (STYLE rule 4: report them all
/// together), each anchored at a JSON Pointer path, then turns them into one Status.

#include <string>
#include <string_view>
#include <vector>

#include "sim/base/status.hpp"

namespace ccsim {

/// One input error: where (a JSON Pointer, e.g. "/cluster/nodes", or "line 3, column 7") and what.
struct Diagnostic {
  std::string path;
  std::string message;
};

/// An ordered list of input errors.
class Diagnostics {
 public:
  void add(std::string path, std::string message) { items_.push_back({std::move(path), std::move(message)}); }
  /// Adds a failed Status at `prefix` followed by its pointer (its contexts and detail as the
  /// message; a kNotFound marks the item as a missing file). Nothing for an OK status.
  void add(const std::string& prefix, const Status& status);
  /// Adds every item of `other` with `prefix` before its path.
  void merge(const std::string& prefix, const Diagnostics& other);
  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  const std::vector<Diagnostic>& items() const { return items_; }
  /// kInvalidArgument (or kNotFound if every error is a missing file) listing every error as
  /// "<file>: <path>: <message>" on its own line; OK when empty.
  Status to_status(std::string_view file) const;
  /// Marks the most recent error as a missing-file error (exit code 2 either way).
  void mark_not_found() { not_found_ = true; }

 private:
  std::vector<Diagnostic> items_;
  bool not_found_ = false;
};

/// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b);
/// The candidate closest to `word` (empty if none is within a plausible distance).
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

/// Escapes a key for use in a JSON Pointer ("~" -> "~0", "/" -> "~1").
std::string json_pointer_escape(std::string_view key);

}  // namespace ccsim
