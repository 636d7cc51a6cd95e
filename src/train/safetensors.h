// The safetensors file format (Hugging Face), written and read by hand:
//
//   8 bytes    N, the header length, unsigned little-endian
//   N bytes    JSON header, padded with spaces to a multiple of 8:
//              {"__metadata__": {"key": "value", ...},
//               "name": {"dtype": "F32", "shape": [3, 4], "data_offsets": [begin, end]}, ...}
//   the rest   the data section: raw little-endian tensors, row-major;
//              [begin, end) are byte offsets into it
//
// The reader is strict, so that a damaged or foreign file is rejected with one
// message that says what is wrong, before anything is loaded: the header must
// be valid JSON, every dtype known, every byte count equal to
// numel x dtype size, the tensors must tile the data section exactly
// (contiguous, no overlap, no gap) and the file must be complete.
#pragma once
#include <cstdint>
#include <map>
#include <unordered_map>
#include <string>
#include <vector>

namespace ada {

// Every dtype of the format. The reader accepts all of them (checking sizes);
// the conversions below exist for the ones this project writes.
enum class Dtype { BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64 };

const char* dtype_name(Dtype d);  // "F32"
size_t dtype_size(Dtype d);       // bytes per element
bool parse_dtype(const std::string& name, Dtype* out);

// The C++ type that stores each dtype this project writes.
template <class T> struct DtypeOf;
template <> struct DtypeOf<float> { static constexpr Dtype value = Dtype::F32; };
template <> struct DtypeOf<double> { static constexpr Dtype value = Dtype::F64; };
template <> struct DtypeOf<int32_t> { static constexpr Dtype value = Dtype::I32; };
template <> struct DtypeOf<int64_t> { static constexpr Dtype value = Dtype::I64; };
template <> struct DtypeOf<uint64_t> { static constexpr Dtype value = Dtype::U64; };

struct TensorEntry {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<uint64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
  uint64_t numel() const;
};

// "[3, 4]"
std::string shape_string(const std::vector<uint64_t>& shape);

// Collects tensors and metadata, then writes the file atomically.
class SafetensorsWriter {
 public:
  // Tensors are written in the order they are added. `data` is not copied:
  // it must stay valid until write().
  void add(const std::string& name, Dtype dtype, std::vector<uint64_t> shape, const void* data);
  template <class T>
  void add(const std::string& name, std::vector<uint64_t> shape, const T* data) {
    add(name, DtypeOf<T>::value, std::move(shape), data);
  }
  void metadata(const std::string& key, const std::string& value) { meta_[key] = value; }

  // Writes path.tmp, fsyncs it and renames it to path: a failure (full disk,
  // unwritable folder) throws ada::Error and leaves an existing file intact.
  void write(const std::string& path) const;

 private:
  struct Pending {
    TensorEntry entry;
    const void* data;
  };
  std::vector<Pending> tensors_;
  std::map<std::string, std::string> meta_;
};

// A whole safetensors file, read into memory and validated.
class SafetensorsFile {
 public:
  // `what` starts every error message, e.g. "checkpoint" gives
  // "checkpoint run/ckpt_100/model.safetensors is truncated: ...".
  explicit SafetensorsFile(const std::string& path, const std::string& what = "safetensors file");

  const std::string& path() const { return path_; }
  const std::vector<TensorEntry>& tensors() const { return tensors_; }  // in file order
  const std::map<std::string, std::string>& metadata() const { return meta_; }
  const TensorEntry* find(const std::string& name) const;
  // Throws "<what> <path> has no tensor <name>".
  const TensorEntry& get(const std::string& name) const;
  // The tensor's raw bytes (end - begin of them).
  const char* bytes(const TensorEntry& t) const { return data_.data() + data_start_ + t.begin; }

  // Copies tensor `name` into out (resized), converting. Throws naming the
  // tensor when its dtype is not F32/F64 (floats) or an integer dtype
  // (integers), or when its shape differs from `shape` (if given).
  void read_floats(const std::string& name, std::vector<double>& out, const std::vector<uint64_t>* shape = nullptr) const;
  void read_floats(const std::string& name, std::vector<float>& out, const std::vector<uint64_t>* shape = nullptr) const;
  void read_ints(const std::string& name, std::vector<int64_t>& out, const std::vector<uint64_t>* shape = nullptr) const;
  void read_u64(const std::string& name, std::vector<uint64_t>& out, const std::vector<uint64_t>* shape = nullptr) const;
  // The metadata value of key; throws "<what> <path> has no metadata key <key>".
  const std::string& meta(const std::string& key) const;

 private:
  [[noreturn]] void bad(const std::string& problem) const;
  const TensorEntry& checked(const std::string& name, const std::vector<uint64_t>* shape) const;
  std::string path_, what_;
  std::vector<char> data_;  // the whole file
  size_t data_start_ = 0;   // 8 + header length
  std::vector<TensorEntry> tensors_;
  std::unordered_map<std::string, size_t> index_;  // name -> position in tensors_ (find in constant time)
  std::map<std::string, std::string> meta_;
};

}  // namespace ada
