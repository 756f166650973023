// common/: the error policy shared by every module.
//
// Map of the module: common/README.md (what it offers, one line per file).
//
// Policy: a failure that a user can cause (bad file, unsupported op, shape
// mismatch) is returned as an Error whose message names the object (file,
// node, tensor, field). Exceptions never cross a module boundary; FT_CHECK is
// for broken invariants only.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "common/check.h"

namespace fusetune {

enum class ErrorCode {
  kInvalidArgument,  // a bad flag, option or API argument
  kNotFound,         // a file, tensor, node or record that does not exist
  kParse,            // text or binary input that cannot be read
  kUnsupported,      // valid input that fusetune cannot handle (an op, a dtype)
  kShapeMismatch,    // shapes or dtypes that do not agree
  kIo,               // the operating system refused a read or write
  kCorrupt,          // stored data that fails its own checks
  kInternal,         // a failure that is fusetune's fault
};

const char* ErrorCodeName(ErrorCode code);

class Error {
 public:
  Error(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code>: <message>", for printing.
  std::string ToString() const;
  // Adds context in front of the message: "while reading x.onnx: <message>".
  Error WithContext(const std::string& context) const {
    return Error(code_, context + ": " + message_);
  }

 private:
  ErrorCode code_;
  std::string message_;
};

// Result<T>: either a value or an Error (std::expected is C++23).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}      // NOLINT
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    FT_CHECK(ok(), "Result::value() on an error: " + std::get<1>(state_).ToString());
    return std::get<0>(state_);
  }
  const T& value() const& {
    FT_CHECK(ok(), "Result::value() on an error: " + std::get<1>(state_).ToString());
    return std::get<0>(state_);
  }
  T&& value() && {
    FT_CHECK(ok(), "Result::value() on an error: " + std::get<1>(state_).ToString());
    return std::get<0>(std::move(state_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    FT_CHECK(!ok(), "Result::error() on a value");
    return std::get<1>(state_);
  }

 private:
  std::variant<T, Error> state_;
};

// Status: success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}  // NOLINT
  static Status Ok() { return Status(); }
  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const {
    FT_CHECK(!ok(), "Status::error() on success");
    return *error_;
  }

 private:
  std::optional<Error> error_;
};

// Reporters for checks written once as a list of rules,
//   if (bad) return broken([&] { return fmt::format(...); });
// that run both explained (validation: KeepReason stores the first broken
// rule's reason) and quietly (enumerating a tiling space, where most points
// break a rule and formatting every reason would cost more than checking:
// IgnoreReason). Both return false, the rule list's answer.
struct KeepReason {
  std::string* why;
  template <typename Describe>
  bool operator()(Describe&& describe) const {
    *why = describe();
    return false;
  }
};
struct IgnoreReason {
  template <typename Describe>
  bool operator()(Describe&&) const {
    return false;
  }
};

}  // namespace fusetune

// Propagation helpers: return the error of an expression to the caller.
#define FT_RETURN_IF_ERROR(expr)                     \
  do {                                               \
    auto ft_status_ = (expr);                        \
    if (!ft_status_.ok()) return ft_status_.error(); \
  } while (0)

#define FT_CONCAT_INNER(a, b) a##b
#define FT_CONCAT(a, b) FT_CONCAT_INNER(a, b)
#define FT_ASSIGN_OR_RETURN(lhs, expr) \
  FT_ASSIGN_OR_RETURN_IMPL(FT_CONCAT(ft_result_, __LINE__), lhs, expr)
#define FT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.error();             \
  lhs = std::move(tmp).value()
