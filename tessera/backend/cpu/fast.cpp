// eval_cpu of RMSNorm, LayerNorm, their vjp, and RoPE: one pass over each row,
// rows in parallel (Note [Fast primitives] in ops/primitives/fast.h). Sums are
// in float64, the rest in float32, rounding where the fallback's graph rounds:
// the normalised value to the input type before the weight multiplies it,
// that product before the bias is added.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/backend/cpu/copy.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/ops/primitives/fast.h"

namespace tessera::fast {

namespace {

template <typename T>
float round_to(float v) {
  return static_cast<float>(T(v));
}

// The rows of x (all axes but the last) and their length.
struct Rows {
  int64_t rows;
  int64_t d;
};
Rows rows_of(const array& x) {
  const int64_t d = x.shape(-1);
  return {static_cast<int64_t>(x.size()) / d, d};
}

// The sum of f(i) for i < n in double, as kSumLanes interleaved sums added
// at the end: the additions of one lane do not wait on the others', so the
// loop vectorises and runs at the adds' throughput (one running sum waits on
// each addition in turn).
constexpr int kSumLanes = 8;
template <typename F>
double interleaved_sum(int64_t n, F f) {
  double lanes[kSumLanes] = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    for (int k = 0; k < kSumLanes; ++k) lanes[k] += f(i + k);
  }
  for (int k = 0; i < n; ++i, ++k) lanes[k] += f(i);
  return ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) +
         ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
}

// (mean, 1 / sqrt(variance + eps)) of a row; the mean is 0 for rms_norm.
template <typename T>
std::pair<float, float> row_stats(const T* x, int64_t d, bool rms, float eps) {
  double mean = 0;
  if (!rms) {
    mean = interleaved_sum(d, [&](int64_t i) { return double(static_cast<float>(x[i])); });
    mean /= static_cast<double>(d);
  }
  const float m = static_cast<float>(mean);
  const double sq = interleaved_sum(d, [&](int64_t i) {
    const double c = static_cast<float>(x[i]) - m;
    return c * c;
  });
  return {m, 1.0f / std::sqrt(static_cast<float>(sq / static_cast<double>(d)) + eps)};
}

void norm_forward(const std::vector<array>& inputs, int weight, int bias, bool rms, float eps,
                  array& out, const char* op) {
  array x = cpu::ensure_row_contiguous(inputs[0]);
  std::optional<array> w, b;
  if (weight >= 0) w = cpu::ensure_row_contiguous(inputs[weight]);
  if (bias >= 0) b = cpu::ensure_row_contiguous(inputs[bias]);
  out.set_data(allocator::malloc(out.nbytes()));
  const auto [rows, d] = rows_of(x);
  dispatch_kernel(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xs = x.data<T>();
    const T* ws = w ? w->data<T>() : nullptr;
    const T* bs = b ? b->data<T>() : nullptr;
    T* ys = out.data<T>();
    cpu::parallel_for(rows, std::max<int64_t>(1, 16384 / d), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* xr = xs + r * d;
        T* yr = ys + r * d;
        const auto [mean, inv] = row_stats(xr, d, rms, eps);
        for (int64_t i = 0; i < d; ++i) {
          float n = round_to<T>((static_cast<float>(xr[i]) - mean) * inv);
          if (ws) n = round_to<T>(n * static_cast<float>(ws[i]));
          if (bs) n = n + static_cast<float>(bs[i]);
          yr[i] = T(n);
        }
      }
    });
  });
}

