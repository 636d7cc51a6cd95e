#include "dist/communicator.h"

#include <cstdlib>

#include "core/common.h"

namespace ada {

void SingleProcess::abort(int code) { std::exit(code); }

Communicator& single_process() {
  static SingleProcess one;
  return one;
}

void check_not_under_mpirun(const std::string& program, const std::string& mpi_program) {
  // The world size as each launcher announces it to its processes (Open MPI,
  // MPICH / Intel MPI / Slurm's PMI, PMIx).
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"}) {
    const char* v = std::getenv(var);
    if (v && std::atoi(v) > 1)
      fail(program + " was built without MPI but runs as one of " + v + " processes (" + var +
           "): each would train alone on the same files; run " + mpi_program + " under mpirun instead (docs/scaling.md)");
  }
}

}  // namespace ada
