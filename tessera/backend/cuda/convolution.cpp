// eval_gpu of Convolution, as matrix products (backend/common/conv_plan.h): the
// window matrices of a chunk of output rows are gathered from the input (any
// strides) into scratch memory (conv_windows.cu), then cuBLASLt multiplies
// each group's with the weight (gpu::gemm, one strided-batched call over the
// groups), straight into the output's rows.
#include <algorithm>
#include <cstdint>
#include <optional>

#include "tessera/backend/common/conv_plan.h"
#include "tessera/backend/cuda/conv_windows.h"
#include "tessera/backend/cuda/copy.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/matmul.h"
#include "tessera/ops/primitives/convolution.h"

namespace tessera {

namespace {

constexpr size_t kWindowBytes = size_t(256) << 20;

}  // namespace

void Convolution::eval_gpu(const std::vector<array>& inputs, array& out) {
  const Stream& s = stream();
  const array& x = inputs[0];
  const array& w = inputs[1];
  char* y = static_cast<char*>(gpu::allocate_output(out, s));
  if (out.size() == 0) return;
  const ConvPlan p = conv_plan(*this, x, w);
  if (p.cols == 0) {
    TESSERA_CUDA_CHECK(cudaMemsetAsync(y, 0, out.nbytes(), gpu::cuda_stream(s)));
    return;
  }
  std::optional<array> dense;
  const void* weight;
  if (w.flags().row_contiguous) {
    weight = gpu::device_ptr(w, s);
  } else {
    dense.emplace(w.shape(), w.dtype(), nullptr, std::vector<array>{});
    gpu::copy_gpu_to_row_contiguous(w, *dense, s, "Convolution");
    weight = gpu::device_ptr(*dense, s);
  }
  const void* in = gpu::device_ptr(x, s);
  const int64_t esize = out.itemsize();
  const int64_t O = p.out_channels;
  const int64_t chunk = chunk_rows(p, esize, kWindowBytes);
  void* windows = gpu::scratch(p.groups * chunk * p.cols * esize, s);
  for (int64_t r0 = 0; r0 < p.rows; r0 += chunk) {
    const int64_t count = std::min(chunk, p.rows - r0);
    gpu::gather_windows(p, in, r0, count, windows, esize, s);
    gpu::gemm({windows, {count * p.cols}, p.cols, 1}, {weight, {p.out_group * p.cols}, 1, p.cols},
              y + r0 * O * esize, O, {p.out_group}, out.dtype(),
              {static_cast<ShapeElem>(p.groups)}, count, p.out_group, p.cols, s, "Convolution");
  }
}

}  // namespace tessera
