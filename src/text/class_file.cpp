// Class side files: writer, validating reader, and the classes of a run of shards.
#include "text/class_file.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "core/common.h"
#include "train/atomic_file.h"

namespace ada {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Empty when the name is acceptable, else what is wrong with it.
std::string name_problem(const std::string& name) {
  if (name.empty()) return "an empty class name";
  if (name.size() > kMaxClassNameBytes)
    return "class name '" + name + "' is longer than " + std::to_string(kMaxClassNameBytes) + " characters";
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return "class name '" + name + "' has a character outside [A-Za-z0-9_-]";
  }
  return "";
}

// Empty when the names are acceptable (count, each name, no repeats).
std::string names_problem(const std::vector<std::string>& names) {
  if (names.empty()) return "no class names";
  if (names.size() > kMaxClasses)
    return std::to_string(names.size()) + " classes, more than " + std::to_string(kMaxClasses);
  for (size_t i = 0; i < names.size(); i++) {
    const std::string p = name_problem(names[i]);
    if (!p.empty()) return p;
    for (size_t j = 0; j < i; j++)
      if (names[j] == names[i]) return "class name '" + names[i] + "' appears twice";
  }
  return "";
}

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); i++) s += (i ? "," : "") + names[i];
  return s;
}

}  // namespace

std::string class_file_for(const std::string& shard_path) {
  if (ends_with(shard_path, ".bin")) return shard_path.substr(0, shard_path.size() - 4) + ".cls";
  return shard_path + ".cls";
}

void write_class_file(const std::string& path, const TokenClasses& classes) {
  const std::string bad = names_problem(classes.names);
  check(bad.empty(), "write_class_file " + path + ": " + bad);
  check(classes.ids.size() <= size_t(INT32_MAX), "write_class_file " + path + ": too many tokens for one file");
  classes.validate(classes.ids.size(), "write_class_file " + path);
  std::string names;
  for (const std::string& n : classes.names) names += n + "\n";
  int32_t header[256] = {};
  header[0] = kClassFileMagic;
  header[1] = kClassFileVersion;
  header[2] = int32_t(classes.ids.size());
  header[3] = int32_t(classes.names.size());
  header[4] = int32_t(names.size());

  AtomicFile f(path);  // PATH.tmp, fsync, rename: never a half-written side file
  f.write(header, sizeof(header));
  f.write(names);
  f.write(classes.ids.data(), classes.ids.size());
  f.commit();
}

TokenClasses read_class_file(const std::string& path) {
  const std::string what = "class side file " + path;
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    check(file_exists(path), "class side file not found: " + path);
    fail("cannot read class side file: " + path);
  }
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  check(bytes.size() >= kClassFileHeaderBytes, what + " is too short for its header: " + std::to_string(bytes.size()) +
                                                   " bytes, the header alone is " +
                                                   std::to_string(kClassFileHeaderBytes));
  int32_t header[256];
  std::memcpy(header, bytes.data(), sizeof(header));
  check(header[0] == kClassFileMagic, what + ": wrong magic number " + std::to_string(header[0]) + " (expected " +
                                          std::to_string(kClassFileMagic) + "); is this a class side file?");
  check(header[1] == kClassFileVersion, what + ": unsupported version " + std::to_string(header[1]) +
                                            " (expected " + std::to_string(kClassFileVersion) + ")");
  check(header[2] >= 0, what + ": negative token count " + std::to_string(header[2]) + " in the header");
  check(header[3] >= 1 && header[3] <= int32_t(kMaxClasses),
        what + ": " + std::to_string(header[3]) + " classes in the header (expected 1 to " +
            std::to_string(kMaxClasses) + ")");
  check(header[4] >= 0, what + ": negative names block size " + std::to_string(header[4]) + " in the header");
  const size_t n = size_t(header[2]), names_bytes = size_t(header[4]);
  const size_t expect = kClassFileHeaderBytes + names_bytes + n;
  check(bytes.size() == expect, what + ": header says " + std::to_string(n) + " tokens and a " +
                                    std::to_string(names_bytes) + "-byte names block (" + std::to_string(expect) +
                                    " bytes) but the file has " + std::to_string(bytes.size()) + " bytes");

  TokenClasses c;
  const std::string block = bytes.substr(kClassFileHeaderBytes, names_bytes);
  check(!block.empty() && block.back() == '\n', what + ": the names block does not end with a newline");
  size_t start = 0;
  while (start < block.size()) {
    const size_t end = block.find('\n', start);
    c.names.push_back(block.substr(start, end - start));
    start = end + 1;
  }
  check(c.names.size() == size_t(header[3]), what + ": header says " + std::to_string(header[3]) +
                                                 " classes but the names block has " +
                                                 std::to_string(c.names.size()));
  const std::string bad = names_problem(c.names);
  check(bad.empty(), what + ": " + bad);
  c.ids.assign(bytes.begin() + (kClassFileHeaderBytes + names_bytes), bytes.end());
  for (size_t i = 0; i < n; i++)
    check(c.ids[i] < c.names.size(), what + ": token " + std::to_string(i) + " has class " +
                                         std::to_string(c.ids[i]) + " but there are " +
                                         std::to_string(c.names.size()) + " classes");
  return c;
}

TokenClasses read_shard_classes(const std::vector<std::string>& shard_paths, const std::vector<size_t>& sizes) {
  check(shard_paths.size() == sizes.size(), "read_shard_classes: one size per shard");
  // Which shards have a side file: none (plain data) or all.
  size_t with = shard_paths.size();
  for (size_t i = 0; i < shard_paths.size() && with == shard_paths.size(); i++)
    if (file_exists(class_file_for(shard_paths[i]))) with = i;
  TokenClasses all;
  if (with == shard_paths.size()) return all;
  for (size_t i = 0; i < shard_paths.size(); i++) {
    const std::string side = class_file_for(shard_paths[i]);
    check(file_exists(side), "class side file not found: " + side + " (shard " + shard_paths[i] +
                                 " has none, but " + class_file_for(shard_paths[with]) +
                                 " exists: every shard of a run needs one, or none)");
    TokenClasses c = read_class_file(side);
    check(c.ids.size() == sizes[i], "class side file " + side + " has " + std::to_string(c.ids.size()) +
                                        " class ids but its shard " + shard_paths[i] + " has " +
                                        std::to_string(sizes[i]) + " tokens");
    if (all.names.empty()) all.names = c.names;
    check(c.names == all.names, "class side file " + side + " names the classes " + join(c.names) + " but " +
                                    class_file_for(shard_paths[0]) + " names them " + join(all.names));
    all.ids.insert(all.ids.end(), c.ids.begin(), c.ids.end());
  }
  return all;
}

}  // namespace ada
