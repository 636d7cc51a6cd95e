// A small command-line parser: each program declares its flags with a
// pointer to the variable, a default (the variable's current value) and a
// help line; parse() fills them and rejects unknown flags and bad values with
// one clear message (ada::Error). "--name value" and "--name=value" both work.
//
// Integer flags take integers only: an optional sign and decimal digits
// ("1.9", "1e3", "0x10", " 5" are refused, never truncated), within the range
// the flag declares (by default what the variable holds). Number flags take
// finite decimal numbers. The same parsing reads values back from checkpoint
// metadata and compare's method specs, since those go through parse() too.
#pragma once
#include <climits>
#include <string>
#include <vector>

namespace ada {

// Bounds of the count flags the programs share (the model sizes' are in core/config.h).
constexpr long long kMaxSteps = 1000000000000LL;  // steps, warmup, eval/log/save intervals: 10^12
constexpr int kMaxBatch = 1 << 16;                // batch, accum, eval batches
constexpr int kMaxThreads = 4096;

// `text` as an integer in [lo, hi], or ada::Error naming `what` (a flag, or a
// metadata key with its file): "--steps expects an integer, got '1.9'",
// "--batch must be between 1 and 65536 (got 0)".
long long parse_integer(const std::string& what, const std::string& text, long long lo = LLONG_MIN,
                        long long hi = LLONG_MAX);
// `text` as a finite number (strtod syntax, no NaN or infinity), or ada::Error naming `what`.
double parse_number(const std::string& what, const std::string& text);

class Flags {
 public:
  explicit Flags(std::string program, std::string summary) : prog_(std::move(program)), summary_(std::move(summary)) {}

  // Integer flags with the range of values they accept ([lo, hi]).
  void add(const std::string& name, int* v, const std::string& help, long long lo = INT_MIN, long long hi = INT_MAX);
  void add(const std::string& name, long long* v, const std::string& help, long long lo = LLONG_MIN,
           long long hi = LLONG_MAX);
  void add(const std::string& name, double* v, const std::string& help);
  void add(const std::string& name, std::string* v, const std::string& help);
  void add(const std::string& name, bool* v, const std::string& help);  // --name, --name=0/1, --no-name
  void section(const std::string& title);

  // Returns false when --help was given (usage already printed).
  bool parse(int argc, char** argv);
  // Positional arguments left after the flags.
  const std::vector<std::string>& positional() const { return positional_; }
  bool was_set(const std::string& name) const;
  // The range [lo, hi] an integer flag accepts; false for other kinds of flag.
  bool integer_range(const std::string& name, long long* lo, long long* hi) const;
  std::string usage() const;
  // "name=value" of every flag, for the run's startup table and metrics header.
  std::vector<std::pair<std::string, std::string>> values() const;

 private:
  enum Kind { kInt, kLong, kDouble, kString, kBool, kSection };
  struct Flag {
    std::string name, help;
    Kind kind;
    void* ptr;
    long long lo = 0, hi = 0;  // integer flags: the accepted range
    bool set = false;
  };
  Flag* find(const std::string& name);
  void assign(Flag& f, const std::string& value);
  std::string prog_, summary_;
  std::vector<Flag> flags_;
  std::vector<std::string> positional_;
};

}  // namespace ada
