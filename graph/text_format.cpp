#include "graph/text_format.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <sstream>

#include "common/hash.h"
#include "common/rng.h"
#include "graph/shape_inference.h"

namespace fusetune::graph {

namespace {

enum class Tok { kIdent, kString, kNumber, kPunct, kEnd };

struct Token {
  Tok kind;
  std::string text;
  int line;
};

class Lexer {
 public:
  explicit Lexer(const std::string& text) : text_(text) {}

  Result<std::vector<Token>> Run() {
    std::vector<Token> tokens;
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size()) break;
      const char c = text_[pos_];
      if (c == '"') {
        FT_ASSIGN_OR_RETURN(std::string s, ReadString());
        tokens.push_back({Tok::kString, s, line_});
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 ((c == '-' || c == '+' || c == '.') && NextIsNumber())) {
        tokens.push_back({Tok::kNumber, ReadWhile([](char ch) {
                            return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' ||
                                   ch == '-' || ch == '+';
                          }),
                          line_});
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        tokens.push_back({Tok::kIdent, ReadWhile([](char ch) {
                            return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' ||
                                   ch == '.';
                          }),
                          line_});
        // Domain-qualified op types: com.example::Op
        if (text_.compare(pos_, 2, "::") == 0) {
          pos_ += 2;
          tokens.back().text += "::" + ReadWhile([](char ch) {
                                  return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
                                });
        }
      } else if (std::string("=,()[]{}:").find(c) != std::string::npos) {
        tokens.push_back({Tok::kPunct, std::string(1, c), line_});
        ++pos_;
      } else {
        return Error(ErrorCode::kParse,
                     fmt::format("line {}: unexpected character '{}'", line_, c));
      }
    }
    tokens.push_back({Tok::kEnd, "", line_});
    return tokens;
  }

 private:
  void SkipSpace() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\n') {
        ++line_;
        ++pos_;
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }
  bool NextIsNumber() const {
    return pos_ + 1 < text_.size() &&
           (std::isdigit(static_cast<unsigned char>(text_[pos_ + 1])) || text_[pos_ + 1] == '.' ||
            text_.compare(pos_ + 1, 3, "inf") == 0);
  }
  template <typename Pred>
  std::string ReadWhile(Pred pred) {
    const size_t start = pos_;
    while (pos_ < text_.size() && pred(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }
  Result<std::string> ReadString() {
    std::string s;
    ++pos_;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
      if (text_[pos_] == '\n') ++line_;
      s += text_[pos_++];
    }
    if (pos_ >= text_.size())
      return Error(ErrorCode::kParse, fmt::format("line {}: unterminated string", line_));
    ++pos_;
    return s;
  }

  const std::string& text_;
  size_t pos_ = 0;
  int line_ = 1;
};

class Parser {
 public:
  Parser(std::vector<Token> tokens, bool constant_data)
      : toks_(std::move(tokens)), constant_data_(constant_data) {}

  Result<Graph> Run() {
    FT_RETURN_IF_ERROR(ExpectWord("graph"));
    if (Peek().kind == Tok::kIdent && Peek().text != "opset") graph_.name = Next().text;
    if (PeekWord("opset")) {
      Next();
      FT_ASSIGN_OR_RETURN(double v, Number());
      graph_.opset = static_cast<int64_t>(v);
    }
    FT_RETURN_IF_ERROR(Expect("{"));
    while (!PeekPunct("}")) {
      if (Peek().kind == Tok::kEnd) return Fail("missing '}' at the end of the graph");
      FT_RETURN_IF_ERROR(Statement());
    }
    Next();
    if (Peek().kind != Tok::kEnd) return Fail("text after the closing '}'");
    if (graph_.outputs.empty()) return Fail("the graph has no 'output' statement");
    return std::move(graph_);
  }

