// The issue-5 training-step benchmark, shared by bench_cpu and bench_gpu.
#pragma once

#include <cmath>
#include <vector>

#include "bench_util.h"
#include "tessera/tessera.h"

namespace bench {

using namespace tessera;

// One training step's value_and_grad of a 4-layer perceptron (width 1024,
// batch 256, float32, relu between layers, mean squared error) on device d:
// the issue-5 benchmark. Returns the median seconds per step.
inline double mlp_step(Device d) {
  Device previous = default_device();
  set_default_device(d);
  const int width = 1024, batch = 256, layers = 4;
  auto values = [&](Shape shape, float scale, int salt) {
    size_t n = shape_size(shape);
    array a = remainder(arange(0, static_cast<int>(n)) * (salt * 7 + 13), array(1021));
    return reshape(astype(a, float32) * (scale / 1021.0f) - scale / 2, shape);
  };
  std::vector<array> params;
  for (int l = 0; l < layers; ++l) {
    params.push_back(values({width, width}, 2.0f / std::sqrt(float(width)), l));
    params.push_back(values({width}, 0.1f, l + 10));
  }
  array x = values({batch, width}, 2.0f, 20), y = values({batch, width}, 2.0f, 21);
  eval(params);
  eval(x, y);
  auto loss = [&](const std::vector<array>& p) {
    array h = x;
    for (int l = 0; l < layers; ++l) {
      h = addmm(p[2 * l + 1], h, transpose(p[2 * l]));
      if (l + 1 < layers) h = maximum(h, array(0.0f));
    }
    return mean(square(h - y));
  };
  std::vector<int> argnums;
  for (int i = 0; i < 2 * layers; ++i) argnums.push_back(i);
  auto step = value_and_grad(loss, argnums);
  double t = time_median([&] {
    auto [value, grads] = step(params);
    grads.push_back(value);
    eval(grads);
    synchronize();
  }, 20, 3);
  set_default_device(previous);
  return t;
}

}  // namespace bench
