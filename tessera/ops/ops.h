// All ops.
#pragma once

#include "tessera/ops/binary.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/linalg.h"
#include "tessera/ops/random.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/unary.h"
#include "tessera/ops/utils.h"
