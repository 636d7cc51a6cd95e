#include "train/flags.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/common.h"
#include "core/format.h"

namespace ada {

void Flags::add(const std::string& n, int* v, const std::string& h) { flags_.push_back({n, h, kInt, v}); }
void Flags::add(const std::string& n, long long* v, const std::string& h) { flags_.push_back({n, h, kLong, v}); }
void Flags::add(const std::string& n, double* v, const std::string& h) { flags_.push_back({n, h, kDouble, v}); }
void Flags::add(const std::string& n, std::string* v, const std::string& h) { flags_.push_back({n, h, kString, v}); }
void Flags::add(const std::string& n, bool* v, const std::string& h) { flags_.push_back({n, h, kBool, v}); }
void Flags::section(const std::string& title) { flags_.push_back({title, "", kSection, nullptr}); }

Flags::Flag* Flags::find(const std::string& name) {
  for (auto& f : flags_)
    if (f.kind != kSection && f.name == name) return &f;
  return nullptr;
}

bool Flags::was_set(const std::string& name) const {
  for (auto& f : flags_)
    if (f.kind != kSection && f.name == name) return f.set;
  return false;
}

static long long parse_integer(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  // accept 1e6-style integers too
  if (*end == 'e' || *end == 'E' || *end == '.') {
    double d = std::strtod(v.c_str(), &end);
    if (*end == 0 && d == (double)(long long)d) return (long long)d;
  }
  check(!v.empty() && *end == 0 && errno == 0, flag + " expects an integer, got '" + v + "'");
  return x;
}

void Flags::assign(Flag& f, const std::string& v) {
  f.set = true;
  switch (f.kind) {
    case kInt: {
      long long x = parse_integer(f.name, v);
      check(x >= -2147483647LL && x <= 2147483647LL, f.name + " value out of range: " + v);
      *(int*)f.ptr = (int)x;
      break;
    }
    case kLong: *(long long*)f.ptr = parse_integer(f.name, v); break;
    case kDouble: {
      char* end = nullptr;
      double x = std::strtod(v.c_str(), &end);
      check(!v.empty() && *end == 0, f.name + " expects a number, got '" + v + "'");
      *(double*)f.ptr = x;
      break;
    }
    case kString: *(std::string*)f.ptr = v; break;
    case kBool:
      check(v == "1" || v == "0" || v == "true" || v == "false", f.name + " expects 0/1 or true/false, got '" + v + "'");
      *(bool*)f.ptr = (v == "1" || v == "true");
      break;
    case kSection: break;
  }
}

bool Flags::parse(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(usage().c_str(), stdout);
      return false;
    }
    if (a.size() < 3 || a.compare(0, 2, "--") != 0) {
      positional_.push_back(a);
      continue;
    }
    std::string name = a, value;
    bool has_value = false;
    const size_t eq = a.find('=');
    if (eq != std::string::npos) name = a.substr(0, eq), value = a.substr(eq + 1), has_value = true;
    Flag* f = find(name);
    if (!f && name.compare(0, 5, "--no-") == 0) {
      Flag* b = find("--" + name.substr(5));
      if (b && b->kind == kBool && !has_value) {
        *(bool*)b->ptr = false;
        b->set = true;
        continue;
      }
    }
    check(f != nullptr, "unknown flag " + name + " (see " + prog_ + " --help)");
    if (f->kind == kBool && !has_value) {
      *(bool*)f->ptr = true;
      f->set = true;
      continue;
    }
    if (!has_value) {
      check(i + 1 < argc, name + " needs a value");
      value = argv[++i];
    }
    assign(*f, value);
  }
  return true;
}

static std::string current_value(int kind, void* p) {
  std::ostringstream s;
  switch (kind) {
    case 0: s << *(int*)p; break;
    case 1: s << *(long long*)p; break;
    case 2: s << shortest_double(*(double*)p); break;  // reads back as the same double
    case 3: s << *(std::string*)p; break;
    case 4: s << (*(bool*)p ? "1" : "0"); break;
  }
  return s.str();
}

std::string Flags::usage() const {
  std::ostringstream s;
  s << "usage: " << prog_ << " [flags]\n" << summary_ << "\n";
  for (auto& f : flags_) {
    if (f.kind == kSection) {
      s << "\n" << f.name << ":\n";
      continue;
    }
    std::string left = "  " + f.name;
    if (left.size() < 26) left.resize(26, ' ');
    s << left << " " << f.help << " [" << current_value(f.kind, f.ptr) << "]\n";
  }
  return s.str();
}

std::vector<std::pair<std::string, std::string>> Flags::values() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& f : flags_)
    if (f.kind != kSection) out.push_back({f.name.substr(2), current_value(f.kind, f.ptr)});
  return out;
}

}  // namespace ada
