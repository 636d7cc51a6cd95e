// See method_spec.h.
#include "train/method_spec.h"

#include <cctype>
#include <sstream>

#include "core/common.h"

namespace ada {

std::vector<std::string> split_list(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string p; std::getline(ss, p, sep);)
    if (!p.empty()) out.push_back(p);
  return out;
}

std::string spec_label(const std::string& spec) {
  std::string label = spec;
  for (char& c : label)
    if (c == ':' || c == '=' || c == '/') c = '_';
  return label;
}

LabelledSpec labelled_spec(const std::string& spec) {
  LabelledSpec out;
  const std::string tag = "label=";
  for (const std::string& part : split_list(spec, ':')) {
    if (part.rfind(tag, 0) != 0) {
      out.spec += (out.spec.empty() ? "" : ":") + part;
      continue;
    }
    check(!out.relabelled, "method spec '" + spec + "' gives label= twice");
    out.relabelled = true;
    out.label = part.substr(tag.size());
    bool plain = !out.label.empty() && out.label != "." && out.label != "..";
    for (char c : out.label)
      plain = plain && (std::isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.' || c == '@');
    check(plain, "method spec '" + spec + "': label '" + out.label +
                     "' must be a plain file name (letters, digits, '_', '-', '.', '@')");
  }
  check(!out.spec.empty(), "method spec '" + spec + "' names no method");
  if (!out.relabelled) out.label = spec_label(out.spec);
  return out;
}

}  // namespace ada
