"""hypot and the array API's names of elementwise functions, against NumPy."""
import numpy as np
import pytest

import tessera.core as mx

# Every test on each device present (conftest's device fixture).
pytestmark = pytest.mark.usefixtures("device")


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16])
def test_hypot_matches_numpy(dtype, rng):
    a = rng.normal(size=(4, 7)).astype(np.float32) * 3
    b = rng.normal(size=(7,)).astype(np.float32) * 3
    got = mx.hypot(mx.array(a).astype(dtype), mx.array(b).astype(dtype))
    assert got.dtype == dtype and got.shape == (4, 7)
    want = np.hypot(np.array(mx.array(a).astype(dtype).astype(mx.float32)),
                    np.array(mx.array(b).astype(dtype).astype(mx.float32)))
    tol = 1e-6 if dtype == mx.float32 else 1e-2
    np.testing.assert_allclose(np.array(got.astype(mx.float32)), want, rtol=tol, atol=tol)


def test_hypot_of_integers_is_float32_and_keeps_large_values():
    got = mx.hypot(mx.array([3, 5, 0]), mx.array([4, 12, 0]))
    assert got.dtype == mx.float32
    np.testing.assert_array_equal(np.array(got), [5.0, 13.0, 0.0])
    big = mx.hypot(mx.array(3e30, mx.float32), mx.array(4e30, mx.float32))
    assert np.isclose(big.item(), 5e30, rtol=1e-6)  # no overflow of a*a + b*b


def test_hypot_rejects_complex():
    with pytest.raises(ValueError, match="hypot"):
        mx.hypot(mx.array([1 + 1j]), mx.array([1.0]))


def test_hypot_gradient_is_a_over_hypot_and_b_over_hypot(rng):
    a = rng.normal(size=(5,)).astype(np.float32)
    b = rng.normal(size=(5,)).astype(np.float32)
    da, db = mx.grad(lambda x, y: mx.sum(mx.hypot(x, y)), argnums=(0, 1))(mx.array(a), mx.array(b))
    h = np.hypot(a, b)
    np.testing.assert_allclose(np.array(da), a / h, rtol=1e-5)
    np.testing.assert_allclose(np.array(db), b / h, rtol=1e-5)
    # At the origin, where hypot has no derivative, the gradient is zero, not NaN.
    z = mx.grad(lambda x: mx.hypot(x, mx.array(0.0)))(mx.array(0.0))
    assert z.item() == 0.0


def test_hypot_vmap_matches_a_loop(rng):
    a = mx.array(rng.normal(size=(3, 4)).astype(np.float32))
    b = mx.array(rng.normal(size=(4, 3)).astype(np.float32))
    got = mx.vmap(mx.hypot, in_axes=(0, 1))(a, b)
    want = mx.stack([mx.hypot(a[i], b[:, i]) for i in range(3)])
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-6)


@pytest.mark.parametrize("alias, name", [
    ("acos", "arccos"), ("acosh", "arccosh"), ("asin", "arcsin"), ("asinh", "arcsinh"),
    ("atan", "arctan"), ("atanh", "arctanh"), ("atan2", "arctan2"), ("pow", "power"),
    ("bitwise_left_shift", "left_shift"), ("bitwise_right_shift", "right_shift"),
])
def test_array_api_names_are_the_same_functions(alias, name):
    assert getattr(mx, alias) is getattr(mx, name)


def test_array_api_names_compute_numpy_values(rng):
    x = rng.uniform(-0.9, 0.9, size=(6,)).astype(np.float32)
    np.testing.assert_allclose(np.array(mx.acos(mx.array(x))), np.arccos(x), rtol=1e-5)
    np.testing.assert_allclose(np.array(mx.atanh(mx.array(x))), np.arctanh(x), rtol=1e-5)
    np.testing.assert_array_equal(np.array(mx.bitwise_left_shift(mx.array([1, 2]), 3)), [8, 16])