 private:
  const Token& Peek() const { return toks_[pos_]; }
  const Token& Next() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }
  bool PeekPunct(const char* p) const { return Peek().kind == Tok::kPunct && Peek().text == p; }
  bool PeekWord(const char* w) const { return Peek().kind == Tok::kIdent && Peek().text == w; }
  Error Fail(const std::string& msg) const {
    return Error(ErrorCode::kParse, fmt::format("line {}: {}", Peek().line, msg));
  }
  Status Expect(const char* p) {
    if (!PeekPunct(p)) return Fail(fmt::format("expected '{}' but found '{}'", p, Peek().text));
    Next();
    return Status::Ok();
  }
  Status ExpectWord(const char* w) {
    if (!PeekWord(w)) return Fail(fmt::format("expected '{}' but found '{}'", w, Peek().text));
    Next();
    return Status::Ok();
  }
  Result<std::string> Name() {
    if (Peek().kind != Tok::kIdent && Peek().kind != Tok::kString)
      return Fail(fmt::format("expected a name but found '{}'", Peek().text));
    return Next().text;
  }
  Result<double> Number() {
    if (Peek().kind != Tok::kNumber && !PeekWord("inf") && !PeekWord("nan"))
      return Fail(fmt::format("expected a number but found '{}'", Peek().text));
    const std::string t = Next().text;
    try {
      size_t used = 0;
      const double v = std::stod(t, &used);
      if (used != t.size()) return Fail(fmt::format("bad number '{}'", t));
      return v;
    } catch (...) {
      return Fail(fmt::format("bad number '{}'", t));
    }
  }
  static bool LooksFloat(const std::string& t) {
    return t.find_first_of(".eEn") != std::string::npos;  // 1.0, 1e-5, inf, nan
  }

  Result<TensorType> Type() {
    FT_ASSIGN_OR_RETURN(std::string dt, Name());
    auto dtype = ParseDataType(dt);
    if (!dtype) return Fail(fmt::format("unknown dtype '{}'", dt));
    TensorType t;
    t.dtype = *dtype;
    FT_RETURN_IF_ERROR(Expect("["));
    bool symbolic = false;
    while (!PeekPunct("]")) {
      std::string sym;
      if (Peek().kind == Tok::kIdent) {
        sym = Next().text;
        FT_RETURN_IF_ERROR(Expect("="));
        symbolic = true;
      }
      FT_ASSIGN_OR_RETURN(double d, Number());
      if (d < 0 || d != std::floor(d)) return Fail("dimensions must be non-negative integers");
      t.dims.push_back(static_cast<int64_t>(d));
      t.symbols.push_back(sym);
      if (!PeekPunct("]")) FT_RETURN_IF_ERROR(Expect(","));
    }
    Next();
    if (!symbolic) t.symbols.clear();
    return t;
  }

  Result<std::vector<double>> NumberList() {
    FT_RETURN_IF_ERROR(Expect("["));
    std::vector<double> v;
    while (!PeekPunct("]")) {
      FT_ASSIGN_OR_RETURN(double x, Number());
      v.push_back(x);
      if (!PeekPunct("]")) FT_RETURN_IF_ERROR(Expect(","));
    }
    Next();
    return v;
  }

  // Integers exactly: through a double, INT64_MAX (a Slice's "to the end")
  // would round to a value int64 cannot hold.
  Result<std::vector<int64_t>> IntegerList() {
    FT_RETURN_IF_ERROR(Expect("["));
    std::vector<int64_t> v;
    while (!PeekPunct("]")) {
      if (Peek().kind != Tok::kNumber || LooksFloat(Peek().text))
        return Fail(fmt::format("expected an integer but found '{}'", Peek().text));
      const std::string t = Next().text;
      try {
        size_t used = 0;
        v.push_back(std::stoll(t, &used));
        if (used != t.size()) return Fail(fmt::format("bad integer '{}'", t));
      } catch (...) {
        return Fail(fmt::format("bad integer '{}'", t));
      }
      if (!PeekPunct("]")) FT_RETURN_IF_ERROR(Expect(","));
    }
    Next();
    return v;
  }

  template <typename T>
  Result<Tensor> Filled(DataType dtype, const Dims& dims, const std::vector<T>& values) {
    Tensor t(dtype, dims);
    if (static_cast<int64_t>(values.size()) != t.numel())
      return Fail(
          fmt::format("{} values given for a tensor of {} elements", values.size(), t.numel()));
    std::copy(values.begin(), values.end(), t.data<T>());
    return t;
  }

  Result<Tensor> TensorValues(const TensorType& type) {
    if (type.dtype == DataType::kInt64) {
      FT_ASSIGN_OR_RETURN(auto values, IntegerList());
      return Filled(DataType::kInt64, type.dims, values);
    }
    FT_ASSIGN_OR_RETURN(auto values, NumberList());
    FT_ASSIGN_OR_RETURN(Tensor f64, Filled(DataType::kFloat64, type.dims, values));
    return f64.CastTo(type.dtype);
  }

  Status Statement() {
    if (PeekWord("input")) {
      Next();
      FT_ASSIGN_OR_RETURN(std::string name, Name());
      FT_RETURN_IF_ERROR(Expect(":"));
      FT_ASSIGN_OR_RETURN(TensorType type, Type());
      if (graph_.FindValue(name)) return Fail(fmt::format("'{}' is defined twice", name));
      graph_.AddInput(name, type);
      return Status::Ok();
    }
    if (PeekWord("const")) {
      Next();
      FT_ASSIGN_OR_RETURN(std::string name, Name());
      FT_RETURN_IF_ERROR(Expect(":"));
      FT_ASSIGN_OR_RETURN(TensorType type, Type());
      Tensor value;
      if (PeekPunct("=")) {
        Next();
        FT_ASSIGN_OR_RETURN(value, TensorValues(type));
      } else {
        if (!IsFloat(type.dtype))
          return Fail(fmt::format("integer constant '{}' needs values", name));
        if (!constant_data_) {
          if (graph_.FindValue(name)) return Fail(fmt::format("'{}' is defined twice", name));
          graph_.AddConstant(name, Tensor::ShapeOnly(type.dtype, type.dims));
          return Status::Ok();
        }
        Rng rng(HashBytes(name.data(), name.size()));
        Tensor f(DataType::kFloat32, type.dims);
        for (int64_t i = 0; i < f.numel(); ++i)
          f.data<float>()[i] = static_cast<float>(0.5 * rng.Normal());
        value = f.CastTo(type.dtype);
      }
      if (graph_.FindValue(name)) return Fail(fmt::format("'{}' is defined twice", name));
      graph_.AddConstant(name, value);
      return Status::Ok();
    }
    if (PeekWord("output")) {
      Next();
      while (true) {
        FT_ASSIGN_OR_RETURN(std::string name, Name());
        auto id = graph_.FindValue(name);
        if (!id) return Fail(fmt::format("output '{}' is not defined", name));
        graph_.outputs.push_back(*id);
        if (!PeekPunct(",")) break;
        Next();
      }
      return Status::Ok();
    }
    return NodeStatement();
  }

  Status NodeStatement() {
    std::vector<std::string> outs;
    while (true) {
      FT_ASSIGN_OR_RETURN(std::string name, Name());
      outs.push_back(name);
      if (!PeekPunct(",")) break;
      Next();
    }
    FT_RETURN_IF_ERROR(Expect("="));
    Node node;
    FT_ASSIGN_OR_RETURN(std::string op, Name());
    const size_t sep = op.find("::");
    if (sep != std::string::npos) {
      node.domain = op.substr(0, sep);
      op = op.substr(sep + 2);
    }
    node.op_type = op;
    FT_RETURN_IF_ERROR(Expect("("));
    while (!PeekPunct(")")) {
      FT_ASSIGN_OR_RETURN(std::string in, Name());
      if (in == "_") {
        node.inputs.push_back(kNoValue);
      } else {
        auto id = graph_.FindValue(in);
        if (!id) return Fail(fmt::format("'{}' is used before it is defined", in));
        node.inputs.push_back(*id);
      }
      if (!PeekPunct(")")) FT_RETURN_IF_ERROR(Expect(","));
    }
    Next();
    if (PeekPunct("{")) FT_RETURN_IF_ERROR(AttributeList(node));
    for (const std::string& o : outs) {
      if (o == "_") {
        node.outputs.push_back(kNoValue);
        continue;
      }
      if (graph_.FindValue(o)) return Fail(fmt::format("'{}' is defined twice", o));
      node.outputs.push_back(graph_.AddValue(o));
    }
    graph_.AddNode(std::move(node));
    return Status::Ok();
  }

  Status AttributeList(Node& node) {
    Next();
    while (!PeekPunct("}")) {
      FT_ASSIGN_OR_RETURN(std::string name, Name());
      FT_RETURN_IF_ERROR(Expect("="));
      FT_ASSIGN_OR_RETURN(AttrValue value, Attribute());
      node.attrs.Set(name, std::move(value));
      if (!PeekPunct("}")) FT_RETURN_IF_ERROR(Expect(","));
    }
    Next();
    return Status::Ok();
  }

  Result<AttrValue> Attribute() {
    if (Peek().kind == Tok::kString) return AttrValue(Next().text);
    if (Peek().kind == Tok::kIdent && ParseDataType(Peek().text) && toks_[pos_ + 1].text == "[") {
      FT_ASSIGN_OR_RETURN(TensorType type, Type());
      FT_ASSIGN_OR_RETURN(Tensor t, TensorValues(type));
      return AttrValue(std::move(t));
    }
    if (PeekPunct("[")) {
      if (toks_[pos_ + 1].kind == Tok::kString) {
        Next();
        std::vector<std::string> v;
        while (!PeekPunct("]")) {
          if (Peek().kind != Tok::kString) return Fail("expected a string in the list");
          v.push_back(Next().text);
          if (!PeekPunct("]")) FT_RETURN_IF_ERROR(Expect(","));
        }
        Next();
        return AttrValue(std::move(v));
      }
      bool is_float = false;
      for (size_t i = pos_; toks_[i].kind != Tok::kEnd && toks_[i].text != "]"; ++i)
        if (toks_[i].kind == Tok::kNumber && LooksFloat(toks_[i].text)) is_float = true;
      FT_ASSIGN_OR_RETURN(auto values, NumberList());
      if (is_float) return AttrValue(std::vector<float>(values.begin(), values.end()));
      return AttrValue(std::vector<int64_t>(values.begin(), values.end()));
    }
    const bool is_float = LooksFloat(Peek().text);
    FT_ASSIGN_OR_RETURN(double v, Number());
    if (is_float) return AttrValue(static_cast<float>(v));
    return AttrValue(static_cast<int64_t>(v));
  }

  std::vector<Token> toks_;
  bool constant_data_ = true;
  size_t pos_ = 0;
  Graph graph_;
};

