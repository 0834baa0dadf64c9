#include "tessera/ops/distributed.h"

#include <cstdlib>
#include <stdexcept>

#include "tessera/core/device.h"
#include "tessera/distributed/comm.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/primitives/distributed.h"
#include "tessera/ops/shape.h"
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
// A group of this process alone (no backend, or a split down to one) needs no
// communication: a collective over it is its input (MLX returns the input
// array itself), and a point-to-point operation has no peer to talk to.
array collective(const array& x, StreamOrDevice s) {
  to_stream(s);  // an unavailable device is still an error
  return x;
}

[[noreturn]] void no_peer(const char* op, const char* verb) {
  throw_invalid(op, std::string("cannot ") + verb + " a singleton group (size 1)");
}

Group group_or_world(const std::optional<Group>& group) { return group ? *group : init(); }

// The stream communication over g runs on: the given one where it is on the
// device of g's memory (Note [Communicators]: the GPU's for NCCL, the CPU's
// for MPI), else that device's default stream. The given stream or device is
// checked all the same.
Stream comm_stream(StreamOrDevice s, const Group& g) {
  Stream st = to_stream(s);
  const Device d(g.comm()->device_memory() ? Device::gpu : Device::cpu);
  return st.device.type == d.type ? st : default_stream(d);
}

// The dtype a reduction of t goes through where the group's library has no
// arithmetic on t; exact for t's values (and wrapping as t's own sums do).
Dtype reduced_as(Dtype t) {
  if (t == int16) return int32;
  if (t == uint16) return uint32;
  return float32;  // bool, float16, bfloat16
}

// An elementwise reduction over the processes.
array reduce(const char* op, Communication c, const array& x, const std::optional<Group>& group,
             StreamOrDevice s) {
  Group g = group_or_world(group);
  if (!g.comm()) return collective(x, s);
  if (c != Communication::all_sum && x.dtype() == complex64) {
    throw_invalid(op, "complex64 values have no order");
  }
  Stream st = comm_stream(s, g);
  if (!g.comm()->reduces(x.dtype())) {
    return astype(reduce(op, c, astype(x, reduced_as(x.dtype()), st), g, st), x.dtype(), st);
  }
  return communicate(st, c, g.comm(), x);
}

// The peer rank of a point-to-point operation (`what` it is, `verb` what the
// operation does with it), checked against the group.
int checked_peer(const char* op, const char* what, const char* verb, int peer, const Group& g) {
  if (g.size() == 1) no_peer(op, verb);
  if (peer < 0 || peer >= g.size() || peer == g.rank()) {
    throw_invalid(op, std::string(what) + " " + std::to_string(peer) + " is not another rank of " +
                          "the group (ranks 0 to " + std::to_string(g.size() - 1) +
                          ", this one " + std::to_string(g.rank()) + ")");
  }
  return peer;
}

}  // namespace

Group Group::split(int color, int key) const {
  if (!comm_) {
    throw std::runtime_error(
        "[distributed::Group::split] cannot split the group further: it holds one process");
  }
  auto sub = comm_->split(color, key < 0 ? rank_ : key);
  return Group(sub->rank(), sub->size(), sub->size() > 1 ? sub : nullptr);
}

bool is_available() { return detail::mpi_available() || detail::nccl_available(); }

bool is_available(const std::string& backend) {
  check_backend("distributed::is_available", backend);
  if (backend == "nccl") return detail::nccl_available();
  return (backend == "any" || backend == "mpi") && detail::mpi_available();
}

Group init(bool strict, const std::string& backend) {
  check_backend("distributed::init", backend);
  // "any" tries NCCL first in a job that a launcher started for it
  // (tessera.launch --backend nccl), then MPI.
  const char* launched = std::getenv("TESSERA_DISTRIBUTED_BACKEND");
  const bool nccl_job = launched && std::string(launched) == "nccl";
  if (backend == "nccl" || (backend == "any" && nccl_job)) {
    // Kept at size 1 too: the GPU's collectives then run through NCCL.
    if (auto world = detail::nccl_world()) return Group(world->rank(), world->size(), world);
  }
  if (backend == "any" || backend == "mpi") {
    if (auto world = detail::mpi_world()) {
      return Group(world->rank(), world->size(), world->size() > 1 ? world : nullptr);
    }
  }
  if (strict) {
    const std::string which =
        backend == "any" ? std::string("any backend") : "the " + backend + " backend";
    std::string why = ": this build has no " + backend + " backend";
    if (backend == "any" || backend == "mpi") {
      why = ": MPI needs an MPI library (Open MPI's libmpi.so.40) and a process started by mpirun";
    } else if (backend == "nccl") {
      why = ": NCCL needs a GPU and NCCL's library (libnccl.so.2 on the loader's path, or the "
            "file TESSERA_NCCL_LIBRARY names)";
    }
    throw std::runtime_error("[distributed::init] couldn't initialize " + which + why);
  }
  return Group(0, 1);
}

array all_sum(const array& x, std::optional<Group> group, StreamOrDevice s) {
  return reduce("distributed::all_sum", Communication::all_sum, x, group, s);
}
array all_max(const array& x, std::optional<Group> group, StreamOrDevice s) {
  return reduce("distributed::all_max", Communication::all_max, x, group, s);
}
array all_min(const array& x, std::optional<Group> group, StreamOrDevice s) {
  return reduce("distributed::all_min", Communication::all_min, x, group, s);
}

array all_gather(const array& x, std::optional<Group> group, StreamOrDevice s) {
  Group g = group_or_world(group);
  if (!g.comm()) return collective(x, s);
  Stream st = comm_stream(s, g);
  return communicate(st, Communication::all_gather, g.comm(),
                     x.ndim() == 0 ? reshape(x, {1}, st) : x);
}

array sum_scatter(const array& x, std::optional<Group> group, StreamOrDevice s) {
  Group g = group_or_world(group);
  if (!g.comm()) return collective(x, s);
  if (x.ndim() == 0 || x.shape()[0] % g.size() != 0) {
    throw_invalid("distributed::sum_scatter",
                  "the first axis (" + (x.ndim() ? std::to_string(x.shape()[0]) : "none") +
                      ") must split evenly over the " + std::to_string(g.size()) + " processes");
  }
  Stream st = comm_stream(s, g);
  if (!g.comm()->reduces(x.dtype())) {
    return astype(sum_scatter(astype(x, reduced_as(x.dtype()), st), g, st), x.dtype(), st);
  }
  return communicate(st, Communication::sum_scatter, g.comm(), x);
}

array send(const array& x, int dst, std::optional<Group> group, StreamOrDevice s) {
  Group g = group_or_world(group);
  checked_peer("distributed::send", "dst", "send to", dst, g);
  return communicate(comm_stream(s, g), Communication::send, g.comm(), x, dst);
}

array recv(Shape shape, Dtype dtype, int src, std::optional<Group> group, StreamOrDevice s) {
  Group g = group_or_world(group);
  checked_peer("distributed::recv", "src", "recv from", src, g);
  Stream st = comm_stream(s, g);
  return array(std::move(shape), dtype,
               std::make_shared<Distributed>(st, Communication::recv, g.comm(), src), {});
}

array recv_like(const array& x, int src, std::optional<Group> group, StreamOrDevice s) {
  return recv(x.shape(), x.dtype(), src, group, s);
}

}  // namespace tessera::distributed
