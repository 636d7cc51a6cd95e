// A small, strict JSON parser (RFC 8259) for the documents this project reads:
// safetensors headers, the lines of metrics.jsonl and GPT-2's encoder.json. Strict means: exactly
// one value, no trailing commas, no comments, no NaN/Infinity, no duplicate
// object keys, no control characters inside strings, valid escapes and valid
// UTF-8. Every error names the source and the byte offset of the problem.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ada {

struct Json {
  enum class Type { Null, Bool, Number, String, Array, Object };
  Type type = Type::Null;
  bool boolean = false;
  double number = 0;
  std::string text;                                  // String: the decoded string; Number: the literal as written
  std::vector<Json> items;                           // Array
  std::vector<std::pair<std::string, Json>> members; // Object, in document order

  bool is(Type t) const { return type == t; }
  // The member named key of an object, or null when absent (or not an object).
  const Json* find(const std::string& key) const;
  // A Number written as a plain non-negative integer that fits 64 bits
  // (no sign, fraction or exponent): true and the value in *out.
  bool to_u64(uint64_t* out) const;
};

// Parses text as one JSON document. Throws ada::Error
// "<source>: <problem> at byte <offset>".
Json parse_json(std::string_view text, const std::string& source);

// s with '"', '\\' and control characters escaped (no quotes added).
std::string json_escape(const std::string& s);
// A JSON string literal (quotes included) for s.
std::string json_quote(const std::string& s);

// The lines of a JSON-lines file (e.g. metrics.jsonl), each parsed; blank
// lines are skipped. A line that does not parse is an error naming the file
// and line, except a last line without its newline, which is dropped: that
// is a write cut short by a crash.
std::vector<Json> read_json_lines(const std::string& path);

}  // namespace ada
