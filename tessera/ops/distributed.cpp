#include "tessera/ops/distributed.h"

#include <stdexcept>

#include "tessera/ops/utils.h"

namespace tessera::distributed {

namespace {

constexpr const char* kBackends[] = {"any", "mpi", "ring", "nccl", "jaccl"};

void check_backend(const char* op, const std::string& backend) {
  for (const char* b : kBackends) {
    if (backend == b) return;
  }
  throw_invalid(op, "the backend must be one of 'any', 'mpi', 'ring', 'nccl' and 'jaccl', not '" +
                        backend + "'");
}

// Note [Singleton group]
// Without a backend every group is this process alone: a collective over it is
// its input (MLX returns the input array itself), and a point-to-point
// operation has no peer to talk to. Every group is of that kind here (init is
// Group's only maker).
array collective(const array& x, StreamOrDevice s) {
  to_stream(s);  // an unavailable device is still an error
  return x;
}

[[noreturn]] void no_peer(const char* op, const char* verb) {
  throw_invalid(op, std::string("cannot ") + verb + " a singleton group (size 1)");
}

}  // namespace

Group Group::split(int, int) const {
  throw std::runtime_error(
      "[distributed::Group::split] cannot split the group further: it holds one process");
}

bool is_available() { return false; }

bool is_available(const std::string& backend) {
  check_backend("distributed::is_available", backend);
  return false;
}

Group init(bool strict, const std::string& backend) {
  check_backend("distributed::init", backend);
  if (strict) {
    throw std::runtime_error(
        "[distributed::init] couldn't initialize " +
        (backend == "any" ? std::string("any backend") : "the " + backend + " backend") +
        ": this build has no communication backend");
  }
  return Group(0, 1);
}

array all_sum(const array& x, std::optional<Group>, StreamOrDevice s) {
  return collective(x, s);
}
array all_max(const array& x, std::optional<Group>, StreamOrDevice s) {
  return collective(x, s);
}
array all_min(const array& x, std::optional<Group>, StreamOrDevice s) {
  return collective(x, s);
}
array all_gather(const array& x, std::optional<Group>, StreamOrDevice s) {
  return collective(x, s);
}
array sum_scatter(const array& x, std::optional<Group>, StreamOrDevice s) {
  return collective(x, s);
}

array send(const array&, int, std::optional<Group>, StreamOrDevice) {
  no_peer("distributed::send", "send to");
}

array recv(Shape, Dtype, int, std::optional<Group>, StreamOrDevice) {
  no_peer("distributed::recv", "recv from");
}

array recv_like(const array& x, int src, std::optional<Group> group, StreamOrDevice s) {
  return recv(x.shape(), x.dtype(), src, group, s);
}

}  // namespace tessera::distributed
