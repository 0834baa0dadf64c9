"""vecdot, diff, gather_mm, segmented_mm, block_masked_mm and hadamard_transform
against NumPy, on random inputs and views."""
import numpy as np
import pytest

import tessera.core as mx


def close(got, ref, rtol=1e-4, atol=1e-4):
    got = np.array(got)
    assert got.shape == np.shape(ref)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)


@pytest.mark.parametrize("shapes,axis", [(((3, 4), (4,)), -1), (((2, 1, 5), (3, 5)), -1),
                                         (((4, 3), (4, 1)), 0)])
def test_vecdot_matches_numpy(shapes, axis, rng, device):
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    close(mx.vecdot(mx.array(a), mx.array(b), axis=axis), np.sum(a * b, axis=axis))


def test_vecdot_conjugates_the_first_complex_operand(rng, device):
    a = (rng.standard_normal(4) + 1j * rng.standard_normal(4)).astype(np.complex64)
    b = (rng.standard_normal(4) + 1j * rng.standard_normal(4)).astype(np.complex64)
    close(mx.vecdot(mx.array(a), mx.array(b)), np.vdot(a, b))


def test_vecdot_refuses_scalars_as_mlx_does(device):
    with pytest.raises(ValueError, match=r"\[vecdot\] inputs must have at least 1 dimension, "
                       r"got shapes \(\) and \(3,\)"):
        mx.vecdot(mx.array(2.0), mx.ones((3,)))


@pytest.mark.parametrize("n,axis", [(1, -1), (2, -1), (3, 0), (0, 1), (9, -1)])
def test_diff_matches_numpy(n, axis, rng, device):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    close(mx.diff(mx.array(x), n, axis), np.diff(x, n, axis))
    view = mx.array(x)[::2, ::-1]
    close(mx.diff(view, n=n, axis=axis), np.diff(x[::2, ::-1], n, axis))


def test_diff_of_integers_and_booleans_matches_numpy(device):
    i = np.array([3, 1, 4, 1, 5, 9], np.int16)
    got = mx.diff(mx.array(i), 2)
    assert got.dtype == mx.int16
    np.testing.assert_array_equal(np.array(got), np.diff(i, 2))
    b = np.array([True, False, False, True])
    got = mx.diff(mx.array(b))
    assert got.dtype == mx.bool_
    np.testing.assert_array_equal(np.array(got), np.diff(b))


def test_gather_mm_matches_take_then_matmul(rng, device):
    a = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    b = rng.standard_normal((6, 5, 2)).astype(np.float32)
    li, ri = np.array([[5, 0], [2, 2]]), np.array([1, 4])
    got = mx.gather_mm(mx.array(a), mx.array(b), mx.array(li), mx.array(ri), sorted_indices=False)
    want = a.reshape(6, 4, 5)[li] @ b[ri]
    close(got, want)
    close(mx.gather_mm(mx.array(a), mx.array(b), rhs_indices=mx.array(np.arange(6).reshape(2, 3))),
          a @ b.reshape(2, 3, 5, 2))


def test_segmented_mm_matches_a_loop(rng, device):
    a = rng.standard_normal((3, 10)).astype(np.float32)
    b = rng.standard_normal((10, 4)).astype(np.float32)
    seg = np.array([[0, 4], [4, 10], [3, 3], [1, 9]])
    got = mx.segmented_mm(mx.array(a), mx.array(b), mx.array(seg))
    want = np.stack([a[:, s:e] @ b[s:e] for s, e in seg])
    close(got, want)