// ---- printing -------------------------------------------------------------------

bool IsPlainName(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  static const char* kWords[] = {"graph", "input", "const", "output", "opset"};
  for (const char* w : kWords)
    if (s == w) return false;
  return !ParseDataType(s).has_value();
}

std::string Quote(const std::string& s) {
  if (IsPlainName(s)) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

std::string FormatFloat(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string FormatValues(const Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (i) s += ", ";
    s += IsFloat(t.dtype()) ? FormatFloat(t.GetAsDouble(i)) : std::to_string(t.GetAsInt(i));
  }
  return s + "]";
}

std::string FormatAttr(const AttrValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>)
          return std::to_string(v);
        else if constexpr (std::is_same_v<T, float>)
          return FormatFloat(v);
        else if constexpr (std::is_same_v<T, std::string>)
          return "\"" + v + "\"";
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          std::string s = "[";
          for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
          return s + "]";
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          std::string s = "[";
          for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + FormatFloat(v[i]);
          return s + "]";
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string s = "[";
          for (size_t i = 0; i < v.size(); ++i) s += (i ? ", \"" : "\"") + v[i] + "\"";
          return s + "]";
        } else {
          TensorType t{v.dtype(), v.dims(), {}};
          return t.ToString() + " " + FormatValues(v);
        }
      },
      value);
}

}  // namespace

