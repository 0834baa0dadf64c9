// Tessera: lazy arrays on CPUs and NVIDIA GPUs, with MLX's interface.
//
//   #include <tessera/tessera.h>
//   namespace mx = tessera;
//   auto a = mx::ones({2, 2});
//   auto b = mx::matmul(a, a) + 1.0f;
//   mx::eval(b);
#pragma once

#include "tessera/core/array.h"
#include "tessera/core/device.h"
#include "tessera/core/dtype.h"
#include "tessera/core/eval.h"
#include "tessera/core/primitive.h"
#include "tessera/core/print.h"
#include "tessera/core/streams.h"
#include "tessera/io/export.h"
#include "tessera/io/io.h"
#include "tessera/memory/allocator.h"
#include "tessera/ops/array_api.h"
#include "tessera/ops/convolution.h"
#include "tessera/ops/custom_kernel.h"
#include "tessera/ops/distributed.h"
#include "tessera/ops/ops.h"
#include "tessera/transforms/compile.h"
#include "tessera/transforms/transforms.h"
