// The race check (Config::race_check, ADA_HOSTRUN_RACECHECK=1): a kernel's
// result must not depend on the order in which the threads of a block run
// between barriers. The scheduler runs every block twice from the same
// contents of device memory, under two different resume orders, and compares
// the bytes of every live cudaMalloc allocation after the two runs. A
// difference means two threads of the block touched the same memory without a
// barrier between them (a shared-memory race that reached the output, a
// global write-write race, a read of another thread's unwritten value).
//
// Words updated by atomics are left out of the comparison: the order of
// atomics is unspecified on a GPU too (a float atomicAdd from several threads
// legitimately differs in its last bits), and they are not races.
//
// Cost: three copies and one comparison of all live device memory per block,
// so it is for tests with small allocations, not for whole training steps.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace ada::hostrun {

class RaceCheck {
 public:
  // Before the first run: remembers every live device allocation and the
  // memory in `scratch` (shared memory: restored for the second run, never
  // compared; each pair is base, bytes).
  void snapshot(const std::vector<std::pair<void*, size_t>>& scratch);
  // Between the runs: keeps the first run's device memory, puts the snapshot
  // back (device and scratch memory).
  void keep_first_and_restore();
  // After the second run: "" when the device memory equals the first run's
  // (outside atomically updated words), else where it first differs, naming
  // the kernel argument (`args`, one pointer per argument, null for
  // non-pointers) that points into the allocation. The second run's result
  // stays in memory: a correct kernel's output is unaffected.
  std::string compare(const std::vector<const void*>& args, const std::string& first_order,
                      const std::string& second_order) const;
  void clear();  // drops the copies (end of a launch)

 private:
  struct Region {
    char* base;
    size_t bytes;
    bool compared;
    std::vector<char> before, first;
  };
  std::vector<Region> regions_;
};

// Called by every atomic while the race check runs (device.h): the word at
// [p, p + bytes) may differ between the two runs.
void note_atomic(const void* p, size_t bytes);

namespace detail {
inline bool race_check_atomics = false;  // true while a block runs race-checked
}

}  // namespace ada::hostrun
