// The one place the CPU instantiations are compiled (see cpu_instances.h).
#include "train/cpu_instances.h"

namespace ada {
ADA_CPU_INSTANCES(template, CpuBackend<float>)
ADA_CPU_INSTANCES(template, CpuBackend<double>)
}  // namespace ada
