#include "common/json_reader.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace fusetune {

namespace {

constexpr size_t kMaxDepth = 256;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(uint32_t code, std::string* out) {
  if (code < 0x80) {
    out->push_back(static_cast<char>(code));
  } else if (code < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (code >> 6)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3f)));
  } else if (code < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (code >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (code >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3f)));
  }
}

}  // namespace

bool JsonReader::Fail(std::string_view expected) {
  if (error_.empty()) {
    const std::string found =
        pos_ < text_.size() ? fmt::format("'{}'", text_[pos_]) : std::string("the end");
    error_ = fmt::format("not valid JSON: expected {} at byte {}, found {}", expected, pos_, found);
  }
  return false;
}

void JsonReader::SkipSpace() {
  while (pos_ < text_.size() &&
         (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t'))
    ++pos_;
}

void JsonReader::SkipPlainCharacters() {
  while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\\' &&
         static_cast<unsigned char>(text_[pos_]) >= 0x20)
    ++pos_;
}

bool JsonReader::Consume(char c, std::string_view expected) {
  if (!ok()) return false;
  SkipSpace();
  if (pos_ >= text_.size() || text_[pos_] != c) return Fail(expected);
  ++pos_;
  return true;
}

JsonReader::Kind JsonReader::Peek() {
  SkipSpace();
  if (!ok() || pos_ >= text_.size()) return Kind::kInvalid;
  switch (text_[pos_]) {
    case '{':
      return Kind::kObject;
    case '[':
      return Kind::kArray;
    case '"':
      return Kind::kString;
    case 't':
    case 'f':
      return Kind::kBool;
    case 'n':
      return Kind::kNull;
    default:
      return text_[pos_] == '-' || IsDigit(text_[pos_]) ? Kind::kNumber : Kind::kInvalid;
  }
}

bool JsonReader::BeginObject() {
  if (first_.size() >= kMaxDepth) return Fail("at most 256 levels of nesting");
  if (!Consume('{', "an object")) return false;
  first_.push_back(true);
  return true;
}

bool JsonReader::BeginArray() {
  if (first_.size() >= kMaxDepth) return Fail("at most 256 levels of nesting");
  if (!Consume('[', "an array")) return false;
  first_.push_back(true);
  return true;
}

bool JsonReader::NextItem(char close) {
  if (!ok() || first_.empty()) return false;
  SkipSpace();
  if (pos_ < text_.size() && text_[pos_] == close) {
    ++pos_;
    first_.pop_back();
    return false;
  }
  if (!first_.back() && !Consume(',', close == '}' ? "',' or '}'" : "',' or ']'")) return false;
  first_.back() = false;
  return true;
}

bool JsonReader::NextKey(std::string* key) {
  if (!NextItem('}')) return false;
  return ReadString(key) && Consume(':', "':'");
}

bool JsonReader::NextKey(std::string_view* key) {
  if (!NextItem('}')) return false;
  return ReadString(key) && Consume(':', "':'");
}

bool JsonReader::NextElement() { return NextItem(']'); }

bool JsonReader::ReadString(std::string_view* out) {
  if (!Consume('"', "a string")) return false;
  const size_t start = pos_;
  SkipPlainCharacters();
  if (pos_ < text_.size() && text_[pos_] == '"') {  // no escapes: the text itself
    *out = text_.substr(start, pos_ - start);
    ++pos_;
    return true;
  }
  pos_ = start - 1;  // read it again, decoding
  if (!ReadString(&unescaped_)) return false;
  *out = unescaped_;
  return true;
}

bool JsonReader::ReadString(std::string* out) {
  if (!Consume('"', "a string")) return false;
  out->clear();
  while (true) {
    const size_t start = pos_;
    SkipPlainCharacters();
    out->append(text_.substr(start, pos_ - start));
    if (pos_ >= text_.size()) return Fail("the closing '\"'");
    if (text_[pos_] == '"') {
      ++pos_;
      return true;
    }
    if (text_[pos_] != '\\') return Fail("no control character inside a string");
    ++pos_;
    if (!ReadEscape(out)) return false;
  }
}

bool JsonReader::ReadEscape(std::string* out) {
  if (pos_ >= text_.size()) return Fail("an escape");
  const char c = text_[pos_++];
  switch (c) {
    case '"':
    case '\\':
    case '/':
      out->push_back(c);
      return true;
    case 'b':
      out->push_back('\b');
      return true;
    case 'f':
      out->push_back('\f');
      return true;
    case 'n':
      out->push_back('\n');
      return true;
    case 'r':
      out->push_back('\r');
      return true;
    case 't':
      out->push_back('\t');
      return true;
    case 'u':
      break;
    default:
      --pos_;
      return Fail("a valid escape");
  }
  auto hex4 = [&](uint32_t* v) {
    if (pos_ + 4 > text_.size()) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) {
      const int h = HexValue(text_[pos_ + i]);
      if (h < 0) return false;
      *v = *v * 16 + static_cast<uint32_t>(h);
    }
    pos_ += 4;
    return true;
  };
  uint32_t code = 0;
  if (!hex4(&code)) return Fail("four hex digits after \\u");
  if (code >= 0xd800 && code < 0xdc00) {  // a high surrogate: its low half follows
    uint32_t low = 0;
    if (pos_ + 2 > text_.size() || text_[pos_] != '\\' || text_[pos_ + 1] != 'u')
      return Fail("the low half of a surrogate pair");
    pos_ += 2;
    if (!hex4(&low) || low < 0xdc00 || low > 0xdfff)
      return Fail("the low half of a surrogate pair");
    code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
  } else if (code >= 0xdc00 && code < 0xe000) {
    return Fail("a high surrogate before a low one");
  }
  AppendUtf8(code, out);
  return true;
}

