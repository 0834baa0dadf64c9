// Convolution: every convolution op (conv1d/2d/3d, the transposed ones,
// conv_general) is one node of this primitive.
//
// Note [Convolution geometry]
// Inputs: x (N, S_1..S_n, C) and w (O, K_1..K_n, C / groups), of one floating
// dtype; the output is (N, out_1..out_n, O), row-contiguous. Along each spatial
// axis i, x is first dilated (input_dilation e - 1 zeros between elements:
// D = (S - 1) e + 1, or 0 for S = 0), then padded by padding_lo and
// padding_hi zeros (a negative padding crops), giving P = D + lo + hi
// positions. The kernel of span (K - 1) d + 1 (d = kernel_dilation) slides
// over them by `stride`: out = (P - span) / stride + 1. Output position o with
// kernel offset k reads padded position q = o stride + k' d, with k' = k, or
// K - 1 - k when `flip` (a true convolution rather than a cross-correlation);
// that is input element (q - lo) / e when q - lo lies in [0, D) and is a
// multiple of e, and zero otherwise. Channels split into `groups` blocks:
// output channels of block g read input channels of block g only.
#pragma once

#include <vector>

#include "tessera/core/primitive.h"

namespace tessera {

class Convolution : public UnaryPrimitive {
 public:
  Convolution(Stream s, std::vector<int> stride, std::vector<int> padding_lo,
              std::vector<int> padding_hi, std::vector<int> kernel_dilation,
              std::vector<int> input_dilation, int groups, bool flip)
      : UnaryPrimitive(s),
        stride_(std::move(stride)),
        padding_lo_(std::move(padding_lo)),
        padding_hi_(std::move(padding_hi)),
        kernel_dilation_(std::move(kernel_dilation)),
        input_dilation_(std::move(input_dilation)),
        groups_(groups),
        flip_(flip) {}
  TESSERA_PRIMITIVE(Convolution, stride_, padding_lo_, padding_hi_, kernel_dilation_,
                    input_dilation_, groups_, flip_)
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  void print(std::ostream& os) const override;

  const std::vector<int>& stride() const { return stride_; }
  const std::vector<int>& padding_lo() const { return padding_lo_; }
  const std::vector<int>& padding_hi() const { return padding_hi_; }
  const std::vector<int>& kernel_dilation() const { return kernel_dilation_; }
  const std::vector<int>& input_dilation() const { return input_dilation_; }
  int groups() const { return groups_; }
  bool flip() const { return flip_; }

 private:
  std::vector<int> stride_;
  std::vector<int> padding_lo_;
  std::vector<int> padding_hi_;
  std::vector<int> kernel_dilation_;
  std::vector<int> input_dilation_;
  int groups_;
  bool flip_;
};

}  // namespace tessera
