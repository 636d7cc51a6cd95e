#include "train/flags.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/common.h"
#include "core/format.h"

namespace ada {

void Flags::add(const std::string& n, int* v, const std::string& h, long long lo, long long hi) {
  flags_.push_back({n, h, kInt, v, std::max<long long>(lo, INT_MIN), std::min<long long>(hi, INT_MAX)});
}
void Flags::add(const std::string& n, long long* v, const std::string& h, long long lo, long long hi) {
  flags_.push_back({n, h, kLong, v, lo, hi});
}
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

bool Flags::integer_range(const std::string& name, long long* lo, long long* hi) const {
  for (auto& f : flags_)
    if ((f.kind == kInt || f.kind == kLong) && f.name == name) {
      *lo = f.lo, *hi = f.hi;
      return true;
    }
  return false;
}

long long parse_integer(const std::string& what, const std::string& text, long long lo, long long hi) {
  // An optional sign, then 1 to 19 decimal digits: nothing that strtoll would skip or stop at.
  size_t i = (!text.empty() && (text[0] == '-' || text[0] == '+')) ? 1 : 0;
  const size_t digits = text.size() - i;
  bool ok = digits >= 1;
  for (size_t k = i; k < text.size(); k++) ok &= text[k] >= '0' && text[k] <= '9';
  const std::string shown = text.size() > 40 ? text.substr(0, 40) + "..." : text;
  check(ok, what + " expects an integer, got '" + shown + "'");
  errno = 0;
  const long long x = std::strtoll(text.c_str(), nullptr, 10);
  const std::string range = std::to_string(lo) + " and " + std::to_string(hi);
  check(errno != ERANGE && x >= lo && x <= hi, what + " must be between " + range + " (got " + shown + ")");
  return x;
}

double parse_number(const std::string& what, const std::string& text) {
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  const std::string shown = text.size() > 40 ? text.substr(0, 40) + "..." : text;
  const bool hex = text.find_first_of("xX") != std::string::npos;  // strtod reads hex floats: not a decimal number
  check(!text.empty() && *end == 0 && !hex && !std::isspace((unsigned char)text[0]),
        what + " expects a number, got '" + shown + "'");
  check(std::isfinite(x), what + " must be a finite number (got " + shown + ")");
  return x;
}

void Flags::assign(Flag& f, const std::string& v) {
  f.set = true;
  switch (f.kind) {
    case kInt: *(int*)f.ptr = (int)parse_integer(f.name, v, f.lo, f.hi); break;
    case kLong: *(long long*)f.ptr = parse_integer(f.name, v, f.lo, f.hi); break;
    case kDouble: *(double*)f.ptr = parse_number(f.name, v); break;
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
