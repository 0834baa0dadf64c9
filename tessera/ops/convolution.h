// Convolutions, channels last: input (N, spatial..., C_in), weight (C_out,
// kernel..., C_in / groups), result (N, out spatial..., C_out). Every one is a
// node of the Convolution primitive (geometry: Note [Convolution geometry] in
// ops/primitives/convolution.h). Inputs are promoted to a common floating dtype.
//
//   auto y = conv2d(x, w, {2, 2}, {1, 1});                  // stride 2, padding 1
//   auto t = conv_transpose1d(x, w, 2, 0, 1, 1);            // stride 2, output_padding 1
//   auto z = conv_general(x, w, {1}, {2}, {0}, {1}, {1}, 1, true);  // padding (2, 0), flipped
#pragma once

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {

// Cross-correlation of (N, L, C_in) with (C_out, K, C_in / groups).
array conv1d(const array& input, const array& weight, int stride = 1, int padding = 0,
             int dilation = 1, int groups = 1, StreamOrDevice s = {});
// Of (N, H, W, C_in) with (C_out, KH, KW, C_in / groups).
array conv2d(const array& input, const array& weight, const std::pair<int, int>& stride = {1, 1},
             const std::pair<int, int>& padding = {0, 0},
             const std::pair<int, int>& dilation = {1, 1}, int groups = 1,
             StreamOrDevice s = {});
// Of (N, D, H, W, C_in) with (C_out, KD, KH, KW, C_in); groups must be 1.
array conv3d(const array& input, const array& weight,
             const std::tuple<int, int, int>& stride = {1, 1, 1},
             const std::tuple<int, int, int>& padding = {0, 0, 0},
             const std::tuple<int, int, int>& dilation = {1, 1, 1}, int groups = 1,
             StreamOrDevice s = {});

// Transposed convolutions (the gradient of a convolution with respect to its
// input): y[i s + j d - p] += x[i] w[j], length (L - 1) s - 2 p + d (K - 1) + 1
// + output_padding; weight (C_out, K..., C_in / groups).
array conv_transpose1d(const array& input, const array& weight, int stride = 1, int padding = 0,
                       int dilation = 1, int output_padding = 0, int groups = 1,
                       StreamOrDevice s = {});
array conv_transpose2d(const array& input, const array& weight,
                       const std::pair<int, int>& stride = {1, 1},
                       const std::pair<int, int>& padding = {0, 0},
                       const std::pair<int, int>& dilation = {1, 1},
                       const std::pair<int, int>& output_padding = {0, 0}, int groups = 1,
                       StreamOrDevice s = {});
// groups must be 1.
array conv_transpose3d(const array& input, const array& weight,
                       const std::tuple<int, int, int>& stride = {1, 1, 1},
                       const std::tuple<int, int, int>& padding = {0, 0, 0},
                       const std::tuple<int, int, int>& dilation = {1, 1, 1},
                       const std::tuple<int, int, int>& output_padding = {0, 0, 0},
                       int groups = 1, StreamOrDevice s = {});

// Any number of spatial dimensions (up to 8). Each vector holds one value per
// spatial dimension, or one value for all of them (empty: the default: 1, or
// 0 for paddings). Padding may be negative (it crops); input_dilation inserts
// input_dilation - 1 zeros between input elements; flip flips the kernel (a
// true convolution rather than a cross-correlation).
array conv_general(array input, array weight, std::vector<int> stride = {},
                   std::vector<int> padding_lo = {}, std::vector<int> padding_hi = {},
                   std::vector<int> kernel_dilation = {}, std::vector<int> input_dilation = {},
                   int groups = 1, bool flip = false, StreamOrDevice s = {});
// The same with one padding on both sides.
array conv_general(const array& input, const array& weight, std::vector<int> stride = {},
                   std::vector<int> padding = {}, std::vector<int> kernel_dilation = {},
                   std::vector<int> input_dilation = {}, int groups = 1, bool flip = false,
                   StreamOrDevice s = {});

// numpy.convolve of two 1-D arrays (the kernel flipped, the longer one the
// signal): mode "full", "same" or "valid". Integer arrays are summed in
// float64 (exact below 2^53) and keep their dtype.
array convolve(const array& a, const array& v, const std::string& mode = "full",
               StreamOrDevice s = {});

}  // namespace tessera
