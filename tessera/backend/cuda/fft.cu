// eval_gpu of FFT through cuFFT.
//
// The transform runs on row-contiguous data: complex transforms copy the input
// into the output and transform it in place; forward real transforms read a
// row-contiguous float32 input (the input itself when it is one) into the
// output, then transform the other axes in place; inverse real transforms copy
// the input into a complex temporary (cuFFT's C2R overwrites its input),
// transform the other axes there, clear the imaginary parts of the bins that
// must be real (as pocketfft ignores them on the CPU) and run C2R into the
// output. Consecutive complex axes go through one plan (up to 3 at a time);
// an axis run sits in a (outer, dims, inner) layout, one plan batching over
// inner (stride inner, distance 1) or over outer (distance dims * inner),
// whichever needs fewer calls. Plans are cached by layout and device; each
// call sets the primitive's stream and a work area from the stream's scratch
// memory under the plan's lock, so one plan serves every stream.
#include <cufft.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/backend/cuda/copy.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/recording.h"
#include "tessera/ops/primitives/fft.h"

namespace tessera {

namespace {

void check_cufft(cufftResult r, const char* call) {
  if (r != CUFFT_SUCCESS) {
    throw std::runtime_error(std::string("[FFT] ") + call + " failed with cuFFT error " +
                             std::to_string(static_cast<int>(r)));
  }
}
#define TESSERA_CUFFT_CHECK(call) check_cufft((call), #call)

struct Plan {
  cufftHandle handle = 0;
  size_t workspace = 0;
  std::mutex mutex;
};

// One plan per layout and device, kept for the life of the process.
Plan& get_plan(int device, cufftType type, const std::vector<long long>& n,
               const std::vector<long long>& inembed, long long istride, long long idist,
               const std::vector<long long>& onembed, long long ostride, long long odist,
               long long batch) {
  static std::mutex mutex;
  static std::map<std::vector<long long>, std::unique_ptr<Plan>> cache;
  std::vector<long long> key{device, static_cast<long long>(type), istride, idist, ostride,
                             odist, batch, static_cast<long long>(n.size())};
  key.insert(key.end(), n.begin(), n.end());
  key.insert(key.end(), inembed.begin(), inembed.end());
  key.insert(key.end(), onembed.begin(), onembed.end());
  std::lock_guard l(mutex);
  auto& slot = cache[key];
  if (!slot) {
    auto p = std::make_unique<Plan>();
    TESSERA_CUFFT_CHECK(cufftCreate(&p->handle));
    TESSERA_CUFFT_CHECK(cufftSetAutoAllocation(p->handle, 0));
    auto nn = n, ie = inembed, oe = onembed;
    cufftResult r = cufftMakePlanMany64(p->handle, static_cast<int>(nn.size()), nn.data(),
                                        ie.data(), istride, idist, oe.data(), ostride, odist,
                                        type, batch, &p->workspace);
    if (r != CUFFT_SUCCESS) {
      cufftDestroy(p->handle);
      check_cufft(r, "cufftMakePlanMany64");
    }
    slot = std::move(p);
  }
  return *slot;
}

// A run of transformed axes in a row-contiguous array: (outer, dims, inner).
struct Run {
  long long outer = 1, inner = 1;
  std::vector<long long> dims;
};

Run make_run(const Shape& shape, int first, int last) {
  Run r;
  for (int d = 0; d < first; ++d) r.outer *= shape[d];
  for (int d = first; d <= last; ++d) r.dims.push_back(shape[d]);
  for (int d = last + 1; d < static_cast<int>(shape.size()); ++d) r.inner *= shape[d];
  return r;
}

// Runs one plan over the whole run: `in_dims` / `out_dims` are the embedded
// extents of the input and output (they differ on the last axis of real
// transforms). exec(plan, in_offset, out_offset) in elements. Consecutive outer
// blocks lie `in_block` / `out_block` elements apart (0: packed). Real data
// must start 8-byte aligned for cuFFT, so real transforms never step through
// inner offsets (`real`): they batch over inner and loop over outer blocks,
// which the caller lays out at even offsets.
template <typename Exec>
void run_plan(const Run& r, const std::vector<long long>& in_dims,
              const std::vector<long long>& out_dims, cufftType type, const Stream& s,
              Exec&& exec, bool real = false, long long in_block = 0, long long out_block = 0) {
  long long in_count = 1, out_count = 1;
  for (auto d : in_dims) in_count *= d;
  for (auto d : out_dims) out_count *= d;
  if (in_block == 0) in_block = in_count * r.inner;
  if (out_block == 0) out_block = out_count * r.inner;
  const bool one_call = r.inner == 1 && in_block == in_count && out_block == out_count;
  const bool over_inner = !one_call && !real && r.inner > 1 && r.outer >= r.inner;
  long long idist, odist, batch, loops;
  if (one_call) {
    idist = in_count, odist = out_count, batch = r.outer, loops = 1;
  } else if (over_inner) {
    idist = in_count * r.inner, odist = out_count * r.inner, batch = r.outer, loops = r.inner;
  } else {
    idist = 1, odist = 1, batch = r.inner, loops = r.outer;
  }
  int device = 0;
  TESSERA_CUDA_CHECK(cudaGetDevice(&device));
  Plan& plan = get_plan(device, type, r.dims, in_dims, r.inner, idist, out_dims, r.inner, odist,
                        batch);
  std::lock_guard l(plan.mutex);
  TESSERA_CUFFT_CHECK(cufftSetStream(plan.handle, gpu::cuda_stream(s)));
  if (plan.workspace > 0) {
    TESSERA_CUFFT_CHECK(cufftSetWorkArea(plan.handle, gpu::scratch(plan.workspace, s)));
  }
  for (long long i = 0; i < loops; ++i) {
    long long in_off = 0, out_off = 0;
    if (one_call) {
    } else if (over_inner) {
      in_off = out_off = i;
    } else {
      in_off = i * in_block;
      out_off = i * out_block;
    }
    exec(plan.handle, in_off, out_off);
  }
}

// The distance between outer blocks of real data of `block` elements, so that
// every block starts 8-byte aligned: `block` rounded up to even when a loop
// steps through blocks.
long long real_block(const Run& r, long long block) {
  return r.inner > 1 && r.outer > 1 ? block + block % 2 : block;
}

// In-place complex transforms of `data` (row-contiguous of `shape`) over axes.
void c2c_axes(cufftComplex* data, const Shape& shape, std::vector<int> axes, bool inverse,
              const Stream& s) {
  // A transform of length 1 is the identity.
  axes.erase(std::remove_if(axes.begin(), axes.end(), [&](int ax) { return shape[ax] == 1; }),
             axes.end());
  std::sort(axes.begin(), axes.end());
  const int dir = inverse ? CUFFT_INVERSE : CUFFT_FORWARD;
  for (size_t i = 0; i < axes.size();) {
    size_t j = i;
    while (j + 1 < axes.size() && axes[j + 1] == axes[j] + 1 && j + 1 - i < 3) ++j;
    Run r = make_run(shape, axes[i], axes[j]);
    run_plan(r, r.dims, r.dims, CUFFT_C2C, s, [&](cufftHandle h, long long io, long long) {
      TESSERA_CUFFT_CHECK(cufftExecC2C(h, data + io, data + io, dir));
    });
    i = j + 1;
  }
}

__global__ void scale_kernel(float* x, int64_t n, float scale) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    x[i] *= scale;
  }
}