// inputs {x, weight?, bias?, cotangent}, outputs {dx, dweight?, dbias?}.
void norm_backward(const std::vector<array>& inputs, std::vector<array>& outputs, bool has_weight,
                   bool has_bias, bool rms, float eps, const char* op) {
  array x = cpu::ensure_row_contiguous(inputs[0]);
  array cot = cpu::ensure_row_contiguous(inputs.back());
  std::optional<array> w;
  if (has_weight) w = cpu::ensure_row_contiguous(inputs[1]);
  for (auto& o : outputs) o.set_data(allocator::malloc(o.nbytes()));
  const auto [rows, d] = rows_of(x);
  // Rows in chunks of their own partial sums of dweight and dbias, added in
  // chunk order: the same result for any number of threads.
  const int64_t chunks =
      std::max<int64_t>(1, std::min<int64_t>({rows, 64, (int64_t{1} << 22) / d}));
  const int64_t per_chunk = (rows + chunks - 1) / chunks;
  const int sums = (has_weight ? 1 : 0) + (has_bias ? 1 : 0);
  std::vector<double> partial(static_cast<size_t>(chunks * sums * d), 0.0);
  dispatch_kernel(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xs = x.data<T>();
    const T* cs = cot.data<T>();
    const T* ws = w ? w->data<T>() : nullptr;
    T* dxs = outputs[0].data<T>();
    cpu::parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double* pw = has_weight ? partial.data() + c * sums * d : nullptr;
        double* pb = has_bias ? partial.data() + (c * sums + (has_weight ? 1 : 0)) * d : nullptr;
        for (int64_t r = c * per_chunk; r < std::min(rows, (c + 1) * per_chunk); ++r) {
          const T* xr = xs + r * d;
          const T* cr = cs + r * d;
          const auto [mean, inv] = row_stats(xr, d, rms, eps);
          auto g_at = [&](int64_t i) {
            return static_cast<float>(cr[i]) * (ws ? static_cast<float>(ws[i]) : 1.0f);
          };
          const double sg = rms ? 0.0 : interleaved_sum(d, [&](int64_t i) {
            return double(g_at(i));
          });
          const double sgn = interleaved_sum(d, [&](int64_t i) {
            return static_cast<double>(g_at(i)) * ((static_cast<float>(xr[i]) - mean) * inv);
          });
          const float mg = rms ? 0.0f : static_cast<float>(sg / static_cast<double>(d));
          const float mgn = static_cast<float>(sgn / static_cast<double>(d));
          T* dxr = dxs + r * d;
          for (int64_t i = 0; i < d; ++i) {
            const float g0 = static_cast<float>(cr[i]);
            const float n = (static_cast<float>(xr[i]) - mean) * inv;
            const float g = g0 * (ws ? static_cast<float>(ws[i]) : 1.0f);
            dxr[i] = T(inv * (g - mg - n * mgn));
            if (pw) pw[i] += static_cast<double>(g0) * round_to<T>(n);
            if (pb) pb[i] += g0;
          }
        }
      }
    });
    for (int which = 0; which < sums; ++which) {
      T* dst = outputs[1 + which].data<T>();
      for (int64_t i = 0; i < d; ++i) {
        double t = 0;
        for (int64_t c = 0; c < chunks; ++c) t += partial[(c * sums + which) * d + i];
        dst[i] = T(static_cast<float>(t));
      }
    }
  });
}

}  // namespace

void RMSNorm::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (use_fallback(inputs)) return Custom::eval_cpu(inputs, outputs);
  norm_forward(inputs, has_weight_ ? 1 : -1, -1, true, eps_, outputs[0], "RMSNorm");
}

void LayerNorm::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (use_fallback(inputs)) return Custom::eval_cpu(inputs, outputs);
  norm_forward(inputs, has_weight_ ? 1 : -1, has_bias_ ? (has_weight_ ? 2 : 1) : -1, false, eps_,
               outputs[0], "LayerNorm");
}

void RMSNormVJP::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (use_fallback(inputs)) return Custom::eval_cpu(inputs, outputs);
  norm_backward(inputs, outputs, has_weight_, false, true, eps_, "RMSNormVJP");
}

void LayerNormVJP::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (use_fallback(inputs)) return Custom::eval_cpu(inputs, outputs);
  norm_backward(inputs, outputs, has_weight_, has_bias_, false, eps_, "LayerNormVJP");
}

