#pragma once
/// \file
/// The processes `mpirun` started together, for `ccsim sweep`: with MPI support built in
/// (OpenMPI, found at configure time) and launched by mpirun, each rank runs its share of the
/// sweep and rank 0 writes the table after a barrier; otherwise a world of one process.

#include "sim/base/status.hpp"

namespace ccsim::cli {

class MpiWorld {
 public:
  /// Joins the MPI world when this process was launched by mpirun; a world of one otherwise. An
  /// input error when mpirun launched several processes but this build has no MPI support.
  static Result<MpiWorld> start();
  MpiWorld(MpiWorld&& other) noexcept;
  MpiWorld& operator=(MpiWorld&&) = delete;
  ~MpiWorld();  ///< leaves the MPI world

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool leader() const { return rank_ == 0; }
  /// Waits for every rank (nothing in a world of one).
  void barrier() const;
  /// Ends every rank with `code` when this one failed (others would wait at the barrier forever);
  /// returns `code` in a world of one.
  int fail(int code) const;

 private:
  MpiWorld() = default;
  int rank_ = 0;
  int size_ = 1;
  bool joined_ = false;
};

}  // namespace ccsim::cli
