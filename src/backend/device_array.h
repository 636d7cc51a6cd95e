// An owning array in a backend's memory (host memory for CpuBackend, device
// memory for CudaBackend). Move-only; freed through the backend that made it.
#pragma once
#include <cstddef>
#include <utility>

namespace ada {

template <class Backend, class U>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(Backend& be, size_t n) : be_(&be), n_(n) {
    p_ = n ? static_cast<U*>(be.raw_alloc(n * sizeof(U))) : nullptr;
  }
  ~DeviceArray() { release(); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept { swap(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    release();
    swap(o);
    return *this;
  }
  U* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  void release() {
    if (p_) be_->raw_free(p_);
    p_ = nullptr;
    n_ = 0;
  }
  void swap(DeviceArray& o) {
    std::swap(be_, o.be_);
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
  }
  Backend* be_ = nullptr;
  U* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace ada
