// cp.async (sm_80 asynchronous global -> shared copies) for the host runner,
// behind cuda/warp_mma.h's cp_async_16 / cp_async_commit / cp_async_wait<N>.
//
// On a GPU a cp.async copy lands at some moment before the issuing thread's
// cp.async.wait_group that covers it; reading the destination earlier is a race
// that usually reads old data. The runner makes that race visible: issuing a
// copy fills its 16 destination bytes with 0xff (NaN as floats, -1 as
// integers) at once, and the copy itself happens only when the issuing thread
// waits for its group. So a kernel that reads a stage before waiting for it, or
// waits for too few groups, reads NaNs.
//
// The groups are per thread, as in PTX: each thread's copies since its last
// commit form its open group, cp_async_commit closes it (an empty group is
// fine), cp_async_wait(n) performs every closed group except the n most recent,
// oldest first. Copies not covered by a wait never happen (the destination
// stays poisoned); a thread's groups end with its block. Both addresses must be
// 16-byte aligned, the source bytes inside one cudaMalloc allocation and the
// destination not (shared memory), or the launch fails. (Shared memory itself
// cannot be recognised: GCC before 14 drops the section attribute that marks
// __shared__ variables in template kernels.)
#pragma once
#include <cstddef>

namespace ada::hostrun::async_copy {

// Queues a copy of `src_bytes` (0..16) bytes from src to dst, the remaining
// 16 - src_bytes bytes being zero-filled, in the calling thread's open group.
void issue(void* dst, const void* src, unsigned src_bytes);
void commit();
void wait(int n);  // all but the n most recent closed groups are done

}  // namespace ada::hostrun::async_copy
