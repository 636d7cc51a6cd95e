// safetensors writer and strict reader; the format is described in safetensors.h.
#include "train/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sys/stat.h>

#include "core/common.h"
#include "train/atomic_file.h"
#include "core/format.h"
#include "core/json.h"

// The data section is copied to and from memory as is, so the host must use
// the format's byte order.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

namespace ada {

namespace {

struct DtypeInfo {
  Dtype dtype;
  const char* name;
  size_t size;
};
constexpr DtypeInfo kDtypes[] = {
    {Dtype::BOOL, "BOOL", 1}, {Dtype::U8, "U8", 1},     {Dtype::I8, "I8", 1},     {Dtype::F8_E5M2, "F8_E5M2", 1},
    {Dtype::F8_E4M3, "F8_E4M3", 1}, {Dtype::I16, "I16", 2}, {Dtype::U16, "U16", 2}, {Dtype::F16, "F16", 2},
    {Dtype::BF16, "BF16", 2}, {Dtype::I32, "I32", 4},   {Dtype::U32, "U32", 4},   {Dtype::F32, "F32", 4},
    {Dtype::I64, "I64", 8},   {Dtype::U64, "U64", 8},   {Dtype::F64, "F64", 8},
};

// The format's own limit (the reference implementation refuses larger headers).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

}  // namespace

const char* dtype_name(Dtype d) {
  for (auto& i : kDtypes)
    if (i.dtype == d) return i.name;
  return "?";
}

size_t dtype_size(Dtype d) {
  for (auto& i : kDtypes)
    if (i.dtype == d) return i.size;
  return 0;
}

bool parse_dtype(const std::string& name, Dtype* out) {
  for (auto& i : kDtypes)
    if (name == i.name) {
      *out = i.dtype;
      return true;
    }
  return false;
}

uint64_t TensorEntry::numel() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); i++) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// ---- writer --------------------------------------------------------------

void SafetensorsWriter::add(const std::string& name, Dtype dtype, std::vector<uint64_t> shape, const void* data) {
  check(name != "__metadata__", "a tensor cannot be named __metadata__");
  for (auto& p : tensors_) check(p.entry.name != name, "duplicate tensor name " + name);
  Pending p;
  p.entry.name = name;
  p.entry.dtype = dtype;
  p.entry.shape = std::move(shape);
  p.entry.begin = tensors_.empty() ? 0 : tensors_.back().entry.end;
  p.entry.end = p.entry.begin + p.entry.numel() * dtype_size(dtype);
  p.data = data;
  tensors_.push_back(std::move(p));
}

void SafetensorsWriter::write(const std::string& path) const {
  std::string h = "{";
  if (!meta_.empty()) {
    h += "\"__metadata__\":{";
    bool first = true;
    for (auto& kv : meta_) {
      h += (first ? "" : ",") + json_quote(kv.first) + ":" + json_quote(kv.second);
      first = false;
    }
    h += "}";
  }
  for (auto& p : tensors_) {
    const TensorEntry& t = p.entry;
    h += (h.size() > 1 ? "," : "") + json_quote(t.name) + ":{\"dtype\":\"" + dtype_name(t.dtype) + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); i++) h += (i ? "," : "") + std::to_string(t.shape[i]);
    h += "],\"data_offsets\":[" + std::to_string(t.begin) + "," + std::to_string(t.end) + "]}";
  }
  h += "}";
  h.resize((h.size() + 7) / 8 * 8, ' ');  // the data section starts 8-byte aligned
  uint64_t n = h.size();
  AtomicFile f(path);
  f.write(&n, 8);
  f.write(h);
  for (auto& p : tensors_) f.write(p.data, p.entry.end - p.entry.begin);
  f.commit();
}

// ---- reader --------------------------------------------------------------

void SafetensorsFile::bad(const std::string& problem) const { fail(what_ + " " + path_ + " " + problem); }

