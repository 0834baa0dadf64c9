// Communication between processes (MLX's mlx::core::distributed).
//
//   auto group = distributed::init();          // the global group
//   auto total = distributed::all_sum(grads);  // summed over every process
//
// This build has no communication backend: init() returns the group of this
// process alone (rank 0, size 1), as MLX does when no backend can start. Over
// it the collectives are the identity, and point-to-point operations, which
// need a peer, throw.
#pragma once

#include <optional>
#include <string>

#include "tessera/core/array.h"

namespace tessera::distributed {

// A set of processes that communicate; this process's rank within it.
class Group {
 public:
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Sub-groups of the processes that pass the same color, ranked by key
  // (a negative key keeps the current rank's order).
  Group split(int color, int key = -1) const;

 private:
  friend Group init(bool strict, const std::string& backend);
  Group(int rank, int size) : rank_(rank), size_(size) {}
  int rank_;
  int size_;
};

// Whether any backend (or the named one: "any", "mpi", "ring", "nccl",
// "jaccl") can be started by this build.
bool is_available();
bool is_available(const std::string& backend);

// The global group. With no backend available: the group of this process alone,
// or std::runtime_error when `strict`. Unknown backend names throw
// std::invalid_argument.
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
