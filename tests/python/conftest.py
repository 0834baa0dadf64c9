import numpy as np
import pytest
from hypothesis import settings

# The same generated examples on every run, and no example database in the tree.
settings.register_profile("tessera", database=None, derandomize=True)
settings.load_profile("tessera")


@pytest.fixture
def rng():
    return np.random.default_rng(0)
