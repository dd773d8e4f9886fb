#pragma once
/// \file
/// Declared JSON fields (STYLE rules 3 and 4): a document's fields are declared once, in a
/// `visit(V& v, T& t)` function per type, with each field's key, type, range, unit and
/// description; three visitors read those declarations:
///  * FieldReader: JSON -> T, strictly: every problem is collected in a Diagnostics at its JSON
///    Pointer (expected vs. found, the valid choices, the nearest valid key of an unknown one);
///  * FieldWriter: T -> JSON, every field present (defaults included, quantities in base units);
///  * FieldSchema: the declarations -> JSON Schema (draft 2020-12).
/// They cannot drift apart. A visit function calls, for each field, one of the methods every
/// visitor has (choice, integer, number, quantity, bytes, string, path, boolean, object, lists,
/// table); FieldReader::finish() then reports the keys nobody declared.

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "sim/base/diagnostics.hpp"
#include "sim/base/enum_names.hpp"
#include "sim/base/units.hpp"

namespace ccsim {

/// A short description of a JSON value for error messages ("the string \"x\"", "the number 3",
/// "an object {...}"; at most 60 characters of its text).
std::string describe_json(const nlohmann::json& j);
/// "a, b, c".
std::string join_names(const std::vector<std::string>& names);

/// Which quantities a field accepts.
enum class Sign : uint8_t { kPositive, kNonNegative };

/// A string field's required form: a regex and the words saying what it means.
struct StringPattern {
  const char* regex;
  const char* expected;  ///< "a name of letters, digits, '_', '.', '-'"
};

/// A field whose content another declaration table checks (a compressor's parameters, say).
struct TableField {
  /// Validates the field's value (nullptr when absent) found at `path`, reporting every problem in
  /// `diag`, and returns it resolved (defaults filled in).
  std::function<nlohmann::json(const nlohmann::json* value, const std::string& path, Diagnostics& diag)> resolve;
  /// The JSON Schema "allOf" entries constraining the field named `key` (they may depend on its
  /// siblings, as a scheme's parameters depend on the scheme).
  std::function<nlohmann::json(const std::string& key)> schema_all_of;
};

/// Why `path` is not a readable regular file, for messages: "not found", "a directory", "a
/// symbolic link loop", "a special file (not a regular file)"; "" when it is a regular file.
std::string why_not_a_file(const std::filesystem::path& path);

/// JSON -> T, collecting every problem (see the file comment).
class FieldReader {
 public:
  /// Reads `obj`, found at JSON Pointer `path`; relative file paths resolve against `base_dir`.
  FieldReader(const nlohmann::json& obj, std::string path, Diagnostics& diag, const std::filesystem::path& base_dir)
      : obj_(obj), path_(std::move(path)), diag_(diag), base_dir_(base_dir) {}

  void choice(const std::string& key, std::string& out, const std::vector<std::string>& choices, const char*) {
    read_choice(key, out, choices, false);
  }
  void required_choice(const std::string& key, std::string& out, const std::vector<std::string>& choices, const char*) {
    read_choice(key, out, choices, true);
  }
  template <class E, size_t N>
  void choice(const std::string& key, E& out, const EnumName<E> (&names)[N], const char*) {
    std::string name(enum_name<E>(names, out));
    read_choice(key, name, enum_names<E>(names), false);
    if (const auto v = enum_value<E>(names, name)) out = *v;
  }
  void integer(const std::string& key, int64_t& out, int64_t min, int64_t max, const char*);
  void integer_list(const std::string& key, std::vector<int64_t>& out, int64_t min, int64_t max, const char*);
  /// The same into 32-bit unsigned fields (REQUIRES: [min, max] within their range).
  void integer(const std::string& key, uint32_t& out, int64_t min, int64_t max, const char* d) {
    int64_t v = out;
    integer(key, v, min, max, d);
    out = static_cast<uint32_t>(v);
  }
  void integer_list(const std::string& key, std::vector<uint32_t>& out, int64_t min, int64_t max, const char* d) {
    std::vector<int64_t> v(out.begin(), out.end());
    integer_list(key, v, min, max, d);
    out.assign(v.begin(), v.end());
  }
  void number(const std::string& key, double& out, double min, double max, const char*);
  void number_list(const std::string& key, std::vector<double>& out, double min, double max, const char*);
  void quantity(const std::string& key, double& out, UnitKind unit, Sign sign, const char*);
  /// A whole number of bytes (a size quantity).
  void bytes(const std::string& key, uint64_t& out, const char*);
  void string(const std::string& key, std::string& out, const char*) { read_string(key, out, false, nullptr); }
  void required_string(const std::string& key, std::string& out, const char*, const StringPattern* pattern = nullptr) {
    read_string(key, out, true, pattern);
  }
  /// Existing files, made absolute (relative ones against the base folder).
  void path_list(const std::string& key, std::vector<std::string>& out, const char*);
  void path(const std::string& key, std::string& out, const char*);
  /// An existing directory, made absolute (a relative one against the base folder).
  void directory(const std::string& key, std::string& out, const char*);
  void boolean(const std::string& key, bool& out, const char*);
  /// A JSON object whose members the caller checks (their meaning depends on other fields).
  void json_object(const std::string& key, nlohmann::json& out, const char*);
  void table(const std::string& key, nlohmann::json& out, const TableField& field, const char*);

