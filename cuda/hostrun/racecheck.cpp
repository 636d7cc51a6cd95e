// The race check: snapshot, restore and compare of device memory around the
// two runs of a block (see racecheck.h).
#include "hostrun/racecheck.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "hostrun/runtime.h"

namespace ada::hostrun {
namespace {

// Atomically updated byte ranges of the block being checked (both runs).
std::vector<std::pair<uintptr_t, uintptr_t>> g_atomic;  // [begin, end)

std::string hex_word(const char* p, size_t n) {
  std::string s = "0x";
  char buf[4];
  for (size_t i = n; i-- > 0;) {  // little-endian: the last byte is the most significant
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned char>(p[i]));
    s += buf;
  }
  return s;
}

}  // namespace

void note_atomic(const void* p, size_t bytes) {
  const auto b = reinterpret_cast<uintptr_t>(p);
  g_atomic.emplace_back(b, b + bytes);
}

void RaceCheck::snapshot(const std::vector<std::pair<void*, size_t>>& scratch) {
  g_atomic.clear();
  size_t used = 0;  // reuse the regions' buffers from the previous block
  auto add = [&](void* base, size_t bytes, bool compared) {
    if (used == regions_.size()) regions_.push_back(Region{});
    Region& r = regions_[used++];
    r.base = static_cast<char*>(base);
    r.bytes = bytes;
    r.compared = compared;
    r.before.assign(r.base, r.base + bytes);
  };
  for (const auto& a : device_allocations()) add(a.first, a.second, true);
  for (const auto& s : scratch) add(s.first, s.second, false);
  regions_.resize(used);
}

void RaceCheck::keep_first_and_restore() {
  for (Region& r : regions_) {
    if (r.compared) r.first.assign(r.base, r.base + r.bytes);
    if (r.bytes) std::memcpy(r.base, r.before.data(), r.bytes);  // an empty region has no data() to copy from
  }
}

std::string RaceCheck::compare(const std::vector<const void*>& args, const std::string& first_order,
                               const std::string& second_order) const {
  std::vector<std::pair<uintptr_t, uintptr_t>> atomic = g_atomic;
  std::sort(atomic.begin(), atomic.end());
  atomic.erase(std::unique(atomic.begin(), atomic.end()), atomic.end());  // a counter is noted per update
  auto in_atomic = [&](uintptr_t a) {
    // The ranges are small words; any one starting at or before `a` may cover it.
    auto it = std::upper_bound(atomic.begin(), atomic.end(), std::make_pair(a, UINTPTR_MAX));
    for (int k = 0; k < 16 && it != atomic.begin(); ++k) {
      --it;
      if (a < it->second) return true;
    }
    return false;
  };
  for (const Region& r : regions_) {
    if (!r.compared || std::memcmp(r.base, r.first.data(), r.bytes) == 0) continue;
    for (size_t i = 0; i < r.bytes; ++i) {
      if (r.base[i] == r.first[i] || in_atomic(reinterpret_cast<uintptr_t>(r.base + i))) continue;
      const size_t w = i & ~size_t(3), wn = std::min<size_t>(4, r.bytes - w);
      std::string arg = "no kernel argument points into it";
      for (size_t k = 0; k < args.size(); ++k) {
        const char* p = static_cast<const char*>(args[k]);
        if (p >= r.base && p < r.base + r.bytes) {
          arg = "kernel argument " + std::to_string(k + 1) + " points into it";
          if (p != r.base) arg += " (at byte " + std::to_string(p - r.base) + ")";
          break;
        }
      }
      char base[32];
      std::snprintf(base, sizeof base, "%p", static_cast<void*>(r.base));
      return "the result depends on the order in which the block's threads run (a race): the device "
             "allocation at " + std::string(base) + " (" + std::to_string(r.bytes) + " bytes; " + arg +
             ") first differs at byte offset " + std::to_string(i) + ": the 4-byte word at offset " +
             std::to_string(w) + " is " + hex_word(r.first.data() + w, wn) + " after the " + first_order +
             " order and " + hex_word(r.base + w, wn) + " after the " + second_order + " order";
    }
  }
  return "";
}

void RaceCheck::clear() {
  regions_.clear();
  g_atomic.clear();
}

}  // namespace ada::hostrun
