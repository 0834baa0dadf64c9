#include "tessera/backend/common/conv_plan.h"

#include <algorithm>
#include <stdexcept>

#include "tessera/ops/primitives/convolution.h"

namespace tessera {

ConvPlan conv_plan(const Convolution& p, const array& x, const array& w) {
  ConvPlan plan{};
  const int n = static_cast<int>(x.ndim()) - 2;
  if (n < 1 || n > ConvPlan::kMaxDims) {
    throw std::logic_error("[Convolution] unsupported number of spatial dimensions (bug)");
  }
  plan.ndim = n;
  plan.flip = p.flip();
  plan.groups = p.groups();
  plan.in_group = x.shape(n + 1) / p.groups();
  plan.out_channels = w.shape(0);
  plan.out_group = plan.out_channels / p.groups();
  plan.batch_stride = x.strides()[0];
  plan.channel_stride = x.strides()[n + 1];
  plan.rows = x.shape(0);
  plan.taps = 1;
  for (int i = 0; i < n; ++i) {
    const int64_t size = x.shape(i + 1);
    plan.in_stride[i] = x.strides()[i + 1];
    plan.idil[i] = p.input_dilation()[i];
    plan.dilated[i] = size == 0 ? 0 : (size - 1) * plan.idil[i] + 1;
    plan.kernel[i] = w.shape(i + 1);
    plan.stride[i] = p.stride()[i];
    plan.lo[i] = p.padding_lo()[i];
    plan.kdil[i] = p.kernel_dilation()[i];
    const int64_t padded = plan.dilated[i] + plan.lo[i] + p.padding_hi()[i];
    plan.out[i] = (padded - (plan.kernel[i] - 1) * plan.kdil[i] - 1) / plan.stride[i] + 1;
    plan.rows *= plan.out[i];
    plan.taps *= plan.kernel[i];
  }
  plan.cols = plan.taps * plan.in_group;
  return plan;
}

int64_t chunk_rows(const ConvPlan& plan, size_t elem_bytes, size_t budget) {
  const int64_t row_bytes = std::max<int64_t>(1, plan.groups * plan.cols * int64_t(elem_bytes));
  return std::clamp<int64_t>(int64_t(budget) / row_bytes, 1, std::max<int64_t>(plan.rows, 1));
}

}  // namespace tessera