  template <class T>
  void object(const std::string& key, T& out, const char*) {
    const nlohmann::json* v = get(key);
    if (!v) return;
    if (!v->is_object()) return expected(key, "an object", *v);
    FieldReader sub(*v, at(key), diag_, base_dir_);
    visit(sub, out);
    sub.finish();
  }
  /// An object or an array of objects.
  template <class T>
  void object_list(const std::string& key, std::vector<T>& out, const char*) {
    read_object_list(key, out, false);
  }
  /// The same, present and not empty.
  template <class T>
  void required_object_list(const std::string& key, std::vector<T>& out, const char* desc) {
    if (!get_quiet(key)) {
      get(key);
      return diag_.add(at(key), fmt::format("missing required key '{}' ({})", key, desc));
    }
    read_object_list(key, out, true);
  }

  /// Reports keys that no field declared, with the closest declared key.
  void finish();

 private:
  template <class T>
  void read_object_list(const std::string& key, std::vector<T>& out, bool nonempty) {
    const nlohmann::json* v = get(key);
    if (!v) return;
    auto read_one = [&](const nlohmann::json& e, const std::string& p) {
      T item;
      if (!e.is_object()) return diag_.add(p, fmt::format("expected an object, got {}", describe_json(e)));
      FieldReader sub(e, p, diag_, base_dir_);
      visit(sub, item);
      sub.finish();
      out.push_back(std::move(item));
    };
    out.clear();
    if (v->is_object()) return read_one(*v, at(key));
    if (!v->is_array()) return expected(key, "an object or an array of objects", *v);
    if (v->empty() && nonempty) return diag_.add(at(key), "expected at least one object, got an empty array");
    for (size_t i = 0; i < v->size(); ++i) read_one((*v)[i], at(key) + "/" + std::to_string(i));
  }
  std::string at(const std::string& key) const { return path_ + "/" + json_pointer_escape(key); }
  const nlohmann::json* get_quiet(const std::string& key) const;
  const nlohmann::json* get(const std::string& key);
  bool resolve_path(const nlohmann::json& e, const std::string& p, std::string& out, bool directory = false);
  void expected(const std::string& key, const std::string& what, const nlohmann::json& got);
  void read_choice(const std::string& key, std::string& out, const std::vector<std::string>& choices, bool required);
  void read_string(const std::string& key, std::string& out, bool required, const StringPattern* pattern);

  const nlohmann::json& obj_;
  std::string path_;
  Diagnostics& diag_;
  const std::filesystem::path& base_dir_;
  std::set<std::string> declared_;
};

/// T -> JSON, every field present (defaults included, quantities in base units).
class FieldWriter {
 public:
  nlohmann::json out = nlohmann::json::object();

