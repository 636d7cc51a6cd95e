// The static __shared__ variables of a kernel, found through the program's
// symbol table.
//
// device.h places every `__shared__` variable in the section
// "ada_hostrun_shared", whose bounds the scheduler poisons before each block
// and the race check restores between its two runs. g++ (12, 13) ignores the
// section attribute on static locals of function templates: a template
// kernel's `__shared__` arrays land in .bss, outside those bounds. They are
// found here instead, by name: a static local of the function with mangled
// name _Z<f> is the object _ZZ<f>E<name> (Itanium ABI), so the kernel's
// address gives its symbol, and that symbol its static locals.
//
// Only the kernel's own static locals are found (not those of __device__
// function templates it calls: the project declares shared memory in kernels
// only, which HostRun.SharedMemoryIsDeclaredInKernelsOnly enforces); in CUDA
// code a kernel's static locals are its __shared__ variables. Without a symbol table (a stripped program) the
// list is empty and a warning is printed once.
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

namespace ada::hostrun {

// (address, bytes) of every static local of the function at `fn`; cached.
const std::vector<std::pair<void*, size_t>>& function_statics(const void* fn);

}  // namespace ada::hostrun
