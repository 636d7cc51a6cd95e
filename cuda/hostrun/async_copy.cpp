// cp.async groups of the host runner (async_copy.h). Only the launching OS
// thread touches this state, and launches are serialised, so no lock is needed.
#include "hostrun/async_copy.h"

#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "hostrun/runtime.h"
#include "hostrun/scheduler.h"

namespace ada::hostrun::async_copy {
namespace {

struct Copy {
  void* dst;
  const void* src;
  unsigned src_bytes;
};

struct ThreadGroups {
  uint64_t block = 0;  // current_block_serial() the groups belong to; 0 = none yet
  std::vector<Copy> open;
  std::deque<std::vector<Copy>> closed;  // oldest first
};

std::vector<ThreadGroups> g_threads;  // by thread index in the block

// The calling thread's groups, emptied first if they are left over from an
// earlier block (which may have used the same thread index).
ThreadGroups& mine() {
  const unsigned t = current_thread();
  if (g_threads.size() <= t) g_threads.resize(t + 1);
  ThreadGroups& g = g_threads[t];
  const uint64_t block = current_block_serial();
  if (g.block != block) {
    g.block = block;
    g.open.clear();
    g.closed.clear();
  }
  return g;
}

void perform(const Copy& c) {
  std::memcpy(c.dst, c.src, c.src_bytes);
  std::memset(static_cast<unsigned char*>(c.dst) + c.src_bytes, 0, 16 - c.src_bytes);
}

}  // namespace

void issue(void* dst, const void* src, unsigned src_bytes) {
  if (src_bytes > 16) kernel_fail("cp_async_16: src-size " + std::to_string(src_bytes) + " is above 16");
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0 || reinterpret_cast<uintptr_t>(src) % 16 != 0)
    kernel_fail("cp_async_16: source and destination must be 16-byte aligned");
  if (in_device_memory(dst, 16))
    kernel_fail("cp_async_16: the destination is global (cudaMalloc) memory; cp.async writes shared memory");
  if (src_bytes > 0 && !in_device_memory(src, src_bytes))
    kernel_fail("cp_async_16: the source is not inside a cudaMalloc allocation (out of bounds?)");
  std::memset(dst, 0xff, 16);  // poisoned until the group is waited for
  mine().open.push_back(Copy{dst, src, src_bytes});
}

void commit() {
  ThreadGroups& g = mine();
  g.closed.push_back(std::move(g.open));
  g.open.clear();
}

void wait(int n) {
  if (n < 0) kernel_fail("cp_async_wait: the group count must be >= 0");
  ThreadGroups& g = mine();
  while (g.closed.size() > static_cast<size_t>(n)) {
    for (const Copy& c : g.closed.front()) perform(c);
    g.closed.pop_front();
  }
}

}  // namespace ada::hostrun::async_copy
