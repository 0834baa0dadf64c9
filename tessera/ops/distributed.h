// Communication between processes (MLX's mlx::core::distributed).
//
//   auto group = distributed::init();          // the global group
//   auto total = distributed::all_sum(grads);  // summed over every process
//
// init() joins the MPI job this process was started in (mpirun -np N ...)
// when an MPI library can be loaded, or with backend "nccl" the NCCL world of
// that job's GPUs (Note [Communicators] in distributed/comm.h); otherwise it
// returns the group of this process alone (rank 0, size 1), as MLX does when
// no backend can start. Over a group of one without a communicator the
// collectives are the identity, and point-to-point operations, which need a
// peer, throw. The collectives are lazy: evaluating their result
// communicates, on the CPU for MPI and on the GPU for NCCL.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "tessera/core/array.h"

namespace tessera::distributed {

namespace detail {
class Comm;
}

// A set of processes that communicate; this process's rank within it.
class Group {
 public:
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Sub-groups of the processes that pass the same color, ranked by key
  // (a negative key keeps the current rank's order).
  Group split(int color, int key = -1) const;
  // How its processes talk; nullptr for a group of this process alone.
  const std::shared_ptr<detail::Comm>& comm() const { return comm_; }

 private:
  friend Group init(bool strict, const std::string& backend);
  Group(int rank, int size, std::shared_ptr<detail::Comm> comm = nullptr)
      : rank_(rank), size_(size), comm_(std::move(comm)) {}
  int rank_;
  int size_;
  std::shared_ptr<detail::Comm> comm_;
};

// Whether any backend (or the named one: "any", "mpi", "ring", "nccl",
// "jaccl") can be started here: MPI where its library loads, NCCL where its
// library loads and there is a GPU.
bool is_available();
bool is_available(const std::string& backend);

// The global group: the MPI job's (backend "any" or "mpi") when this process
// was started by an MPI launcher and MPI loads; with backend "nccl" (or "any"
// in a job that tessera.launch --backend nccl started) NCCL's over the job's
// processes, one GPU each, or over this process alone outside a job.
// Otherwise the group of this process alone, or std::runtime_error when
// `strict`. Unknown backend names throw std::invalid_argument.
Group init(bool strict = false, const std::string& backend = "any");

// Elementwise sum / max / min of x over the processes of the group (default:
// the global group).
array all_sum(const array& x, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
array all_max(const array& x, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
array all_min(const array& x, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
// Every process's x concatenated along axis 0.
array all_gather(const array& x, std::optional<Group> group = std::nullopt,
                 StreamOrDevice s = {});
// The sum over the processes, of which this rank keeps its chunk of axis 0.
array sum_scatter(const array& x, std::optional<Group> group = std::nullopt,
                  StreamOrDevice s = {});

// Sends x to rank dst; the result equals x and performs the send when evaluated.
array send(const array& x, int dst, std::optional<Group> group = std::nullopt,
           StreamOrDevice s = {});
// The array of that shape and dtype that rank src sends.
array recv(Shape shape, Dtype dtype, int src, std::optional<Group> group = std::nullopt,
           StreamOrDevice s = {});
array recv_like(const array& x, int src, std::optional<Group> group = std::nullopt,
                StreamOrDevice s = {});

}  // namespace tessera::distributed
