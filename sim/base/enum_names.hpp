#pragma once
/// \file
/// Names of closed choices: an enum's values with the names scenario files, outputs and messages
/// use for them, declared once next to the enum (a table of EnumName), so that loaders, writers and
/// schema generators read the same list.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ccsim {

/// One value of a closed choice and its name.
template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

/// The name of `value` in `names` ("" if absent).
template <class E>
std::string_view enum_name(std::span<const EnumName<E>> names, E value) {
  for (const auto& n : names)
    if (n.value == value) return n.name;
  return "";
}

/// The value named `name`, if any.
template <class E>
std::optional<E> enum_value(std::span<const EnumName<E>> names, std::string_view name) {
  for (const auto& n : names)
    if (n.name == name) return n.value;
  return std::nullopt;
}

/// Every name, in table order.
template <class E>
std::vector<std::string> enum_names(std::span<const EnumName<E>> names) {
  std::vector<std::string> out;
  for (const auto& n : names) out.emplace_back(n.name);
  return out;
}

}  // namespace ccsim
