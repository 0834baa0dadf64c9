import os

import numpy as np
import pytest
from hypothesis import settings

# float32 products in full float32 on the GPU too, for the tests' tolerances
# (MLX's default, kept by Tessera, is TF32: test_products.py checks both).
os.environ.setdefault("MLX_ENABLE_TF32", "0")

import tessera.core as mx  # noqa: E402

# The same generated examples on every run, and no example database in the tree.
settings.register_profile("tessera", database=None, derandomize=True)
settings.load_profile("tessera")


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# The devices present: the CPU, and the GPU where one is.
DEVICES = [mx.cpu] + ([mx.gpu] if mx.is_available(mx.gpu) else [])


@pytest.fixture(params=DEVICES, ids=lambda d: "gpu" if d == mx.gpu else "cpu")
def device(request):
    """Each device present in turn, the default device while the test runs."""
    with mx.stream(request.param):
        yield request.param
