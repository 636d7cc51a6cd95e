// Atomic file replacement: write PATH.tmp, flush it to disk (fsync), then
// rename it over PATH and fsync the directory. A reader (or a crash) sees
// either the old PATH or the complete new one, never a partial file, so a
// failed write can never damage a good checkpoint or log that was there.
#pragma once
#include <cstdio>
#include <string>

namespace ada {

class AtomicFile {
 public:
  // Opens PATH.tmp for writing (throws ada::Error naming the path and the
  // system's reason when it cannot).
  explicit AtomicFile(const std::string& path);
  ~AtomicFile();  // not committed: the .tmp file is removed, PATH is untouched
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  void write(const std::string& s) { write(s.data(), s.size()); }
  // Flushes, fsyncs and renames PATH.tmp to PATH. Throws on any failure
  // (e.g. the disk is full), leaving PATH as it was.
  void commit();

 private:
  [[noreturn]] void fail_io(const std::string& what);
  std::string path_, tmp_;
  FILE* f_ = nullptr;
};

// The whole of `bytes` to path, atomically.
void write_file_atomic(const std::string& path, const std::string& bytes);

// fsync of a directory, so that a rename inside it survives a power cut.
void sync_directory(const std::string& dir);

// Crash simulation for the tests of the checkpoint protocol
// (tests/test_checkpoint_protocol.cpp). Every step that changes what is on
// disk (a file complete under its .tmp name, a rename, a removal, a new
// directory) calls file_op_done(); after simulate_crash_after(n), the n-th such
// step ends the process at once with _exit(kSimulatedCrashExit), as a kill
// would: no destructor, no cleanup. 0 turns it off (the default).
constexpr int kSimulatedCrashExit = 86;
void simulate_crash_after(int n);
void file_op_done();

}  // namespace ada