bool JsonReader::ScanNumber(std::string_view* token) {
  SkipSpace();
  if (!ok()) return false;
  const size_t start = pos_;
  auto digits = [&] {
    const size_t from = pos_;
    while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    return pos_ > from;
  };
  if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
  if (pos_ < text_.size() && text_[pos_] == '0') {
    ++pos_;
  } else if (!digits()) {
    pos_ = start;
    return Fail("a number");
  }
  if (pos_ < text_.size() && text_[pos_] == '.') {
    ++pos_;
    if (!digits()) return Fail("digits after '.'");
  }
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    ++pos_;
    if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
    if (!digits()) return Fail("digits in the exponent");
  }
  *token = text_.substr(start, pos_ - start);
  return true;
}

bool JsonReader::ReadNumber(int64_t* integer, double* real, bool* is_integer) {
  const size_t start = (SkipSpace(), pos_);
  std::string_view token;
  if (!ScanNumber(&token)) return false;
  const char* last = token.data() + token.size();
  const auto as_int = std::from_chars(token.data(), last, *integer);
  *is_integer = as_int.ec == std::errc() && as_int.ptr == last;
  if (*is_integer) return true;
  const auto as_real = std::from_chars(token.data(), last, *real);
  if (as_real.ec != std::errc() || !std::isfinite(*real)) {
    pos_ = start;
    return Fail("a finite number");
  }
  return true;
}

bool JsonReader::ReadInt(int64_t* out) {
  const size_t start = (SkipSpace(), pos_);
  double real = 0;
  bool is_integer = false;
  if (!ReadNumber(out, &real, &is_integer)) return false;
  if (is_integer) return true;
  pos_ = start;
  return Fail("an integer in the range of int64");
}

bool JsonReader::ReadDouble(double* out) {
  int64_t integer = 0;
  bool is_integer = false;
  if (!ReadNumber(&integer, out, &is_integer)) return false;
  if (is_integer) *out = static_cast<double>(integer);
  return true;
}

bool JsonReader::ReadBool(bool* out) {
  SkipSpace();
  if (!ok()) return false;
  if (text_.substr(pos_, 4) == "true") {
    pos_ += 4;
    *out = true;
    return true;
  }
  if (text_.substr(pos_, 5) == "false") {
    pos_ += 5;
    *out = false;
    return true;
  }
  return Fail("true or false");
}

bool JsonReader::ReadNull() {
  SkipSpace();
  if (!ok()) return false;
  if (text_.substr(pos_, 4) != "null") return Fail("null");
  pos_ += 4;
  return true;
}

bool JsonReader::Skip() {
  std::string_view unused;  // viewed, not copied
  switch (Peek()) {
    case Kind::kObject: {
      if (!BeginObject()) return false;
      while (NextKey(&unused))
        if (!Skip()) return false;
      return ok();
    }
    case Kind::kArray: {
      if (!BeginArray()) return false;
      while (NextElement())
        if (!Skip()) return false;
      return ok();
    }
    case Kind::kString:
      return ReadString(&unused);
    case Kind::kNumber: {
      double d;
      return ReadDouble(&d);
    }
    case Kind::kBool: {
      bool b;
      return ReadBool(&b);
    }
    case Kind::kNull:
      return ReadNull();
    case Kind::kInvalid:
      break;
  }
  return Fail("a value");
}

bool JsonReader::AtEnd() {
  SkipSpace();
  return ok() && pos_ == text_.size();
}

}  // namespace fusetune
