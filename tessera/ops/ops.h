// All ops.
#pragma once

#include "tessera/ops/binary.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/decompositions.h"
#include "tessera/ops/einsum.h"
#include "tessera/ops/fft.h"
#include "tessera/ops/linalg.h"
#include "tessera/ops/quantized.h"
#include "tessera/ops/random.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/unary.h"
#include "tessera/ops/window.h"
#include "tessera/ops/utils.h"
#include "tessera/ops/scan.h"
#include "tessera/ops/sort.h"
#include "tessera/ops/indexing.h"
