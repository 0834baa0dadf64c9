// Transform rules of the communication primitives, as MLX's: the sum's
// cotangent is the cotangent itself on each process (each holds the whole
// sum), the gather's is this rank's rows of it, the scattered sum's is the
// gather of the cotangents; tangents travel through the same collective. The
// batch axis of vmap moves to axis 1, so that axis 0 stays the one gathered
// or scattered. Maxima, minima, send and recv have no derivative rule here.
#include <stdexcept>

#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/distributed.h"

namespace tessera {

namespace {

[[noreturn]] void no_rule(const Distributed& p, const char* rule) {
  throw std::invalid_argument(std::string("[") + p.name() + "] has no " + rule + " rule");
}

}  // namespace

std::vector<array> Distributed::vjp(const std::vector<array>&,
                                    const std::vector<array>& cotangents, const std::vector<int>&,
                                    const std::vector<array>&) {
  const array& c = cotangents[0];
  switch (op_) {
    case Communication::all_sum:
      return {c};
    case Communication::all_gather: {
      const int64_t rows = c.shape()[0] / comm_->size();
      Shape start(c.ndim(), 0), stop = c.shape();
      start[0] = rows * comm_->rank();
      stop[0] = start[0] + rows;
      return {slice(c, start, stop, stream())};
    }
    case Communication::sum_scatter:
      return {communicate(stream(), Communication::all_gather, comm_, c)};
    default:
      no_rule(*this, "vjp");
  }
}

std::vector<array> Distributed::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                    const std::vector<int>&) {
  switch (op_) {
    case Communication::all_sum:
    case Communication::all_gather:
    case Communication::sum_scatter:
      return {communicate(stream(), op_, comm_, tangents[0])};
    default:
      no_rule(*this, "jvp");
  }
}

std::pair<std::vector<array>, std::vector<int>> Distributed::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  switch (op_) {
    case Communication::all_sum:
    case Communication::all_max:
    case Communication::all_min:
      return {{communicate(stream(), op_, comm_, inputs[0])}, {axes[0]}};
    case Communication::all_gather:
    case Communication::sum_scatter: {
      array x = axes[0] < 0 ? inputs[0] : moveaxis(inputs[0], axes[0], 1, stream());
      return {{communicate(stream(), op_, comm_, x)}, {axes[0] < 0 ? -1 : 1}};
    }
    default:
      no_rule(*this, "vmap");
  }
}

}  // namespace tessera