SafetensorsFile::SafetensorsFile(const std::string& path, const std::string& what) : path_(path), what_(what) {
  struct stat st;
  check(::stat(path.c_str(), &st) == 0, what + " not found: " + path);
  if (S_ISDIR(st.st_mode)) bad("is a directory, not a safetensors file");
  if (st.st_size == 0) bad("is empty (0 bytes)");
  std::ifstream f(path, std::ios::binary);
  if (!f) bad("cannot be opened for reading");
  data_.resize((size_t)st.st_size);
  f.read(data_.data(), (std::streamsize)data_.size());
  if ((size_t)f.gcount() != data_.size()) bad("could not be read completely");
  const uint64_t size = data_.size();

  if (size < 8)
    bad("is too short for a safetensors header length (" + std::to_string(size) + " bytes; not a safetensors file?)");
  uint64_t n = 0;
  std::memcpy(&n, data_.data(), 8);
  if (n == 0 || n > kMaxHeaderBytes)
    bad("has an impossible header length " + std::to_string(n) + " (not a safetensors file?)");
  if (8 + n > size)
    bad("is truncated: its header needs bytes 8.." + std::to_string(8 + n) + " but the file has " +
        std::to_string(size));
  data_start_ = 8 + n;

  const Json h = parse_json(std::string_view(data_.data() + 8, n), what + " " + path + " header");
  if (!h.is(Json::Type::Object)) bad("header is not a JSON object");
  for (auto& [name, v] : h.members) {
    if (name == "__metadata__") {
      if (!v.is(Json::Type::Object)) bad("header: __metadata__ is not an object");
      for (auto& [k, s] : v.members) {
        if (!s.is(Json::Type::String)) bad("header: metadata value of " + quote_untrusted(k) + " is not a string");
        meta_[k] = s.text;
      }
      continue;
    }
    const std::string where = "header: tensor " + quote_untrusted(name) + " ";
    if (!v.is(Json::Type::Object)) bad(where + "is not an object");
    for (auto& m : v.members)
      if (m.first != "dtype" && m.first != "shape" && m.first != "data_offsets") bad(where + "has unknown field " + quote_untrusted(m.first));
    const Json *dt = v.find("dtype"), *sh = v.find("shape"), *off = v.find("data_offsets");
    if (!dt || !sh || !off) bad(where + "needs dtype, shape and data_offsets");
    TensorEntry t;
    t.name = name;
    if (!dt->is(Json::Type::String) || !parse_dtype(dt->text, &t.dtype)) bad(where + "has unknown dtype " + (dt->is(Json::Type::String) ? quote_untrusted(dt->text) : "(not a string)"));
    if (!sh->is(Json::Type::Array)) bad(where + "shape is not an array");
    uint64_t numel = 1;
    for (auto& d : sh->items) {
      uint64_t x;
      if (!d.to_u64(&x)) bad(where + "shape has an entry that is not a non-negative integer");
      if (x && numel > UINT64_MAX / x) bad(where + "shape " + shape_string(t.shape) + " is too large");
      numel *= x;
      t.shape.push_back(x);
    }
    if (!off->is(Json::Type::Array) || off->items.size() != 2 || !off->items[0].to_u64(&t.begin) ||
        !off->items[1].to_u64(&t.end) || t.begin > t.end)
      bad(where + "data_offsets must be [begin, end] with begin <= end");
    const uint64_t esz = dtype_size(t.dtype);
    if (numel > UINT64_MAX / esz || t.end - t.begin != numel * esz)
      bad(where + "has " + std::to_string(t.end - t.begin) + " bytes but " + dt->text + " " + shape_string(t.shape) +
          " needs " + std::to_string(numel * esz));
    if (!index_.emplace(name, tensors_.size()).second) bad(where + "appears twice");
    tensors_.push_back(std::move(t));
  }

  // The tensors must tile the data section: sorted by offset, each begins
  // where the previous one ends, and the last ends at the end of the file.
  std::vector<const TensorEntry*> order;
  for (auto& t : tensors_) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  uint64_t expected = 0;
  for (const TensorEntry* t : order) {
    if (t->begin < expected) bad("header: tensor " + quote_untrusted(t->name) + " overlaps the tensor before it");
    if (t->begin > expected) bad("header: gap in the data before tensor " + quote_untrusted(t->name));
    if (data_start_ + t->end > size)
      bad("is truncated: tensor " + quote_untrusted(t->name) + " needs bytes " + std::to_string(data_start_ + t->begin) + ".." +
          std::to_string(data_start_ + t->end) + " but the file has " + std::to_string(size));
    expected = t->end;
  }
  if (data_start_ + expected != size)
    bad("has " + std::to_string(size - data_start_ - expected) + " unexpected bytes after its last tensor");
}

const TensorEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorEntry& SafetensorsFile::get(const std::string& name) const {
  const TensorEntry* t = find(name);
  if (!t) bad("has no tensor " + name);
  return *t;
}

const std::string& SafetensorsFile::meta(const std::string& key) const {
  auto it = meta_.find(key);
  if (it == meta_.end()) bad("has no metadata key \"" + key + "\"");
  return it->second;
}

const TensorEntry& SafetensorsFile::checked(const std::string& name, const std::vector<uint64_t>* shape) const {
  const TensorEntry& t = get(name);
  if (shape && t.shape != *shape)
    bad("has tensor " + name + " of shape " + shape_string(t.shape) + " but " + shape_string(*shape) + " was expected");
  return t;
}

namespace {
template <class From, class To>
void convert(const char* src, uint64_t n, std::vector<To>& out) {
  out.resize(n);
  for (uint64_t i = 0; i < n; i++) {
    From x;
    std::memcpy(&x, src + i * sizeof(From), sizeof(From));
    out[i] = (To)x;
  }
}
}  // namespace

void SafetensorsFile::read_floats(const std::string& name, std::vector<double>& out,
                                  const std::vector<uint64_t>* shape) const {
  const TensorEntry& t = checked(name, shape);
  if (t.dtype == Dtype::F32) convert<float>(bytes(t), t.numel(), out);
  else if (t.dtype == Dtype::F64) convert<double>(bytes(t), t.numel(), out);
  else bad("has tensor " + name + " of dtype " + dtype_name(t.dtype) + " where F32 or F64 was expected");
}

void SafetensorsFile::read_floats(const std::string& name, std::vector<float>& out,
                                  const std::vector<uint64_t>* shape) const {
  const TensorEntry& t = checked(name, shape);
  if (t.dtype == Dtype::F32) convert<float>(bytes(t), t.numel(), out);
  else if (t.dtype == Dtype::F64) convert<double>(bytes(t), t.numel(), out);
  else bad("has tensor " + name + " of dtype " + dtype_name(t.dtype) + " where F32 or F64 was expected");
}

void SafetensorsFile::read_ints(const std::string& name, std::vector<int64_t>& out,
                                const std::vector<uint64_t>* shape) const {
  const TensorEntry& t = checked(name, shape);
  if (t.dtype == Dtype::I64) convert<int64_t>(bytes(t), t.numel(), out);
  else if (t.dtype == Dtype::I32) convert<int32_t>(bytes(t), t.numel(), out);
  else bad("has tensor " + name + " of dtype " + dtype_name(t.dtype) + " where I64 or I32 was expected");
}

void SafetensorsFile::read_u64(const std::string& name, std::vector<uint64_t>& out,
                               const std::vector<uint64_t>* shape) const {
  const TensorEntry& t = checked(name, shape);
  if (t.dtype != Dtype::U64) bad("has tensor " + name + " of dtype " + dtype_name(t.dtype) + " where U64 was expected");
  convert<uint64_t>(bytes(t), t.numel(), out);
}

}  // namespace ada