Result<Graph> ParseGraphText(const std::string& text, const TextParseOptions& options) {
  Lexer lexer(text);
  FT_ASSIGN_OR_RETURN(std::vector<Token> tokens, lexer.Run());
  Parser parser(std::move(tokens), options.constant_data);
  FT_ASSIGN_OR_RETURN(Graph graph, parser.Run());
  if (options.infer_shapes) {
    FT_RETURN_IF_ERROR(CheckSupportedOps(graph));
    InferOptions infer;
    infer.fold_constants = options.fold_constants;
    FT_RETURN_IF_ERROR(InferShapes(graph, infer));
  }
  return graph;
}

std::string PrintGraphText(const Graph& graph, const TextPrintOptions& options) {
  std::ostringstream out;
  out << "graph " << (graph.name.empty() ? "g" : Quote(graph.name)) << " opset " << graph.opset
      << " {\n";
  for (ValueId v : graph.inputs)
    out << "  input " << Quote(graph.value(v).name) << ": " << graph.type(v).ToString() << "\n";
  for (ValueId id = 0; id < static_cast<ValueId>(graph.values.size()); ++id) {
    const Value& v = graph.value(id);
    if (!v.is_constant()) continue;
    out << "  const " << Quote(v.name) << ": " << v.type.ToString();
    if (v.constant->numel() <= options.max_inline_elements || options.inline_values.count(id)) {
      out << " = " << FormatValues(*v.constant);
    } else {
      out << "  # " << v.constant->numel() << " values, hash "
          << HashToHex(HashBytes(v.constant->raw(), v.constant->nbytes()));
    }
    out << "\n";
  }
  for (const Node& node : graph.nodes) {
    out << "  ";
    for (size_t i = 0; i < node.outputs.size(); ++i)
      out << (i ? ", " : "")
          << (node.outputs[i] == kNoValue ? "_" : Quote(graph.value(node.outputs[i]).name));
    out << " = " << (node.domain.empty() ? "" : node.domain + "::") << node.op_type << "(";
    for (size_t i = 0; i < node.inputs.size(); ++i)
      out << (i ? ", " : "")
          << (node.inputs[i] == kNoValue ? "_" : Quote(graph.value(node.inputs[i]).name));
    out << ")";
    if (!node.attrs.empty()) {
      out << " {";
      bool first = true;
      for (const auto& [name, value] : node.attrs.all()) {
        out << (first ? "" : ", ") << name << "=" << FormatAttr(value);
        first = false;
      }
      out << "}";
    }
    if (options.print_types && !node.outputs.empty() && node.outputs[0] != kNoValue &&
        graph.value(node.outputs[0]).has_type)
      out << "  # " << graph.type(node.outputs[0]).ToString();
    out << "\n";
  }
  out << "  output ";
  for (size_t i = 0; i < graph.outputs.size(); ++i)
    out << (i ? ", " : "") << Quote(graph.value(graph.outputs[i]).name);
  out << "\n}\n";
  return out.str();
}

}  // namespace fusetune::graph
