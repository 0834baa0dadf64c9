// All ops.
#pragma once

#include "tessera/ops/binary.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/einsum.h"
#include "tessera/ops/fft.h"
#include "tessera/ops/linalg.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/unary.h"
#include "tessera/ops/window.h"
#include "tessera/ops/utils.h"
