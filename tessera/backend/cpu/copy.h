// Copies with casts: the CPU kernels behind Copy, AsType and contiguous inputs.
#pragma once

#include <cstddef>

#include "tessera/core/array.h"

namespace tessera::cpu {

// n contiguous elements of type src_t -> dst_t, split over the CPU threads
// (tessera::cast_contiguous on each part).
void cast_contiguous(const void* src, Dtype src_t, void* dst, Dtype dst_t, size_t n);

// Copies the elements of `in` (any strides, broadcast included) into the data of
// `out`, which must already have data and out.shape() == in.shape(); casts to
// out.dtype(). out's strides are honoured.
void copy_into(const array& in, array& out);

// Allocates out row-contiguous and copies in into it.
void copy_to_row_contiguous(const array& in, array& out);

// `in` itself if it is row-contiguous with no offset games needed, else a
// row-contiguous copy. The result is evaluated; for kernels that want dense input.
array ensure_row_contiguous(const array& in);

}  // namespace tessera::cpu
