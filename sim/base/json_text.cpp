// JSON text to a document with a bound on its nesting (json_text.hpp).
#include "sim/base/json_text.hpp"

#include <fmt/format.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "sim/base/diagnostics.hpp"

namespace ccsim {

Status check_json_depth(std::string_view text, std::string_view name, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        return invalid_argument(fmt::format("{}: JSON nested deeper than {} levels at byte {} (ccsim's files nest a few "
                                            "levels; this looks generated or damaged)",
                                            name, max_depth, i));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return ok_status();
}

namespace {

// The parser's events, tracking each open object's keys and the pointer to it: the first key that
// an object repeats (a DOM would keep only the last value, silently).
class DuplicateKeys {
 public:
  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      path_.push_back(pending_);
      keys_.emplace_back();
      is_array_.push_back(event == E::array_start);
      index_.push_back(0);
      if (event == E::array_start) pending_ = "/0";
    } else if (event == E::object_end || event == E::array_end) {
      path_.pop_back();
      keys_.pop_back();
      is_array_.pop_back();
      index_.pop_back();
      after_value();
    } else if (event == E::key) {
      const std::string key = parsed.get<std::string>();
      pending_ = "/" + json_pointer_escape(key);
      if (!keys_.back().insert(key).second && first_.empty()) first_ = pointer() + pending_;
    } else if (event == E::value) {
      after_value();
    }
    return true;
  }
  const std::string& first() const { return first_; }

 private:
  std::string pointer() const {
    std::string p;
    for (size_t i = 1; i < path_.size(); ++i) p += path_[i];
    return p;
  }
  // The next element of an enclosing array gets the next index as its pointer part.
  void after_value() {
    if (!is_array_.empty() && is_array_.back()) pending_ = "/" + std::to_string(++index_.back());
  }
  std::vector<std::string> path_;
  std::vector<std::set<std::string>> keys_;
  std::vector<bool> is_array_;
  std::vector<uint64_t> index_;
  std::string pending_;
  std::string first_;
};

// "line L, column C: " of the literal a message quotes ("number overflow parsing '1e400'"): its
// first occurrence in `text` outside strings; "" when there is none.
std::string locate_literal(std::string_view text, const std::string& what) {
  const size_t open = what.find('\''), close = what.rfind('\'');
  if (open == std::string::npos || close <= open + 1) return "";
  const std::string_view literal = std::string_view(what).substr(open + 1, close - open - 1);
  size_t line = 1, column = 1;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (!in_string && text.substr(i, literal.size()) == literal)
      return fmt::format("line {}, column {}: ", line, column);
    if (in_string && c == '\\') {
      ++i, ++column;
    } else if (c == '"') {
      in_string = !in_string;
    }
    if (c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "";
}

// Length of the valid UTF-8 sequence at `i` (1 to 4), or 0 where it is not one: a stray or
// truncated sequence, an overlong form, a surrogate, a code point past U+10FFFF.
size_t utf8_length(std::string_view text, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned c = b(i);
  if (c < 0x80) return 1;
  size_t len = 0;
  unsigned cp = 0, min = 0;
  if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07, min = 0x10000;
  if (len == 0 || i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  return cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF) ? len : 0;
}

}  // namespace

Result<nlohmann::json> parse_json_text(std::string_view text, std::string_view name) {
  CCSIM_RETURN_IF_ERROR(check_json_depth(text, name));
  try {
    DuplicateKeys duplicates;
    nlohmann::json doc = nlohmann::json::parse(text.begin(), text.end(), std::ref(duplicates));
    if (!duplicates.first().empty())
      return invalid_argument(fmt::format("{}: {}: duplicate key (JSON keeps only one of the values, so one of them "
                                          "would be silently lost)",
                                          name, duplicates.first()));
    return doc;
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line L, column C: ..."
    std::string what = e.what();
    const auto pos = what.find("at line ");
    if (pos != std::string::npos) what = what.substr(pos + 3);
    return invalid_argument(fmt::format("{}: invalid JSON: {}", name, escape_invalid_utf8(what)));
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double
    std::string what = e.what();
    const auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    return invalid_argument(fmt::format("{}: invalid JSON: {}{}", name, locate_literal(text, what), what));
  }
}

Status check_utf8(std::string_view text, std::string_view name) {
  for (size_t i = 0; i < text.size();) {
    const size_t len = utf8_length(text, i);
    if (len == 0)
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("{}: not valid UTF-8 at byte {} (0x{:02X})", name, i,
                                static_cast<unsigned>(static_cast<unsigned char>(text[i]))));
    i += len;
  }
  return ok_status();
}

std::string escape_invalid_utf8(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t len = utf8_length(text, i);
    if (len == 0) {
      out += fmt::format("\\x{:02X}", static_cast<unsigned>(static_cast<unsigned char>(text[i])));
      ++i;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

}  // namespace ccsim
