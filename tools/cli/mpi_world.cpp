#include "tools/cli/mpi_world.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#ifdef CCSIM_HAVE_MPI
#include <mpi.h>
#endif

namespace ccsim::cli {
namespace {

// The world size mpirun announced to this process (OpenMPI, PMI and PMIx launchers), else 1.
long launched_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(var)) return std::strtol(v, nullptr, 10);
  return 1;
}

}  // namespace

Result<MpiWorld> MpiWorld::start() {
  MpiWorld w;
  const long launched = launched_size();
  if (launched <= 1) return w;
#ifdef CCSIM_HAVE_MPI
  MPI_Init(nullptr, nullptr);
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size_);
  w.joined_ = true;
  return w;
#else
  return invalid_argument(fmt::format(
      "mpirun started {} processes, but this ccsim was built without MPI support (install libopenmpi-dev and "
      "reconfigure); or split the sweep with --shard i/N",
      launched));
#endif
}

MpiWorld::MpiWorld(MpiWorld&& other) noexcept : rank_(other.rank_), size_(other.size_), joined_(other.joined_) {
  other.joined_ = false;
}

MpiWorld::~MpiWorld() {
#ifdef CCSIM_HAVE_MPI
  if (joined_) MPI_Finalize();
#endif
}

void MpiWorld::barrier() const {
#ifdef CCSIM_HAVE_MPI
  if (joined_) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

int MpiWorld::fail(int code) const {
#ifdef CCSIM_HAVE_MPI
  if (joined_ && size_ > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  return code;
}

}  // namespace ccsim::cli
