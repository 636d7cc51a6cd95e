// The CUDA runtime API subset for the host runner (see runtime.h).
#include "hostrun/runtime.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/common.h"
#include "hostrun/scheduler.h"

struct CUstream_st {};
struct CUevent_st {
  std::chrono::steady_clock::time_point when{};
  bool recorded = false;
};

namespace {

// Guard bytes before and after each device block (see runtime.h); none under
// AddressSanitizer, whose redzones do better (reads too).
#if defined(__SANITIZE_ADDRESS__)
#define ADA_HOSTRUN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ADA_HOSTRUN_ASAN 1
#endif
#endif
#ifdef ADA_HOSTRUN_ASAN
constexpr size_t kGuard = 0;
#else
constexpr size_t kGuard = 256;  // keeps the memory handed out 256-byte aligned
#endif
constexpr unsigned char kGuardByte = 0xff;  // as fresh device memory: NaN / -1 when read

// Every live cudaMalloc allocation: base -> size. Used to validate copies.
std::mutex g_mu;
std::map<const char*, size_t> g_allocs;
size_t g_allocated = 0;
cudaError_t g_last_error = cudaSuccess;

cudaError_t set_error(cudaError_t e) {
  if (e != cudaSuccess) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_last_error = e;
  }
  return e;
}

// Does [p, p + bytes) lie inside one device allocation? (g_mu held)
bool is_device_range(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  auto it = g_allocs.upper_bound(c);
  if (it == g_allocs.begin()) return false;
  --it;
  return c >= it->first && bytes <= it->second && size_t(c - it->first) <= it->second - bytes;
}

bool range_ok(const void* p, size_t bytes, bool device) {
  if (!device) return true;
  std::lock_guard<std::mutex> lock(g_mu);
  return is_device_range(p, bytes);
}

// Streams being recorded for a CUDA graph (set_stream_recording).
std::map<const CUstream_st*, bool> g_recording;
bool recording(cudaStream_t s) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_recording.find(s);
  return it != g_recording.end() && it->second;
}
bool any_recording() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const auto& r : g_recording)
    if (r.second) return true;
  return false;
}

cudaError_t copy_bytes(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return set_error(cudaErrorInvalidValue);
  const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
    return set_error(cudaErrorInvalidMemcpyDirection);
  if (!range_ok(dst, bytes, dst_dev) || !range_ok(src, bytes, src_dev))
    return set_error(cudaErrorInvalidValue);
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t set_bytes(void* ptr, int value, size_t bytes) {
  if (bytes == 0) return cudaSuccess;
  if (!ptr || !range_ok(ptr, bytes, true)) return set_error(cudaErrorInvalidValue);
  std::memset(ptr, value, bytes);
  return cudaSuccess;
}

constexpr size_t kTotalMemory = size_t(64) << 30;  // what the "device" claims to have

}  // namespace

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchTimeout: return "the launch timed out and was terminated";
    case cudaErrorAssert: return "device-side assert triggered";
    case cudaErrorHardwareStackError: return "an illegal memory access was encountered on the stack";
    case cudaErrorIllegalInstruction: return "an illegal instruction was encountered";
    case cudaErrorMisalignedAddress: return "misaligned address";
    case cudaErrorInvalidAddressSpace: return "operation not supported on global/shared address space";
    case cudaErrorInvalidPc: return "invalid program counter";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorUnknown: return "unknown error";
  }
  return "unrecognized error code";
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchTimeout: return "cudaErrorLaunchTimeout";
    case cudaErrorAssert: return "cudaErrorAssert";
    case cudaErrorHardwareStackError: return "cudaErrorHardwareStackError";
    case cudaErrorIllegalInstruction: return "cudaErrorIllegalInstruction";
    case cudaErrorMisalignedAddress: return "cudaErrorMisalignedAddress";
    case cudaErrorInvalidAddressSpace: return "cudaErrorInvalidAddressSpace";
    case cudaErrorInvalidPc: return "cudaErrorInvalidPc";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorUnknown: return "cudaErrorUnknown";
  }
  return "unrecognized error code";
}

cudaError_t cudaGetLastError() {
  std::lock_guard<std::mutex> lock(g_mu);
  const cudaError_t e = g_last_error;
  g_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_last_error;
}

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return set_error(cudaErrorInvalidValue);
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : set_error(cudaErrorInvalidDevice);
}

