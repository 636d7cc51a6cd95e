// A small command-line parser: each program declares its flags with a
// pointer to the variable, a default (the variable's current value) and a
// help line; parse() fills them and rejects unknown flags and bad values with
// one clear message (ada::Error). "--name value" and "--name=value" both work.
#pragma once
#include <string>
#include <vector>

namespace ada {

class Flags {
 public:
  explicit Flags(std::string program, std::string summary) : prog_(std::move(program)), summary_(std::move(summary)) {}

  void add(const std::string& name, int* v, const std::string& help);
  void add(const std::string& name, long long* v, const std::string& help);
  void add(const std::string& name, double* v, const std::string& help);
  void add(const std::string& name, std::string* v, const std::string& help);
  void add(const std::string& name, bool* v, const std::string& help);  // --name, --name=0/1, --no-name
  void section(const std::string& title);

  // Returns false when --help was given (usage already printed).
  bool parse(int argc, char** argv);
  // Positional arguments left after the flags.
  const std::vector<std::string>& positional() const { return positional_; }
  bool was_set(const std::string& name) const;
  std::string usage() const;
  // "name=value" of every flag, for the run's startup table and metrics header.
  std::vector<std::pair<std::string, std::string>> values() const;

 private:
  enum Kind { kInt, kLong, kDouble, kString, kBool, kSection };
  struct Flag {
    std::string name, help;
    Kind kind;
    void* ptr;
    bool set = false;
  };
  Flag* find(const std::string& name);
  void assign(Flag& f, const std::string& value);
  std::string prog_, summary_;
  std::vector<Flag> flags_;
  std::vector<std::string> positional_;
};

}  // namespace ada
