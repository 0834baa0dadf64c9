// distributed:: through the C++ API over MPI: CTest runs this program as a job
// of 3 processes (mpirun, when installed; see CMakeLists.txt). Every process
// checks its results against values it computes itself, prints "ok <rank>"
// and exits 0; a failed check exits 1, which fails the whole job.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

int rank_ = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: %s\n", rank_, what);
    std::exit(1);
  }
}

bool holds(const array& a, const std::vector<float>& want) {
  array f = contiguous(astype(a, float32));  // dense: a gradient may be a broadcast
  eval(f);
  if (static_cast<size_t>(f.size()) != want.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (f.data<float>()[i] != want[i]) return false;
  }
  return true;
}

}  // namespace

int main() {
  auto world = distributed::init(true, "mpi");
  const int r = world.rank(), n = world.size();
  rank_ = r;
  check(n == 3, "the job has 3 processes");
  StreamContext cpu(Device::cpu);

  // Rank r holds [r, 10 r]: sums, extrema, the gather and the scattered sum.
  array x({float(r), float(10 * r)}, {2});
  check(holds(distributed::all_sum(x), {3.f, 30.f}), "all_sum");
  check(holds(distributed::all_max(x), {2.f, 20.f}), "all_max");
  check(holds(distributed::all_min(astype(x, int32)), {0.f, 0.f}), "all_min int32");
  check(holds(distributed::all_gather(x), {0.f, 0.f, 1.f, 10.f, 2.f, 20.f}), "all_gather");
  array rows = full({3, 2}, float(r + 1), float32);
  check(holds(distributed::sum_scatter(rows), {6.f, 6.f}), "sum_scatter");
  check(holds(distributed::all_sum(astype(x, bfloat16)), {3.f, 30.f}), "all_sum bfloat16");

  // A ring, then a group of the even ranks.
  array sent = distributed::send(x, (r + 1) % n);
  array got = distributed::recv({2}, float32, (r + n - 1) % n);
  eval({sent, got});
  const float p = float((r + n - 1) % n);
  check(holds(got, {p, 10 * p}), "recv");
  auto parity = world.split(r % 2);
  check(parity.size() == (r % 2 ? 1 : 2), "split sizes");
  check(holds(distributed::all_sum(array(float(r)), parity), {r % 2 ? float(r) : 2.f}),
        "all_sum over a split");

  // The gradient of a sum over the group is the cotangent itself.
  auto g = grad([](const array& v) { return sum(distributed::all_sum(v) * 2.f); })(x);
  check(holds(g, {2.f, 2.f}), "vjp of all_sum");
  std::printf("ok %d\n", r);
  return 0;
}
