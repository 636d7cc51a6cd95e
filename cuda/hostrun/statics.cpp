// function_statics (statics.h): read the program's own ELF symbol table once.
#include "hostrun/statics.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace ada::hostrun {
namespace {

struct Object {
  std::string_view name;
  uintptr_t addr;  // run-time address
  size_t bytes;
};

class SymbolTable {
 public:
  SymbolTable() { load(); }
  bool ok() const { return ok_; }

  std::vector<std::pair<void*, size_t>> statics_of(const void* fn) const {
    std::vector<std::pair<void*, size_t>> out;
    auto range = functions_.equal_range(reinterpret_cast<uintptr_t>(fn));
    for (auto it = range.first; it != range.second; ++it) {
      const std::string_view f = it->second;
      if (f.size() < 3 || f.substr(0, 2) != "_Z") continue;
      // _Z<encoding> -> its static locals are _ZZ<encoding>E<name>
      const std::string prefix = "_ZZ" + std::string(f.substr(2)) + "E";
      auto o = std::lower_bound(statics_.begin(), statics_.end(), prefix,
                                [](const Object& a, const std::string& p) { return a.name < p; });
      for (; o != statics_.end() && o->name.substr(0, prefix.size()) == prefix; ++o)
        if (o->bytes > 0) out.emplace_back(reinterpret_cast<void*>(o->addr), o->bytes);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

 private:
  void load() {
    const int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
      close(fd);
      return;
    }
    size_ = static_cast<size_t>(st.st_size);
    void* m = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return;
    image_ = static_cast<const char*>(m);  // kept mapped: the names point into it
    const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(image_);
    if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shoff == 0 || eh->e_shoff + uint64_t(eh->e_shnum) * sizeof(Elf64_Shdr) > size_)
      return;
    const auto* sh = reinterpret_cast<const Elf64_Shdr*>(image_ + eh->e_shoff);
    // The load bias: the main program is the first object dl_iterate_phdr reports.
    uintptr_t bias = 0;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* b) {
          *static_cast<uintptr_t*>(b) = info->dlpi_addr;
          return 1;  // stop after the first
        },
        &bias);
    // Only writable data can be a __shared__ variable (not a `static const`
    // table, nor .data.rel.ro, which is read-only once relocated).
    const char* shnames = eh->e_shstrndx < eh->e_shnum && sh[eh->e_shstrndx].sh_offset < size_
                              ? image_ + sh[eh->e_shstrndx].sh_offset
                              : nullptr;
    auto writable = [&](unsigned idx) {
      if (idx >= eh->e_shnum || !(sh[idx].sh_flags & SHF_WRITE) || !shnames) return false;
      return std::strncmp(shnames + sh[idx].sh_name, ".data.rel.ro", 12) != 0;
    };
    for (unsigned i = 0; i < eh->e_shnum; ++i) {
      if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
      const Elf64_Shdr& strs = sh[sh[i].sh_link];
      if (sh[i].sh_offset + sh[i].sh_size > size_ || strs.sh_offset + strs.sh_size > size_) return;
      const auto* sym = reinterpret_cast<const Elf64_Sym*>(image_ + sh[i].sh_offset);
      const size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
      for (size_t k = 0; k < n; ++k) {
        if (sym[k].st_name >= strs.sh_size || sym[k].st_shndx == SHN_UNDEF) continue;
        const char* name = image_ + strs.sh_offset + sym[k].st_name;
        const std::string_view nv(name, strnlen(name, strs.sh_size - sym[k].st_name));
        const uintptr_t addr = bias + sym[k].st_value;
        const int type = ELF64_ST_TYPE(sym[k].st_info);
        if (type == STT_FUNC)
          functions_.emplace(addr, nv);
        else if (type == STT_OBJECT && nv.substr(0, 3) == "_ZZ" && writable(sym[k].st_shndx))
          statics_.push_back({nv, addr, static_cast<size_t>(sym[k].st_size)});
      }
      ok_ = true;
    }
    std::sort(statics_.begin(), statics_.end(), [](const Object& a, const Object& b) { return a.name < b.name; });
  }

  const char* image_ = nullptr;
  size_t size_ = 0;
  bool ok_ = false;
  std::multimap<uintptr_t, std::string_view> functions_;
  std::vector<Object> statics_;
};

}  // namespace

const std::vector<std::pair<void*, size_t>>& function_statics(const void* fn) {
  static std::mutex mu;
  static std::map<const void*, std::vector<std::pair<void*, size_t>>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(fn);
  if (it != cache.end()) return it->second;
  static const SymbolTable table;
  if (!table.ok()) {
    static bool warned = false;
    if (!warned)
      std::fprintf(stderr,
                   "hostrun: warning: no symbol table in /proc/self/exe: the __shared__ variables of template "
                   "kernels are not poisoned or race-checked\n");
    warned = true;
  }
  return cache.emplace(fn, table.statics_of(fn)).first->second;
}

}  // namespace ada::hostrun
