#pragma once
/// \file
/// Status and Result<T>: the input-error channel (STYLE rule 5). Library code returns these for
/// anything a user can get wrong (scenario files, traces, parameters); tools/ maps them to exit
/// codes. Invariant violations inside the simulator use CCSIM_CHECK (check.hpp) instead.

#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace ccsim {

/// Error categories, modelled on Abseil's canonical codes (the subset ccsim needs).
enum class StatusCode {
  kOk,
  kInvalidArgument,  ///< malformed or out-of-range user input (exit code 2)
  kNotFound,         ///< a referenced file, name or key does not exist (exit code 2)
  kUnimplemented,    ///< valid request this build cannot serve (exit code 2)
  kInternal,         ///< runtime failure that is not the user's input (exit code 1)
  kIo,               ///< the operating system refused a read or write (exit code 1)
};

/// An error code plus a human-readable message; `Status()` is success.
///
/// An input error may carry the JSON Pointer of the input it is about, as data (`pointer()`), apart
/// from the words saying what is wrong (`detail()`). Callers that know where their callee's input
/// sits in a larger document prefix it (`at()`), so a loader reports "/compression/1/params/k"
/// without reading it out of a message. `message()` is the whole text: the contexts added by
/// with_context(), then the pointer, then the detail, separated by ": ".
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string detail, std::string pointer = {})
      : code_(code), detail_(std::move(detail)), pointer_(std::move(pointer)) {
    compose();
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  /// The whole text: "[context: ][pointer: ]detail".
  const std::string& message() const { return message_; }
  /// What is wrong, without the pointer and contexts.
  const std::string& detail() const { return detail_; }
  /// JSON Pointer of the input the error is about, relative to what the callee was given ("" = none).
  const std::string& pointer() const { return pointer_; }
  /// The contexts added by with_context(), outermost first ("" = none).
  const std::string& context() const { return context_; }
  /// True for the codes that mean "the user's input is wrong" (exit code 2).
  bool is_input_error() const {
    return code_ == StatusCode::kInvalidArgument || code_ == StatusCode::kNotFound ||
           code_ == StatusCode::kUnimplemented;
  }
  /// Returns a copy whose message is prefixed by `context: ` (the pointer is kept as data).
  Status with_context(const std::string& context) const {
    if (ok()) return *this;
    Status s = *this;
    s.context_ = s.context_.empty() ? context : context + ": " + s.context_;
    s.compose();
    return s;
  }
  /// Returns a copy whose pointer is `prefix` followed by this one's (e.g. "/compression/0" and
  /// "/params/k" make "/compression/0/params/k").
  Status at(const std::string& prefix) const {
    if (ok()) return *this;
    Status s = *this;
    s.pointer_ = prefix + s.pointer_;
    s.compose();
    return s;
  }
  std::string to_string() const;

 private:
  void compose() {
    message_ = context_;
    if (!pointer_.empty()) message_ += (message_.empty() ? "" : ": ") + pointer_;
    message_ += (message_.empty() ? "" : ": ") + detail_;
  }

  StatusCode code_ = StatusCode::kOk;
  std::string detail_;
  std::string pointer_;
  std::string context_;
  std::string message_;
};

inline Status ok_status() { return Status(); }
inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
/// An input error about the input at JSON Pointer `pointer` (relative to what the callee was given).
inline Status invalid_argument_at(std::string pointer, std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m), std::move(pointer)};
}
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status io_error(std::string m) { return {StatusCode::kIo, std::move(m)}; }

/// Either a value of type T or a non-OK Status.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  /// REQUIRES: ok().
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace ccsim

/// Returns early from the enclosing function when `expr` (a Status) is not OK.
#define CCSIM_RETURN_IF_ERROR(expr)        \
  do {                                     \
    ::ccsim::Status ccsim_status_ = (expr); \
    if (!ccsim_status_.ok()) return ccsim_status_; \
  } while (0)

#define CCSIM_CONCAT_INNER(a, b) a##b
#define CCSIM_CONCAT(a, b) CCSIM_CONCAT_INNER(a, b)
/// `CCSIM_ASSIGN_OR_RETURN(auto x, make_x());` unwraps a Result or returns its Status.
#define CCSIM_ASSIGN_OR_RETURN(lhs, expr) CCSIM_ASSIGN_OR_RETURN_IMPL(CCSIM_CONCAT(ccsim_result_, __LINE__), lhs, expr)
#define CCSIM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
