// JSON text to a document with a bound on its nesting (json_text.hpp).
#include "sim/base/json_text.hpp"

#include <fmt/format.h>

#include <string>

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

Result<nlohmann::json> parse_json_text(std::string_view text, std::string_view name) {
  CCSIM_RETURN_IF_ERROR(check_json_depth(text, name));
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line L, column C: ..."
    std::string what = e.what();
    const auto pos = what.find("at line ");
    if (pos != std::string::npos) what = what.substr(pos + 3);
    return invalid_argument(fmt::format("{}: invalid JSON: {}", name, what));
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double
    std::string what = e.what();
    const auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    return invalid_argument(fmt::format("{}: invalid JSON: {}", name, what));
  }
}

}  // namespace ccsim