cudaError_t cudaGetDevice(int* device) {
  if (!device) return set_error(cudaErrorInvalidValue);
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop) return set_error(cudaErrorInvalidValue);
  if (device != 0) return set_error(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::strncpy(prop->name, "ada host runner (CPU)", sizeof prop->name - 1);
  prop->totalGlobalMem = kTotalMemory;
  prop->sharedMemPerBlock = ada::hostrun::kDefaultDynamicShared;
  prop->sharedMemPerBlockOptin = ada::hostrun::kMaxDynamicSharedOptin;
  prop->sharedMemPerMultiprocessor = 228 * 1024;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->multiProcessorCount = 1;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->major = 9;
  prop->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  return any_recording() ? set_error(cudaErrorStreamCaptureUnsupported) : cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (!free_bytes || !total_bytes) return set_error(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(g_mu);
  *total_bytes = kTotalMemory;
  *free_bytes = g_allocated < kTotalMemory ? kTotalMemory - g_allocated : 0;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (!ptr) return set_error(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;  // as CUDA: success, null pointer
  // Its own heap block of exactly `bytes` (no rounding up to the alignment):
  // under AddressSanitizer the block's redzone starts right at the end, so a
  // kernel reading or writing one element past the buffer is reported.
  void* raw = nullptr;
  if (posix_memalign(&raw, 256, bytes + 2 * kGuard) != 0) return set_error(cudaErrorMemoryAllocation);
  std::memset(raw, 0xff, bytes + 2 * kGuard);  // uninitialised device memory is not zero; the guards
  static_assert(kGuardByte == 0xff, "the guards are filled with the memory");
  void* p = static_cast<char*>(raw) + kGuard;
  std::lock_guard<std::mutex> lock(g_mu);
  g_allocs[static_cast<const char*>(p)] = bytes;
  g_allocated += bytes;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_allocs.find(static_cast<const char*>(ptr));
    if (it == g_allocs.end()) {
      g_last_error = cudaErrorInvalidValue;
      return cudaErrorInvalidValue;
    }
    g_allocated -= it->second;
    g_allocs.erase(it);
  }
  std::free(static_cast<char*>(ptr) - kGuard);
  return cudaSuccess;
}

void ada::hostrun::check_guards(const void* const* args, size_t nargs) {
  if (kGuard == 0) return;
  static const std::vector<unsigned char> intact(kGuard, kGuardByte);
  std::string found;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (const auto& [base, size] : g_allocs) {
      char* lo = const_cast<char*>(base) - kGuard;
      char* hi = const_cast<char*>(base) + size;
      for (char* g : {lo, hi}) {
        if (std::memcmp(g, intact.data(), kGuard) == 0) continue;  // the common case, one vectorised compare
        size_t first = kGuard;
        for (size_t i = 0; i < kGuard; ++i)
          if (static_cast<unsigned char>(g[i]) != kGuardByte) {
            first = i;
            break;
          }
        if (first == kGuard) continue;
        size_t last = first;
        for (size_t i = first; i < kGuard; ++i)
          if (static_cast<unsigned char>(g[i]) != kGuardByte) last = i;
        std::memset(g, kGuardByte, kGuard);  // restored: later launches are judged on their own
        if (!found.empty()) continue;  // the first block is named
        // Bytes counted from the block's edge: 1 = the byte just before the start,
        // 0 = the byte just past the end.
        const bool below = g == lo;
        const size_t near = below ? kGuard - last : first, far = below ? kGuard - first : last;
        found = "a kernel wrote outside its device memory: bytes " + std::to_string(near) + " to " +
                std::to_string(far) + (below ? " before the start" : " past the end") + " of a " +
                std::to_string(size) + "-byte cudaMalloc block";
        std::string named;
        for (size_t a = 0; args && a < nargs; ++a) {
          const char* q = static_cast<const char*>(args[a]);
          if (q && q >= lo && q < hi + kGuard)
            named += (named.empty() ? "" : ", ") + std::to_string(a);
        }
        found += named.empty() ? " (no pointer argument of the launch points into it)"
                               : " (pointer argument " + named + " of the launch points into it)";
      }
    }
  }
  if (!found.empty()) ada::fail("hostrun: " + found);
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  if (!ptr) return set_error(cudaErrorInvalidValue);
  *ptr = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + (bytes == 0 ? 256 : 0));
  return *ptr ? cudaSuccess : set_error(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}

// A stream being recorded takes no work directly, and nothing synchronous
// runs while one is recorded (CUDA's global capture mode).
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (any_recording()) return set_error(cudaErrorStreamCaptureUnsupported);
  return copy_bytes(dst, src, bytes, kind);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (recording(stream)) return set_error(cudaErrorStreamCaptureUnsupported);
  return copy_bytes(dst, src, bytes, kind);
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  if (any_recording()) return set_error(cudaErrorStreamCaptureUnsupported);
  return set_bytes(ptr, value, bytes);
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (recording(stream)) return set_error(cudaErrorStreamCaptureUnsupported);
  return set_bytes(ptr, value, bytes);
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  if (!stream) return set_error(cudaErrorInvalidValue);
  *stream = new CUstream_st;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  return cudaStreamCreate(stream);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_recording.erase(stream);
  }
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return recording(stream) ? set_error(cudaErrorStreamCaptureUnsupported) : cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  if (!event) return set_error(cudaErrorInvalidValue);
  *event = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return set_error(cudaErrorInvalidResourceHandle);
  if (recording(stream)) return set_error(cudaErrorStreamCaptureUnsupported);
  event->when = std::chrono::steady_clock::now();
  event->recorded = true;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return event ? cudaSuccess : set_error(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms || !start || !end) return set_error(cudaErrorInvalidValue);
  if (!start->recorded || !end->recorded) return set_error(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (!func) return set_error(cudaErrorInvalidValue);
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || size_t(value) > ada::hostrun::kMaxDynamicSharedOptin)
      return set_error(cudaErrorInvalidValue);
    ada::hostrun::set_max_dynamic_shared(func, size_t(value));
    return cudaSuccess;
  }
  if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;  // a hint
  return set_error(cudaErrorInvalidValue);
}

std::vector<std::pair<void*, size_t>> ada::hostrun::device_allocations() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<std::pair<void*, size_t>> out;
  out.reserve(g_allocs.size());
  for (const auto& a : g_allocs) out.emplace_back(const_cast<char*>(a.first), a.second);
  return out;
}
bool ada::hostrun::in_device_memory(const void* p, size_t bytes) { return range_ok(p, bytes, true); }

void ada::hostrun::set_stream_recording(cudaStream_t stream, bool on) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_recording[stream] = on;
}
cudaError_t ada::hostrun::copy_for_graph(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return copy_bytes(dst, src, bytes, kind);
}
cudaError_t ada::hostrun::set_for_graph(void* ptr, int value, size_t bytes) { return set_bytes(ptr, value, bytes); }
bool ada::hostrun::stream_recording(cudaStream_t stream) { return recording(stream); }
