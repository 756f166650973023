// A pull reader over JSON text, for the one hot path where building a
// document costs more than the work done with it: a compile reads the
// measured whole-model plan from the database (20 KB for a 12-layer model),
// and nlohmann::json, used everywhere else, takes about 0.2 ms to build it.
// This reader walks the text in place, allocating only for the strings it
// returns, at about a tenth of that.
//
//   JsonReader r(text);
//   if (!r.BeginObject()) return r.error();
//   std::string key;
//   while (r.NextKey(&key)) {
//     if (key == "n") { if (!r.ReadInt(&n)) return r.error(); }
//     else if (!r.Skip()) return r.error();
//   }
//   if (!r.ok() || !r.AtEnd()) return r.error();
//
// Strict RFC 8259 (no comments, no trailing commas), except that strings
// are not checked for valid UTF-8; nesting is limited to 256 levels.
// Errors are sticky: after the first, every call returns false and error()
// says what was expected at which byte offset.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fusetune {

class JsonReader {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject, kInvalid };

  explicit JsonReader(std::string_view text) : text_(text) {}

  // The kind of the next value, without consuming it (kInvalid at the end of
  // the text or on a character no value starts with).
  Kind Peek();

  // Objects: BeginObject, then NextKey until it returns false (the closing
  // brace is consumed then), reading or skipping one value after each key.
  bool BeginObject();
  bool NextKey(std::string* key);
  // The same, the key viewed in place (or, when it has escapes, in a buffer
  // of the reader's): valid until the next call that reads a string.
  bool NextKey(std::string_view* key);
  // Arrays: BeginArray, then NextElement until it returns false.
  bool BeginArray();
  bool NextElement();

  bool ReadString(std::string* out);
  bool ReadString(std::string_view* out);  // valid as NextKey's view
  bool ReadInt(int64_t* out);              // a number without fraction or exponent, in range
  bool ReadDouble(double* out);
  // Any number: `*is_integer` says whether it was an integer in int64 range
  // (then in `*integer`), else it is in `*real`.
  bool ReadNumber(int64_t* integer, double* real, bool* is_integer);
  bool ReadBool(bool* out);
  bool ReadNull();
  bool Skip();  // one value of any kind

  // Only whitespace is left.
  bool AtEnd();
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

 private:
  bool Fail(std::string_view expected);
  void SkipSpace();
  // Inside a string: up to its closing quote, an escape or a control character.
  void SkipPlainCharacters();
  bool Consume(char c, std::string_view expected);
  // Before a member or element: the comma unless it is the first one; false
  // (consuming it) at the closing bracket.
  bool NextItem(char close);
  bool ScanNumber(std::string_view* token);
  bool ReadEscape(std::string* out);

  std::string_view text_;
  size_t pos_ = 0;
  std::vector<bool> first_;  // per open object or array: no item read yet
  std::string error_;
  std::string unescaped_;  // a viewed string that had escapes
};

}  // namespace fusetune