  void choice(const std::string& k, const std::string& v, const std::vector<std::string>&, const char*) { out[k] = v; }
  void required_choice(const std::string& k, const std::string& v, const std::vector<std::string>&, const char*) {
    out[k] = v;
  }
  template <class E, size_t N>
  void choice(const std::string& k, E v, const EnumName<E> (&names)[N], const char*) {
    out[k] = std::string(enum_name<E>(names, v));
  }
  void integer(const std::string& k, int64_t v, int64_t, int64_t, const char*) { out[k] = v; }
  template <class I>
  void integer_list(const std::string& k, const std::vector<I>& v, int64_t, int64_t, const char*) { out[k] = v; }
  void number(const std::string& k, double v, double, double, const char*) { out[k] = v; }
  void number_list(const std::string& k, const std::vector<double>& v, double, double, const char*) { out[k] = v; }
  void quantity(const std::string& k, double v, UnitKind, Sign, const char*) { out[k] = v; }
  void bytes(const std::string& k, uint64_t v, const char*) { out[k] = v; }
  void string(const std::string& k, const std::string& v, const char*) { out[k] = v; }
  void required_string(const std::string& k, const std::string& v, const char*, const StringPattern* = nullptr) {
    out[k] = v;
  }
  void path_list(const std::string& k, const std::vector<std::string>& v, const char*) { out[k] = v; }
  void path(const std::string& k, const std::string& v, const char*) { out[k] = v; }
  void directory(const std::string& k, const std::string& v, const char*) { out[k] = v; }
  void json_object(const std::string& k, const nlohmann::json& v, const char*) { out[k] = v; }
  void boolean(const std::string& k, bool v, const char*) { out[k] = v; }
  void table(const std::string& k, const nlohmann::json& v, const TableField&, const char*) { out[k] = v; }
  template <class T>
  void object(const std::string& k, T& v, const char*) {
    FieldWriter w;
    visit(w, v);
    out[k] = std::move(w.out);
  }
  template <class T>
  void required_object_list(const std::string& k, std::vector<T>& v, const char* d) {
    object_list(k, v, d);
  }
  template <class T>
  void object_list(const std::string& k, std::vector<T>& v, const char*) {
    nlohmann::json arr = nlohmann::json::array();
    for (auto& item : v) {
      FieldWriter w;
      visit(w, item);
      arr.push_back(std::move(w.out));
    }
    out[k] = std::move(arr);
  }
};

/// The declarations -> JSON Schema (draft 2020-12); `object_schema(t, description)` is a type's.
class FieldSchema {
 public:
  nlohmann::json props = nlohmann::json::object();
  nlohmann::json required = nlohmann::json::array();
  nlohmann::json all_of = nlohmann::json::array();

  void choice(const std::string& k, const std::string& def, const std::vector<std::string>& c, const char* d);
  void required_choice(const std::string& k, const std::string&, const std::vector<std::string>& c, const char* d);
  template <class E, size_t N>
  void choice(const std::string& k, E def, const EnumName<E> (&names)[N], const char* d) {
    choice(k, std::string(enum_name<E>(names, def)), enum_names<E>(names), d);
  }
  void integer(const std::string& k, int64_t def, int64_t min, int64_t max, const char* d);
  void integer_list(const std::string& k, const std::vector<int64_t>& def, int64_t min, int64_t max, const char* d);
  void integer_list(const std::string& k, const std::vector<uint32_t>& def, int64_t min, int64_t max, const char* d) {
    integer_list(k, std::vector<int64_t>(def.begin(), def.end()), min, max, d);
  }
  void number(const std::string& k, double def, double min, double max, const char* d);
  void number_list(const std::string& k, const std::vector<double>& def, double min, double max, const char* d);
  void quantity(const std::string& k, double def, UnitKind u, Sign sign, const char* d);
  void bytes(const std::string& k, uint64_t def, const char* d);
  void string(const std::string& k, const std::string& def, const char* d);
  void required_string(const std::string& k, const std::string&, const char* d, const StringPattern* pattern = nullptr);
  void path_list(const std::string& k, const std::vector<std::string>&, const char* d);
  void path(const std::string& k, const std::string&, const char* d);
  void directory(const std::string& k, const std::string& v, const char* d) { path(k, v, d); }
  void json_object(const std::string& k, const nlohmann::json& v, const char* d) {
    props[k] = {{"type", "object"}, {"default", v}, {"description", d}};
  }
  void boolean(const std::string& k, bool def, const char* d);
  void table(const std::string& k, const nlohmann::json&, const TableField& field, const char* d);
  template <class T>
  static nlohmann::json object_schema(T& v, const char* d) {
    FieldSchema w;
    visit(w, v);
    nlohmann::json s = {{"type", "object"}, {"description", d}, {"properties", w.props}, {"additionalProperties", false}};
    if (!w.required.empty()) s["required"] = w.required;
    if (!w.all_of.empty()) s["allOf"] = w.all_of;
    return s;
  }
  template <class T>
  void object(const std::string& k, T& v, const char* d) {
    props[k] = object_schema(v, d);
  }
  template <class T>
  void required_object_list(const std::string& k, std::vector<T>& v, const char* d) {
    list_schema(k, v, d, 1);
    required.push_back(k);
  }
  template <class T>
  void object_list(const std::string& k, std::vector<T>& v, const char* d) {
    list_schema(k, v, d, 0);
  }

 private:
  template <class T>
  void list_schema(const std::string& k, std::vector<T>&, const char* d, int min_items) {
    T item;
    nlohmann::json one = object_schema(item, d);
    props[k] = {{"description", d},
                {"oneOf", nlohmann::json::array({one, {{"type", "array"}, {"minItems", min_items}, {"items", one}}})}};
  }
};

}  // namespace ccsim