// Clears the imaginary parts of bins 0 and (even n) n / 2 of a half spectrum
// laid out as (outer, m, inner).
__global__ void real_bins_kernel(cufftComplex* x, int64_t outer, int64_t m, int64_t inner,
                                 bool even) {
  const int64_t total = outer * inner;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = i / inner, j = i % inner;
    x[o * m * inner + j].y = 0.f;
    if (even) x[(o * m + m - 1) * inner + j].y = 0.f;
  }
}

constexpr int kThreads = 256;

// A real transform over one point: the value itself, between float32 and
// complex64 (rows of `shape`, row-major).
void one_point(const Shape& shape, const void* x, Dtype from, void* y, Dtype to,
               const Stream& s) {
  Strides st = row_major_strides(shape);
  gpu::copy_gpu(shape, x, from, st, y, to, st, s, "FFT");
}

}  // namespace

void FFT::eval_gpu(const std::vector<array>& inputs, array& out) {
  // cuFFT's plans are not recorded into graphs (Note [Recorded batches]).
  gpu::NoRecording no_recording;
  const auto& s = stream();
  const array& in = inputs[0];
  if (out.size() == 0) {
    gpu::allocate_output(out, s);
    return;
  }
  cudaStream_t cs = gpu::cuda_stream(s);
  const int last = axes_.back();
  std::vector<int> others(axes_.begin(), axes_.end() - 1);
  if (!real_) {
    gpu::copy_gpu_to_row_contiguous(in, out, s, "FFT");
    c2c_axes(static_cast<cufftComplex*>(gpu::writable_device_ptr(out, s)), out.shape(), axes_,
             inverse_, s);
  } else if (!inverse_) {
    array src = in;
    if (!in.flags().row_contiguous) {
      src = array(in.shape(), float32, nullptr, {});
      gpu::copy_gpu_to_row_contiguous(in, src, s, "FFT");
    }
    auto* x = static_cast<cufftReal*>(const_cast<void*>(gpu::device_ptr(src, s)));
    auto* y = static_cast<cufftComplex*>(gpu::allocate_output(out, s));
    Run r = make_run(in.shape(), last, last);
    if (real_n_ == 1) {
      one_point(in.shape(), x, float32, y, complex64, s);  // one bin: the value itself
    } else {
      const long long n = r.dims[0], block = n * r.inner, padded = real_block(r, block);
      std::optional<array> aligned;
      if (padded != block || reinterpret_cast<uintptr_t>(x) % sizeof(cufftComplex) != 0) {
        // A view at an odd offset, or blocks of odd length: copy to even offsets.
        aligned.emplace(Shape{static_cast<ShapeElem>(r.outer * padded)}, float32, nullptr,
                        std::vector<array>{});
        auto* t = static_cast<cufftReal*>(gpu::allocate_output(*aligned, s));
        Shape shape{static_cast<ShapeElem>(r.outer), static_cast<ShapeElem>(n),
                    static_cast<ShapeElem>(r.inner)};
        gpu::copy_gpu(shape, x, float32, Strides{block, r.inner, 1}, t, float32,
                      Strides{padded, r.inner, 1}, s, "FFT");
        x = t;
      }
      run_plan(r, {n}, {n / 2 + 1}, CUFFT_R2C, s,
               [&](cufftHandle h, long long io, long long oo) {
                 TESSERA_CUFFT_CHECK(cufftExecR2C(h, x + io, y + oo));
               }, true, padded, 0);
    }
    c2c_axes(y, out.shape(), others, false, s);
  } else {
    array tmp(in.shape(), complex64, nullptr, {});
    gpu::copy_gpu_to_row_contiguous(in, tmp, s, "FFT");
    auto* x = static_cast<cufftComplex*>(gpu::writable_device_ptr(tmp, s));
    c2c_axes(x, in.shape(), others, true, s);
    Run r = make_run(out.shape(), last, last);
    const int64_t m = real_n_ / 2 + 1;
    real_bins_kernel<<<gpu::grid_blocks(r.outer * r.inner, kThreads), kThreads, 0, cs>>>(
        x, r.outer, m, r.inner, real_n_ % 2 == 0);
    gpu::check_launch("FFT");
    auto* y = static_cast<cufftReal*>(gpu::allocate_output(out, s));
    if (real_n_ == 1) {
      one_point(out.shape(), x, complex64, y, float32, s);  // the real part of the one bin
    } else {
      const long long n = r.dims[0], block = n * r.inner, padded = real_block(r, block);
      std::optional<array> aligned;
      cufftReal* t = y;
      if (padded != block) {
        // Blocks of odd length: transform to even offsets, then copy them out.
        aligned.emplace(Shape{static_cast<ShapeElem>(r.outer * padded)}, float32, nullptr,
                        std::vector<array>{});
        t = static_cast<cufftReal*>(gpu::allocate_output(*aligned, s));
      }
      run_plan(r, {m}, {n}, CUFFT_C2R, s, [&](cufftHandle h, long long io, long long oo) {
        TESSERA_CUFFT_CHECK(cufftExecC2R(h, x + io, t + oo));
      }, true, 0, padded);
      if (t != y) {
        Shape shape{static_cast<ShapeElem>(r.outer), static_cast<ShapeElem>(n),
                    static_cast<ShapeElem>(r.inner)};
        gpu::copy_gpu(shape, t, float32, Strides{padded, r.inner, 1}, y, float32,
                      Strides{block, r.inner, 1}, s, "FFT");
      }
    }
  }
  if (scale_ != 1.0) {
    const int64_t n = static_cast<int64_t>(out.size()) * (real_ && inverse_ ? 1 : 2);
    float* p = static_cast<float*>(gpu::writable_device_ptr(out, s));
    scale_kernel<<<gpu::grid_blocks(n, kThreads), kThreads, 0, cs>>>(p, n,
                                                                   static_cast<float>(scale_));
    gpu::check_launch("FFT");
  }
}

}  // namespace tessera
