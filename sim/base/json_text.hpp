#pragma once
/// \file
/// JSON text to a document, for every file and command-line value ccsim reads. nlohmann::json's
/// parser recurses once per nesting level, so a hostile or generated document nested a hundred
/// thousand levels deep overflows the stack and kills the process; parse_json_text() scans the
/// text's nesting first and refuses it with the byte offset and the depth. ccsim's own files nest
/// a handful of levels (a scenario's deepest field, /compression/i/params/..., is five).

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string_view>

#include "sim/base/status.hpp"

namespace ccsim {

/// The deepest nesting of arrays and objects a JSON text may have.
inline constexpr size_t kMaxJsonDepth = 256;

/// An input error naming `name` where `text` nests arrays and objects deeper than `max_depth`
/// (strings are skipped, escapes included): "NAME: JSON nested deeper than 256 levels at byte B";
/// OK otherwise, and for text that is not JSON (the parser reports that).
Status check_json_depth(std::string_view text, std::string_view name, size_t max_depth = kMaxJsonDepth);

/// An input error naming `name` where `text` is not valid UTF-8 (a stray or truncated sequence, an
/// overlong form, a surrogate, a code point past U+10FFFF): "NAME: not valid UTF-8 at byte B (0xFB)";
/// JSON holds only UTF-8 text, so a value from the command line is checked before it becomes one.
Status check_utf8(std::string_view text, std::string_view name);
/// `text` with every byte that is not part of valid UTF-8 written as \xNN, for messages that quote
/// input (stderr and JSON outputs stay UTF-8).
std::string escape_invalid_utf8(std::string_view text);

/// `text` parsed, or an input error "NAME: invalid JSON: line L, column C: ...", the depth error
/// above, or "NAME: /a/b: duplicate key" for the first key an object repeats (nlohmann::json would
/// keep one value silently). Never throws.
Result<nlohmann::json> parse_json_text(std::string_view text, std::string_view name);

}  // namespace ccsim
