// Recursive-descent JSON parser; see json.h for what "strict" means here.
#include "core/json.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "core/common.h"
#include "core/format.h"
#include "text/utf8.h"

namespace ada {

const Json* Json::find(const std::string& key) const {
  if (type != Type::Object) return nullptr;
  for (auto& m : members)
    if (m.first == key) return &m.second;
  return nullptr;
}

bool Json::to_u64(uint64_t* out) const {
  if (type != Type::Number || text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = uint64_t(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;  // overflow
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += (char)c;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += (char)c;
    }
  }
  return o;
}

std::string json_quote(const std::string& s) { return "\"" + json_escape(s) + "\""; }

namespace {

class Parser {
 public:
  Parser(std::string_view s, const std::string& source) : s_(s), source_(source) {}

  Json document() {
    const size_t bad = utf8_find_invalid(s_);
    if (bad != std::string_view::npos) error("invalid UTF-8", bad);
    // A UTF-8 byte order mark (EF BB BF, as some editors write) is skipped,
    // as RFC 8259 allows; offsets still count from the first byte.
    if (s_.substr(0, 3) == "\xEF\xBB\xBF") i_ = 3;
    Json v = value(0);
    skip_ws();
    if (i_ != s_.size()) error("unexpected text after the JSON value", i_);
    return v;
  }

 private:
  // Nesting limit: a hostile header cannot exhaust the stack.
  static constexpr int kMaxDepth = 64;

  [[noreturn]] void error(const std::string& what, size_t at) const {
    fail(source_ + ": " + what + " at byte " + std::to_string(at));
  }
  // The (whole UTF-8) character at byte i, quoted and escaped for a message.
  std::string character_at(size_t i) const {
    size_t n = 1;
    while (i + n < s_.size() && n < 4 && ((unsigned char)s_[i + n] & 0xC0) == 0x80) n++;
    return quote_untrusted(s_.substr(i, n));
  }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) i_++;
  }
  bool at_end() const { return i_ >= s_.size(); }
  void expect(char c) {
    if (at_end() || s_[i_] != c) error(std::string("expected '") + c + "'", i_);
    i_++;
  }
  void literal(const char* word) {
    const size_t n = std::char_traits<char>::length(word);
    if (s_.substr(i_, n) != word) error("invalid literal", i_);
    i_ += n;
  }

  Json value(int depth) {
    if (depth > kMaxDepth) error("nesting deeper than " + std::to_string(kMaxDepth), i_);
    skip_ws();
    if (at_end()) error("unexpected end of input", i_);
    Json v;
    switch (s_[i_]) {
      case '{': object(v, depth); break;
      case '[': array(v, depth); break;
      case '"': v.type = Json::Type::String, v.text = string(); break;
      case 't': literal("true"), v.type = Json::Type::Bool, v.boolean = true; break;
      case 'f': literal("false"), v.type = Json::Type::Bool; break;
      case 'n': literal("null"); break;
      default:
        if (s_[i_] != '-' && (s_[i_] < '0' || s_[i_] > '9')) error("unexpected character " + character_at(i_), i_);
        number(v);
        break;
    }
    return v;
  }

  void object(Json& v, int depth) {
    v.type = Json::Type::Object;
    i_++;  // '{'
    skip_ws();
    if (!at_end() && s_[i_] == '}') {
      i_++;
      return;
    }
    std::unordered_set<std::string> keys;  // duplicate check in O(1) per key (encoder.json has 50k)
    for (;;) {
      skip_ws();
      const size_t key_at = i_;
      if (at_end() || s_[i_] != '"') error("expected a string key", i_);
      std::string key = string();
      if (!keys.insert(key).second) error("duplicate key " + quote_untrusted(key), key_at);
      skip_ws();
      expect(':');
      v.members.emplace_back(std::move(key), value(depth + 1));
      skip_ws();
      if (!at_end() && s_[i_] == ',') {
        i_++;
        continue;
      }
      expect('}');
      return;
    }
  }

  void array(Json& v, int depth) {
    v.type = Json::Type::Array;
    i_++;  // '['
    skip_ws();
    if (!at_end() && s_[i_] == ']') {
      i_++;
      return;
    }
    for (;;) {
      v.items.push_back(value(depth + 1));
      skip_ws();
      if (!at_end() && s_[i_] == ',') {
        i_++;
        continue;
      }
      expect(']');
      return;
    }
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  void number(Json& v) {
    const size_t start = i_;
    auto digits = [&] {
      const size_t d0 = i_;
      while (!at_end() && s_[i_] >= '0' && s_[i_] <= '9') i_++;
      if (i_ == d0) error("invalid number", start);
    };
    if (s_[i_] == '-') i_++;
    if (!at_end() && s_[i_] == '0') {
      i_++;
      if (!at_end() && s_[i_] >= '0' && s_[i_] <= '9') error("number with a leading zero", start);
    } else {
      digits();
    }
    if (!at_end() && s_[i_] == '.') i_++, digits();
    if (!at_end() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      i_++;
      if (!at_end() && (s_[i_] == '+' || s_[i_] == '-')) i_++;
      digits();
    }
    v.type = Json::Type::Number;
    v.text = std::string(s_.substr(start, i_ - start));
    v.number = std::strtod(v.text.c_str(), nullptr);
  }

  uint32_t hex4() {
    if (i_ + 4 > s_.size()) error("truncated \\u escape", i_);
    uint32_t u = 0;
    for (int k = 0; k < 4; k++) {
      const char c = s_[i_++];
      u <<= 4;
      if (c >= '0' && c <= '9') u |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f') u |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') u |= uint32_t(c - 'A' + 10);
      else error("invalid \\u escape", i_ - 1);
    }
    return u;
  }

  std::string string() {
    const size_t start = i_;
    i_++;  // opening quote
    std::string out;
    for (;;) {
      if (at_end()) error("unterminated string", start);
      const unsigned char c = (unsigned char)s_[i_];
      if (c == '"') {
        i_++;
        return out;
      }
      if (c < 0x20) error("control character in a string", i_);
      if (c != '\\') {
        out += char(c);
        i_++;
        continue;
      }
      const size_t esc = i_++;
      if (at_end()) error("unterminated string", start);
      switch (s_[i_++]) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // high surrogate: a low one must follow
            if (s_.substr(i_, 2) != "\\u") error("unpaired surrogate in \\u escape", esc);
            i_ += 2;
            const uint32_t lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) error("unpaired surrogate in \\u escape", esc);
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            error("unpaired surrogate in \\u escape", esc);
          }
          utf8_append(out, cp);
          break;
        }
        default: error("invalid escape", esc);
      }
    }
  }

  std::string_view s_;
  const std::string& source_;
  size_t i_ = 0;
};

}  // namespace

Json parse_json(std::string_view text, const std::string& source) { return Parser(text, source).document(); }

std::vector<Json> read_json_lines(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  check(bool(f), "cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string all = ss.str();
  std::vector<Json> out;
  size_t start = 0, line = 1;
  while (start < all.size()) {
    size_t end = all.find('\n', start);
    const bool complete = end != std::string::npos;
    if (!complete) end = all.size();
    const std::string_view s(all.data() + start, end - start);
    if (s.find_first_not_of(" \t\r") != std::string_view::npos) {
      try {
        out.push_back(parse_json(s, path + " line " + std::to_string(line)));
      } catch (const Error&) {
        if (complete) throw;  // an unfinished last line is a cut-short write: dropped
      }
    }
    start = end + 1;
    line++;
  }
  return out;
}

}  // namespace ada
