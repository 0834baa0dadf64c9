// What a kernel launch costs the host, against replaying the same launches as
// a CUDA graph: the floor under the per-op host time of a decoding step (about
// 280 launches a token; docs/design.md, "A decoding step, on the GPU").
//
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/launch_cost_gpu.cu -o build/launch_cost_gpu
//   build/launch_cost_gpu [launches]      # default 280
//
// For a chain of N tiny kernels on one stream it prints the host µs per kernel of
//   - plain launches (<<<>>>), and the wall time per kernel until the stream is idle;
//   - capturing the chain into a graph (cudaStreamBeginCapture ... EndCapture);
//   - cudaGraphInstantiate of that graph, and cudaGraphExecUpdate of the instance
//     from a freshly captured graph of the same shape whose arguments differ (the
//     cost of replaying a step whose pointers changed);
//   - cudaGraphLaunch of the instance, host and wall.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                      \
  do {                                                                                \
    cudaError_t e = (x);                                                              \
    if (e != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

__global__ void add_one(float* x, const float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = y[i] + 1.0f;
}

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// The chain: kernel k reads buffer k % 2 and writes the other (arguments vary with `shift`).
void chain(cudaStream_t s, float* a, float* b, int n, int launches, int shift) {
  for (int k = 0; k < launches; ++k) {
    float* dst = (k + shift) % 2 ? a : b;
    float* src = (k + shift) % 2 ? b : a;
    add_one<<<(n + 255) / 256, 256, 0, s>>>(dst, src, n);
  }
}

int main(int argc, char** argv) {
  const int launches = argc > 1 ? std::atoi(argv[1]) : 280;
  const int n = 2048, reps = 20;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float *a, *b;
  CHECK(cudaMalloc(&a, n * sizeof(float)));
  CHECK(cudaMalloc(&b, n * sizeof(float)));
  chain(s, a, b, n, launches, 0);  // warm-up
  CHECK(cudaStreamSynchronize(s));

  std::vector<double> launch_host, launch_wall, capture, instantiate, update, graph_host, graph_wall;
  cudaGraphExec_t exec = nullptr;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    chain(s, a, b, n, launches, r);
    launch_host.push_back(us_since(t0));
    CHECK(cudaStreamSynchronize(s));
    launch_wall.push_back(us_since(t0));

    cudaGraph_t g;
    t0 = Clock::now();
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    chain(s, a, b, n, launches, r);
    CHECK(cudaStreamEndCapture(s, &g));
    capture.push_back(us_since(t0));
    if (!exec) {
      t0 = Clock::now();
      CHECK(cudaGraphInstantiate(&exec, g, 0));
      instantiate.push_back(us_since(t0));
    } else {
      t0 = Clock::now();
      cudaGraphExecUpdateResultInfo info;
      CHECK(cudaGraphExecUpdate(exec, g, &info));
      update.push_back(us_since(t0));
    }
    CHECK(cudaGraphDestroy(g));
    t0 = Clock::now();
    CHECK(cudaGraphLaunch(exec, s));
    graph_host.push_back(us_since(t0));
    CHECK(cudaStreamSynchronize(s));
    graph_wall.push_back(us_since(t0));
  }
  auto median = [&](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2] / launches;
  };
  std::printf("%d launches of a tiny kernel, us per kernel (median of %d):\n", launches, reps);
  std::printf("  launch <<<>>>         host %6.3f  wall %6.3f\n", median(launch_host),
              median(launch_wall));
  std::printf("  stream capture        host %6.3f\n", median(capture));
  std::printf("  cudaGraphInstantiate  host %6.3f (once)\n", median(instantiate));
  std::printf("  cudaGraphExecUpdate   host %6.3f\n", median(update));
  std::printf("  cudaGraphLaunch       host %6.3f  wall %6.3f\n", median(graph_host),
              median(graph_wall));
  CHECK(cudaGraphExecDestroy(exec));
  return 0;
}
