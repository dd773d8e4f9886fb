#include "sim/base/status.hpp"

namespace ccsim {

std::string Status::to_string() const {
  switch (code_) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "invalid argument: " + message_;
    case StatusCode::kNotFound: return "not found: " + message_;
    case StatusCode::kUnimplemented: return "unimplemented: " + message_;
    case StatusCode::kInternal: return "internal error: " + message_;
    case StatusCode::kIo: return "I/O error: " + message_;
  }
  return message_;
}

}  // namespace ccsim
