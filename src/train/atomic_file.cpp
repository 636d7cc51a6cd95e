#include "train/atomic_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include "core/common.h"

namespace ada {

AtomicFile::AtomicFile(const std::string& path) : path_(path), tmp_(path + ".tmp") {
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) fail("cannot write " + path_ + ": " + std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (f_) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

void AtomicFile::fail_io(const std::string& what) {
  const std::string reason = std::strerror(errno);
  if (f_) std::fclose(f_);
  f_ = nullptr;
  std::remove(tmp_.c_str());
  fail("cannot write " + path_ + ": " + what + reason);
}

void AtomicFile::write(const void* data, size_t bytes) {
  check(f_ != nullptr, "internal: write to a closed file " + path_);
  if (bytes && std::fwrite(data, 1, bytes, f_) != bytes) fail_io("");
}

void AtomicFile::commit() {
  check(f_ != nullptr, "internal: commit of a closed file " + path_);
  if (std::fflush(f_) != 0) fail_io("");
  if (::fsync(::fileno(f_)) != 0) fail_io("fsync: ");
  FILE* f = f_;
  f_ = nullptr;
  if (std::fclose(f) != 0) {
    std::remove(tmp_.c_str());
    fail("cannot write " + path_ + ": " + std::strerror(errno));
  }
  file_op_done();  // PATH.tmp complete
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(tmp_.c_str());
    fail("cannot rename " + tmp_ + " to " + path_ + ": " + reason);
  }
  const size_t slash = path_.rfind('/');
  sync_directory(slash == std::string::npos ? "." : path_.substr(0, slash + 1));
  file_op_done();  // PATH replaced
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

namespace {
int crash_at = 0, ops_done = 0;  // the simulated crash: after which step, and steps so far
}  // namespace

void simulate_crash_after(int n) {
  crash_at = n;
  ops_done = 0;
}

void file_op_done() {
  if (crash_at > 0 && ++ops_done == crash_at) ::_exit(kSimulatedCrashExit);
}

void sync_directory(const std::string& dir) {
  // Best effort: some file systems do not support fsync on directories.
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace ada
