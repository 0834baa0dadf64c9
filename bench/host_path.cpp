// The host cost of one op: a chain of 10,000 scalar adds (`x = x + 1.0f`)
// built and evaluated from C++, on the CPU and, where there is one, the GPU.
// Prints JSON lines (bench_util.h): seconds per chain, work in ops; the
// build and eval halves are reported apart. bench/host_path.py times the
// same chain from Python.
//
//   build/bench/host_path            # every case
//   build/bench/host_path gpu        # the names containing "gpu"
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

constexpr int kOps = 10000;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void chain(Device d, const std::string& name, int argc, char** argv) {
  if (!bench::wanted(argc, argv, name)) return;
  StreamContext ctx(d);
  std::vector<double> build, run, total;
  for (int rep = 0; rep < 18; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    array x(0.0f);
    for (int i = 0; i < kOps; ++i) x = x + 1.0f;
    auto t1 = std::chrono::steady_clock::now();
    eval(x);
    synchronize();
    auto t2 = std::chrono::steady_clock::now();
    if (x.item<float>() != kOps) {
      std::fprintf(stderr, "host_path: the chain gave %g, not %d\n", x.item<float>(), kOps);
      std::exit(1);
    }
    if (rep < 3) continue;  // warm-up
    build.push_back(std::chrono::duration<double>(t1 - t0).count());
    run.push_back(std::chrono::duration<double>(t2 - t1).count());
    total.push_back(std::chrono::duration<double>(t2 - t0).count());
  }
  bench::report(name, median(total), kOps, "op");
  bench::report(name + "_build", median(build), kOps, "op");
  bench::report(name + "_eval", median(run), kOps, "op");
}

}  // namespace

int main(int argc, char** argv) {
  chain(Device::cpu, "scalar_add_chain_cpu", argc, argv);
  if (is_available(Device::gpu)) chain(Device::gpu, "scalar_add_chain_gpu", argc, argv);
  return 0;
}