@pytest.mark.parametrize("bs", [32, 64])
def test_block_masked_mm_matches_masked_numpy(bs, rng, device):
    M, K, N = 70, 100, 40
    a = rng.standard_normal((2, M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    t = lambda n: -(-n // bs)
    ml = rng.random((2, t(M), t(K))) > 0.3
    mr = rng.random((t(K), t(N))) > 0.3
    mo = rng.random((2, t(M), t(N))) > 0.3
    expand = lambda m, r, c: np.repeat(np.repeat(m, bs, -2), bs, -1)[..., :r, :c]
    want = ((a * expand(ml, M, K)) @ (b * expand(mr, K, N))) * expand(mo, M, N)
    got = mx.block_masked_mm(mx.array(a), mx.array(b), bs, mx.array(mo), mx.array(ml),
                             mx.array(mr))
    close(got, want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("n", [1, 4, 16, 128])
def test_hadamard_transform_matches_sylvesters_matrix(n, rng, device):
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    x = rng.standard_normal((3, n)).astype(np.float32)
    close(mx.hadamard_transform(mx.array(x)), x @ h.T / np.sqrt(n))
    close(mx.hadamard_transform(mx.array(x), scale=0.25), x @ h.T * 0.25)


# What MLX 0.32.4 gives for lengths m * 2^k with m = 28, 20 (k = 1), 12 (k = 1).
HADAMARD_MLX = {
    (28, 0.5): [-42, -39, -36, -33, -30, -27, -24, -28, -23, -32, -27, -22, -31, -26, -35, -30,
                -25, -34, -43, -38, -33, -63, -72, -67, -62, -57, -52, -61],
    (40, 1.0): [-44, 4, -20, 4, 4, 4, 28, 4, 52, 4, -40, 0, -80, 0, -40, 0, 0, 0, -40, 0, 80, 0,
                120, 0, 80, 0, 40, 0, 80, 0, -408, 8, -400, 8, -392, 8, -384, 8, -376, 8],
}


@pytest.mark.parametrize("n, scale", sorted(HADAMARD_MLX))
def test_hadamard_transform_of_m_times_a_power_of_two_matches_mlx(n, scale, device):
    got = mx.hadamard_transform(mx.arange(float(n)).reshape(1, n), scale=scale)
    close(got, [HADAMARD_MLX[(n, scale)]], rtol=1e-6)


@pytest.mark.parametrize("n", [12, 20, 28, 24, 56, 160])
def test_hadamard_transform_of_m_times_a_power_of_two_is_a_hadamard_matrix(n, device):
    h = np.array(mx.hadamard_transform(mx.eye(n), scale=1.0))
    assert set(np.unique(h).tolist()) == {-1.0, 1.0}
    np.testing.assert_array_equal(h @ h.T, n * np.eye(n))
    x = np.random.default_rng(n).standard_normal((2, n)).astype(np.float32)
    close(mx.hadamard_transform(mx.array(x)), x @ h / np.sqrt(n), rtol=1e-4, atol=1e-5)
    g = mx.grad(lambda a: (mx.hadamard_transform(a) * mx.arange(n)).sum())(mx.array(x))
    close(g, np.broadcast_to(h @ np.arange(n) / np.sqrt(n), x.shape), rtol=1e-4, atol=1e-4)


def test_bad_input_is_refused_with_the_op_name(device):
    with pytest.raises(ValueError, match=r"\[hadamard_transform\].*36"):
        mx.hadamard_transform(mx.zeros((2, 36)))
    with pytest.raises(ValueError, match=r"\[block_masked_mm\] block_size"):
        mx.block_masked_mm(mx.zeros((4, 4)), mx.zeros((4, 4)), 16)
    with pytest.raises(ValueError, match=r"\[gather_mm\] lhs_indices"):
        mx.gather_mm(mx.zeros((2, 3, 3)), mx.zeros((3, 3)), mx.array([0.5]))
    with pytest.raises(ValueError, match=r"\[segmented_mm\] segments"):
        mx.segmented_mm(mx.zeros((2, 3)), mx.zeros((3, 2)), mx.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"\[diff\]"):
        mx.diff(mx.zeros((2, 3)), -1)
    with pytest.raises(TypeError):
        mx.vecdot(a=mx.zeros(3), b=mx.zeros(3))  # positional-only


# x @ W.T with few rows of x, as decoding does through nn.Linear: on the GPU
# the matrix-vector kernel (Note [Dense GEMV]) where K and the strides are
# whole 16-byte chunks, cuBLASLt elsewhere; against float64 NumPy on the same
# rounded inputs.
@pytest.mark.parametrize("dtype,tol", [(mx.float32, 1e-5), (mx.float16, 2e-3),
                                       (mx.bfloat16, 1e-2)])
@pytest.mark.parametrize("lead,n,k", [((1,), 130, 256), ((3,), 5, 24), ((8,), 1000, 64),
                                      ((9,), 33, 16), ((2, 1), 17, 40), ((2, 4), 7, 8),
                                      ((1, 1), 64, 12), ((5,), 3, 1032), ((4,), 96, 520)])
def test_matmul_of_few_rows_with_transposed_weights_matches_numpy(dtype, tol, lead, n, k, rng,
                                                                  device):
    x = mx.array(rng.standard_normal(lead + (k,)).astype(np.float32)).astype(dtype)
    w = mx.array(rng.standard_normal((n, k)).astype(np.float32)).astype(dtype)
    got = x @ w.T
    assert got.dtype == dtype and got.shape == lead + (n,)
    xf = np.array(x.astype(mx.float32), np.float64)
    wf = np.array(w.astype(mx.float32), np.float64)
    want = xf @ wf.T
    scale = np.sqrt(k)  # the typical size of a sum of k unit products
    np.testing.assert_allclose(np.array(got.astype(mx.float32)), want, rtol=tol, atol=tol * scale)


def test_matmul_of_few_rows_reads_strided_rows_and_per_batch_weights(rng, device):
    x = rng.standard_normal((4, 2, 48)).astype(np.float32)
    w = rng.standard_normal((4, 24, 32)).astype(np.float32)
    # Rows of x at a stride of 48 values, 32 of them used; one weight matrix per batch element.
    got = mx.array(x)[..., :32] @ mx.swapaxes(mx.array(w), -1, -2)
    np.testing.assert_allclose(np.array(got), x[..., :32] @ np.swapaxes(w, -1, -2), rtol=1e-5,
                               atol=1e-5)
    # One weight matrix for every batch element, x broadcast over a middle axis.
    shared = rng.standard_normal((24, 32)).astype(np.float32)
    xb = mx.broadcast_to(mx.array(x[:1, :1, :32]), (2, 3, 1, 32))
    got = xb @ mx.array(shared).T
    want = np.broadcast_to(x[:1, :1, :32], (2, 3, 1, 32)) @ shared.T
    np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-5)


_TF32_PROBE = """
import sys
import numpy as np
import tessera.core as mx
rng = np.random.default_rng(0)
a = rng.standard_normal((64, 4096)).astype(np.float32)
b = rng.standard_normal((4096, 64)).astype(np.float32)
want = a.astype(np.float64) @ b.astype(np.float64)
for d in [mx.cpu] + ([mx.gpu] if mx.is_available(mx.gpu) else []):
    got = np.array(mx.matmul(mx.array(a), mx.array(b), stream=d), np.float64)
    print("gpu" if d == mx.gpu else "cpu", np.linalg.norm(got - want) / np.linalg.norm(want))
"""


@pytest.mark.parametrize("setting", [None, "1", "0"])
def test_float32_products_use_tf32_on_the_gpu_unless_mlx_enable_tf32_is_0(setting):
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    env.pop("MLX_ENABLE_TF32", None)
    if setting is not None:
        env["MLX_ENABLE_TF32"] = setting
    out = subprocess.run([sys.executable, "-c", _TF32_PROBE], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    errors = dict(zip(out[::2], map(float, out[1::2])))
    # float32 sums of 4096 products: about 1e-7 relative; TF32's 10-bit
    # mantissas: about 1e-4. The CPU never uses TF32 (as MLX's CPU).
    assert errors["cpu"] < 1e-6
    if "gpu" in errors:
        if setting == "0":
            assert errors["gpu"] < 1e-6
        else:
            assert 1e-6 < errors["gpu"] < 2e-3


# Products of one x with several weights evaluated together run as one task
# (Note [Grouped products]); on the GPU one launch. Each must equal its own
# product, also where a weight is made in the same graph or depends on
# another member, and under transforms.
@pytest.mark.parametrize("dtype,tol", [(mx.float32, 1e-5), (mx.bfloat16, 1e-2)])
def test_products_of_one_x_evaluated_together_match_numpy(dtype, tol, rng, device):
    x = mx.array(rng.standard_normal((2, 1, 64)).astype(np.float32)).astype(dtype)
    ws = [mx.array(rng.standard_normal((n, 64)).astype(np.float32)).astype(dtype)
          for n in (64, 16, 16, 40, 8)]
    mx.eval(x, *ws)
    h = x * 2  # x unevaluated, as a norm's output is
    made = ws[3] + 1  # a weight computed in the same graph
    outs = [h @ ws[0].T, h @ ws[1].T, h @ ws[2].T, h @ made.T, h @ ws[4].T]
    mx.eval(*outs)
    xf = 2 * np.array(x.astype(mx.float32), np.float64)
    wf = [np.array(w.astype(mx.float32), np.float64) for w in ws]
    wf[3] = np.array((ws[3] + 1).astype(mx.float32), np.float64)
    for got, w in zip(outs, wf):
        np.testing.assert_allclose(np.array(got.astype(mx.float32)), xf @ w.T, rtol=tol,
                                   atol=tol * 8)


def test_products_that_depend_on_each_other_are_not_run_together(rng, device):
    x = mx.array(rng.standard_normal((1, 8)).astype(np.float32))
    w1 = mx.array(rng.standard_normal((8, 8)).astype(np.float32))
    a = x @ w1.T
    b = x @ (w1 + a.T @ x).T  # the second weight needs the first product
    mx.eval(a, b)
    xn, wn = np.array(x), np.array(w1)
    an = xn @ wn.T
    np.testing.assert_allclose(np.array(a), an, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.array(b), xn @ (wn + an.T @ xn).T, rtol=1e-5, atol=1e-4)


def test_gradients_through_products_of_one_x_match_numpy(rng, device):
    x = mx.array(rng.standard_normal((1, 16)).astype(np.float32))
    w1 = mx.array(rng.standard_normal((4, 16)).astype(np.float32))
    w2 = mx.array(rng.standard_normal((3, 16)).astype(np.float32))

    def f(x, w1, w2):
        return (x @ w1.T).sum() + ((x @ w2.T) ** 2).sum()

    gx, g1, g2 = mx.grad(f, argnums=(0, 1, 2))(x, w1, w2)
    xn, w1n, w2n = np.array(x), np.array(w1), np.array(w2)
    y2 = xn @ w2n.T
    np.testing.assert_allclose(np.array(gx), w1n.sum(0, keepdims=True) + 2 * y2 @ w2n,
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.array(g1), np.repeat(xn, 4, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.array(g2), 2 * y2.T @ xn, rtol=1e-4, atol=1e-4)


_GROUP_PROBE = """
import numpy as np
import tessera.core as mx
import tessera.nn as nn
rng = np.random.default_rng(0)
x = mx.array(rng.standard_normal((1, 1, 64)).astype(np.float32))
layers = [nn.Linear(64, n, bias=False) for n in (64, 16, 16)]
quantized = [nn.QuantizedLinear.from_linear(l) for l in layers[:2]]
mx.eval([l.parameters() for l in layers + quantized])
h = nn.RMSNorm(64)(x)
outs = [l(h) for l in layers] + [q(h) for q in quantized]
mx.eval(*outs)
hn = np.array(nn.RMSNorm(64)(x))
for l, y in zip(layers, outs):
    np.testing.assert_allclose(np.array(y), hn @ np.array(l.weight).T, rtol=1e-5, atol=1e-5)
"""


def test_linear_layers_of_one_input_run_as_one_task_per_kind():
    import os
    import subprocess
    import sys

    env = dict(os.environ, TESSERA_HOST_PROFILE="1")
    run = subprocess.run([sys.executable, "-c", _GROUP_PROBE], env=env, capture_output=True,
                         text=True, check=True)
    rows = {line.split()[0]: line.split()[1:] for line in run.stderr.splitlines() if line}
    # One task for q, k and v, one for the two quantized layers; no Matmul of its own.
    assert rows["GroupedProducts"][0] == "2"
    assert "Matmul" not in rows and "QuantizedMatmul" not in rows


def test_a_shared_weight_gets_its_gradient_from_one_product(rng, device):
    # x (..., M, K) @ w (K, N), nn.Linear's product: w stays a matrix in the
    # graph, and its cotangent is one product over every row of x, with no
    # batch of products summed afterwards.
    x = rng.standard_normal((3, 5, 4, 6)).astype(np.float32)
    w = rng.standard_normal((6, 7)).astype(np.float32)
    c = rng.standard_normal((3, 5, 4, 7)).astype(np.float32)
    gx, gw = mx.grad(lambda x, w: (mx.matmul(x, w) * mx.array(c)).sum(), argnums=(0, 1))(
        mx.array(x), mx.array(w))
    close(gw, np.einsum("bmik,bmin->kn", x, c), rtol=1e-4, atol=1e-3)
    close(gx, c @ w.T, rtol=1e-4, atol=1e-3)
    _, vjps = mx.vjp(lambda w: mx.matmul(mx.array(x), w), [mx.array(w)], [mx.array(c)])
    names = mx._graph_primitives(vjps)
    assert names.count("Matmul") == 1 and not any(n.startswith("Reduce") for n in names), names
    # addmm shares its b the same way.
    bias = rng.standard_normal(7).astype(np.float32)
    close(mx.addmm(mx.array(bias), mx.array(x), mx.array(w), alpha=2.0, beta=0.5),
          2.0 * (x @ w) + 0.5 * bias)


def test_vmap_over_a_shared_weight_or_the_batched_operand(rng, device):
    x = rng.standard_normal((3, 4, 6)).astype(np.float32)
    ws = rng.standard_normal((5, 6, 2)).astype(np.float32)
    xs = rng.standard_normal((5, 3, 4, 6)).astype(np.float32)
    w = ws[0]
    close(mx.vmap(lambda w: mx.matmul(mx.array(x), w))(mx.array(ws)),
          np.einsum("bmk,vkn->vbmn", x, ws))
    close(mx.vmap(lambda x: mx.matmul(x, mx.array(w)))(mx.array(xs)), xs @ w)
    close(mx.vmap(mx.matmul)(mx.array(xs), mx.array(ws)), np.einsum("vbmk,vkn->vbmn", xs, ws))
    close(mx.vmap(mx.matmul, in_axes=(1, 0))(mx.array(xs.swapaxes(0, 1)), mx.array(ws)),
          np.einsum("vbmk,vkn->vbmn", xs, ws))
    bias = rng.standard_normal((5, 2)).astype(np.float32)
    close(mx.vmap(lambda c, a, b: mx.addmm(c, a, b))(mx.array(bias), mx.array(xs), mx.array(ws)),
          np.einsum("vbmk,vkn->vbmn", xs, ws) + bias[:, None, None, :])
    close(mx.vmap(lambda b: mx.addmm(mx.array(bias[0]), mx.array(x), b))(mx.array(ws)),
          np.einsum("bmk,vkn->vbmn", x, ws) + bias[0])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("a_shape,n", [((1, 2048), 300), ((1, 1, 7), 5), ((2, 3, 129), 66),
                                       ((4, 1), 3), ((5, 16), 9)])
def test_few_rows_by_a_half_precision_weight_match_float64(dtype, a_shape, n, rng, device):
    # x @ w.T of nn.Linear with 16-bit weights: up to 4 rows in all read the
    # weights once in place (Note [Half-precision GEMV]); 5 rows, a w that is
    # not transposed and a batch of weights take the general product. Each
    # against float64 on the values rounded to the dtype, to the output's
    # rounding.
    dt = getattr(mx, dtype)
    k = a_shape[-1]
    x = mx.array(rng.standard_normal(a_shape).astype(np.float32)).astype(dt)
    w = mx.array(rng.standard_normal((n, k)).astype(np.float32)).astype(dt)
    xs, ws = (np.array(v.astype(mx.float32)).astype(np.float64) for v in (x, w))
    eps = 2.0 ** -8 if dtype == "bfloat16" else 2.0 ** -11
    want = xs @ ws.T
    for got in (x @ w.T, x @ mx.array(np.array(ws.T, np.float32)).astype(dt),
                x @ mx.broadcast_to(w.T, a_shape[:-2] + (k, n)) if len(a_shape) > 2 else x @ w.T):
        assert got.dtype == dt and got.shape == a_shape[:-1] + (n,)
        g = np.array(got.astype(mx.float32)).astype(np.float64)
        # The output's rounding, and float32 sums of k terms.
        bound = eps * np.abs(want) + k * 2.0 ** -22 * (np.abs(xs) @ np.abs(ws).T) + 1e-30
        np.testing.assert_array_less(np.abs(g - want), bound)
    # x read through a stride gives the same values as x itself.
    strided = mx.stack([x, -x], axis=-1).reshape(a_shape[:-1] + (2 * k,))[..., ::2]
    np.testing.assert_array_equal(np.array((strided @ w.T).astype(mx.float32)),
                                  np.array((x @ w.T).astype(mx.float32)))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_addmm_of_few_rows_by_a_half_precision_weight_matches_float64(dtype, rng, device):
    # nn.Linear with a bias: c + x @ w.T, and alpha and beta, through the same
    # products (Note [Half-precision GEMV]).
    dt = getattr(mx, dtype)
    eps = 2.0 ** -8 if dtype == "bfloat16" else 2.0 ** -11
    for rows, k, n in [(1, 300, 70), (3, 33, 5), (7, 16, 9)]:
        x = mx.array(rng.standard_normal((rows, k)).astype(np.float32)).astype(dt)
        w = mx.array(rng.standard_normal((n, k)).astype(np.float32)).astype(dt)
        c = mx.array(rng.standard_normal((n,)).astype(np.float32)).astype(dt)
        xs, ws, cs = (np.array(v.astype(mx.float32)).astype(np.float64) for v in (x, w, c))
        for alpha, beta in [(1.0, 1.0), (0.5, -2.0)]:
            got = mx.addmm(c, x, w.T, alpha=alpha, beta=beta)
            want = alpha * (xs @ ws.T) + beta * cs
            assert got.dtype == dt and got.shape == (rows, n)
            g = np.array(got.astype(mx.float32)).astype(np.float64)
            bound = eps * np.abs(want) + k * 2.0 ** -22 * (np.abs(xs) @ np.abs(ws).T + np.abs(cs))
            np.testing.assert_array_less(np.abs(g - want), bound + 1e-30)