void RoPE::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (use_fallback(inputs)) return Custom::eval_cpu(inputs, outputs);
  array x = cpu::ensure_row_contiguous(inputs[0]);
  array offset = cpu::ensure_row_contiguous(inputs[1]);
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  const int64_t batch = x.shape(0), t_len = x.shape(-2), d = x.shape(-1);
  const int64_t per_batch = static_cast<int64_t>(x.size()) / batch;
  const int half = dims_ / 2;
  std::optional<array> freqs;
  if (inputs.size() > 2) freqs = cpu::ensure_row_contiguous(inputs[2]);
  std::vector<float> inv(half);
  for (int i = 0; i < half; ++i) {
    inv[i] = freqs ? 1.0f / freqs->data<float>()[i]
                   : std::pow(*base_, -static_cast<float>(i) / static_cast<float>(half));
  }
  std::vector<float> offsets(offset.size());
  for (size_t b = 0; b < offsets.size(); ++b) {
    offsets[b] = offset.dtype() == int32   ? static_cast<float>(offset.data<int32_t>()[b])
                 : offset.dtype() == int64 ? static_cast<float>(offset.data<int64_t>()[b])
                                           : offset.data<float>()[b];
  }
  // The angle of value pair i at row r: the row's position (its place in the
  // sequence plus its batch element's offset, scaled) times inv[i].
  const bool per_batch_offset = offsets.size() != 1;
  auto position = [&](int64_t r) {
    const int64_t b = r * d / per_batch;
    return (static_cast<float>(r % t_len) + offsets[per_batch_offset ? b : 0]) * scale_;
  };
  // cs[2i], cs[2i + 1] = cos and sin of pair i's angle at row r.
  auto angles = [&](int64_t r, float* cs) {
    const float pos = position(r);
    for (int i = 0; i < half; ++i) {
      const float theta = pos * inv[i];
      cs[2 * i] = std::cos(theta);
      cs[2 * i + 1] = std::sin(theta);
    }
  };
  // Rows of different heads share their positions: where there are at least
  // two rows a position, each position's cosines and sines are computed once
  // (the same values, so the same results).
  const int64_t rows = static_cast<int64_t>(x.size()) / d;
  const int64_t positions = (per_batch_offset ? batch : 1) * t_len;
  std::vector<float> table;
  if (rows >= 2 * positions) {
    table.resize(static_cast<size_t>(positions) * half * 2);
    cpu::parallel_for(positions, std::max<int64_t>(1, 4096 / std::max(half, 1)),
                      [&](int64_t begin, int64_t end) {
      // position p is that of row (p / t_len) * per_batch / d + p % t_len
      for (int64_t p = begin; p < end; ++p) {
        angles((p / t_len) * (per_batch / d) + p % t_len, table.data() + p * half * 2);
      }
    });
  }
  dispatch_kernel(x.dtype(), "RoPE", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xs = x.data<T>();
    T* ys = out.data<T>();
    cpu::parallel_for(rows, std::max<int64_t>(1, 16384 / d), [&](int64_t begin, int64_t end) {
      std::vector<float> row_angles(table.empty() ? 2 * half : 0);
      for (int64_t r = begin; r < end; ++r) {
        const T* xr = xs + r * d;
        T* yr = ys + r * d;
        const float* cs = row_angles.data();
        if (table.empty()) {
          angles(r, row_angles.data());
        } else {
          cs = table.data() +
               ((per_batch_offset ? r * d / per_batch * t_len : 0) + r % t_len) * half * 2;
        }
        for (int i = 0; i < half; ++i) {
          const float c = cs[2 * i], s = cs[2 * i + 1];
          const int i1 = traditional_ ? 2 * i : i, i2 = traditional_ ? 2 * i + 1 : i + half;
          const float x1 = static_cast<float>(xr[i1]), x2 = static_cast<float>(xr[i2]);
          yr[i1] = T(x1 * c - x2 * s);
          yr[i2] = T(x1 * s + x2 * c);
        }
        std::copy(xr + dims_, xr + d, yr + dims_);
      }
    });
  });
}

}  // namespace tessera::fast
