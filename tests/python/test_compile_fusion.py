"""compile's fusion of elementwise chains, on every device: compiled equals
uncompiled for the unary and binary ops on several dtypes (bit for bit on the
CPU; within a few ulps on the GPU, whose generated kernel may contract a
multiply and an add), broadcast, transposed and sliced inputs, scalar
constants, casts and where, what is fused (mx._graph_primitives), and
gradients through a fused function against NumPy and the uncompiled one."""
import numpy as np
import pytest

import tessera.core as mx

UNARY = ["abs", "negative", "sign", "square", "exp", "expm1", "sqrt", "rsqrt", "sin", "cos",
         "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
         "arctanh", "degrees", "radians", "log", "log2", "log10", "log1p", "sigmoid", "erf",
         "erfinv", "floor", "ceil", "reciprocal", "isnan", "isinf", "isfinite", "logical_not",
         "bitwise_invert", "round", "nan_to_num"]
BINARY = ["add", "subtract", "multiply", "divide", "floor_divide", "remainder", "power",
          "maximum", "minimum", "logaddexp", "arctan2", "hypot", "equal", "not_equal", "greater",
          "greater_equal", "less", "less_equal", "logical_and", "logical_or", "logical_xor",
          "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
          "isclose"]
DTYPES = [mx.float32, mx.float16, mx.bfloat16, mx.float64, mx.int32, mx.uint8, mx.bool_]


@pytest.fixture(autouse=True)
def compile_enabled():
    mx.enable_compile()
    yield
    mx.enable_compile()


def fused_nodes(outputs):
    return [p for p in mx._graph_primitives(outputs) if p.startswith("Compiled(")]


def values(rng, shape, dtype):
    if dtype == mx.bool_:
        return mx.array(rng.random(shape) > 0.5)
    if dtype in (mx.int32, mx.uint8):
        return mx.array(rng.integers(1, 7, shape).astype(np.int32)).astype(dtype)
    return mx.array(rng.uniform(0.1, 0.9, shape).astype(np.float32)).astype(dtype)


def expect_same(got, want, device):
    assert got.dtype == want.dtype and got.shape == want.shape
    g = np.array(got.astype(mx.float64) if got.dtype in (mx.float16, mx.bfloat16) else got)
    w = np.array(want.astype(mx.float64) if want.dtype in (mx.float16, mx.bfloat16) else want)
    if device == mx.cpu or g.dtype.kind in "biu":
        np.testing.assert_array_equal(g, w)
    else:
        # The GPU's fused kernel contracts multiply-adds the unfused kernels
        # round twice: a few ulps of 1 apart near zero.
        np.testing.assert_allclose(g, w, rtol=2e-6 if got.dtype != mx.float16 else 1e-3,
                                   atol=1e-6)


def checked(fun, args):
    """fun(*args) evaluated, or None where the op rejects the dtype."""
    try:
        out = fun(*args)
        mx.eval(out)
        return out
    except (ValueError, TypeError):
        return None


@pytest.mark.parametrize("name", UNARY + BINARY)
def test_each_op_compiled_equals_uncompiled(name, device, rng):
    op = getattr(mx, name)
    arity = 1 if name in UNARY else 2

    def f(*x):
        y = [mx.maximum(v, v) for v in x]  # fused identities around the op
        r = op(*y)
        return mx.maximum(r, r)

    cf = mx.compile(f)
    tried = 0
    for dtype in DTYPES:
        args = [values(rng, (33, 65), dtype) for _ in range(arity)]
        want = checked(f, args)
        if want is None:
            continue
        tried += 1
        got = cf(*args)
        assert len(fused_nodes([got])) == 1, (name, dtype)
        expect_same(got, want, device)
    assert tried > 0


def test_gelu_is_one_node_and_matches_numpy(device, rng):
    def gelu(x):
        return 0.5 * x * (1 + mx.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))

    x = mx.array(rng.standard_normal((128, 257)).astype(np.float32))
    cg = mx.compile(gelu)
    mx.eval(cg(x))  # evaluates the traced constants
    out = cg(x)
    assert mx._graph_primitives([out]) == fused_nodes([out]) and len(fused_nodes([out])) == 1
    xn = np.array(x).astype(np.float64)
    want = 0.5 * xn * (1 + np.tanh(0.7978845608 * (xn + 0.044715 * xn ** 3)))
    np.testing.assert_allclose(np.array(out), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16])
def test_large_output_equals_uncompiled(dtype, device, rng):
    # 8 MiB and more: the CPU writes the output around the cache; an odd size
    # leaves a partial last block and a tail shorter than one store.
    n = (8 << 20) // dtype.size + 7

    def f(x, b):
        return mx.tanh(x * 1.5 + b) * x

    x = mx.array(rng.standard_normal(n).astype(np.float32)).astype(dtype)
    b = mx.array(rng.standard_normal((n,)).astype(np.float32))[::-1].astype(dtype)
    out = mx.compile(f)(x, b)
    assert len(fused_nodes([out])) == 1
    expect_same(out, f(x, b), device)
    xn = np.array(x.astype(mx.float32)).astype(np.float64)
    bn = np.array(b.astype(mx.float32)).astype(np.float64)
    np.testing.assert_allclose(np.array(out.astype(mx.float32)), np.tanh(xn * 1.5 + bn) * xn,
                               rtol=2e-3 if dtype == mx.float16 else 1e-5,
                               atol=1e-2 if dtype == mx.float16 else 1e-5)


def test_broadcast_transposed_and_sliced_inputs(device, rng):
    def f(a, b, c, d):
        return mx.sqrt(mx.abs(a * b - c)) + d * 2.0

    a = rng.standard_normal((5, 1, 7)).astype(np.float32)
    b = rng.standard_normal((3, 1)).astype(np.float32)
    c = rng.standard_normal((7, 3, 5)).astype(np.float32)
    d = rng.standard_normal((5, 3, 14)).astype(np.float32)
    args = [mx.array(a), mx.array(b), mx.array(c).transpose(), mx.array(d)[:, :, ::2]]
    out = mx.compile(f)(*args)
    assert len(fused_nodes([out])) == 1
    want = np.sqrt(np.abs(a * b - c.T)) + d[:, :, ::2] * 2.0
    np.testing.assert_allclose(np.array(out), want, rtol=1e-6, atol=1e-6)
    expect_same(out, f(*args), device)


def test_casts_where_and_scalars(device):
    def f(i, m):
        y = i.astype(mx.float32) * 0.25 + m.astype(mx.float32)
        return mx.where(y > 1.0, y, y * y).astype(mx.float16)

    i = mx.array([[-4, 3, 9], [12, 0, 7]], dtype=mx.int32)
    m = mx.array([[True, False, True], [True, False, False]])
    out = mx.compile(f)(i, m)
    assert len(fused_nodes([out])) == 1 and out.dtype == mx.float16
    y = np.array(i, dtype=np.float32) * 0.25 + np.array(m, dtype=np.float32)
    want = np.where(y > 1, y, y * y).astype(np.float16)
    np.testing.assert_array_equal(np.array(out.astype(mx.float32)), want.astype(np.float32))


def test_grad_through_a_fused_function(device, rng):
    def loss(x, w):
        h = x * w + 0.5
        return mx.sum(mx.tanh(h) * mx.sigmoid(h) - 0.1 * h * h)

    x = mx.array(rng.standard_normal((16, 9)))  # float64: checked against finite differences
    w = mx.array(rng.standard_normal((9,)))
    g = mx.grad(mx.compile(loss), argnums=(0, 1))(x, w)
    want = mx.grad(loss, argnums=(0, 1))(x, w)
    for a, b in zip(g, want):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-12, atol=1e-12)
    # d/dx by central differences on one element.
    xn, wn, eps = np.array(x), np.array(w), 1e-6

    def np_loss(xv):
        h = xv * wn + 0.5
        return np.sum(np.tanh(h) / (1 + np.exp(-h)) - 0.1 * h * h)

    e = np.zeros_like(xn)
    e[3, 4] = eps
    fd = (np_loss(xn + e) - np_loss(xn - e)) / (2 * eps)
    assert abs(np.array(g[0])[3, 4] - fd) < 1e-6


def optimizer_step(opt_name, shapes, rng):
    """An optimizer's update of parameters of `shapes` over three steps, compiled
    (as MLX's examples compile it) and not: (params, state, primitives of the last
    compiled step) of each."""
    import tessera.optimizers as optim
    from tessera.utils import tree_flatten

    def make():
        kw = dict(momentum=0.9) if opt_name == "SGD" else {}
        return getattr(optim, opt_name)(learning_rate=0.01, **kw)

    params = {k: mx.array(rng.standard_normal(s).astype(np.float32)) for k, s in shapes.items()}
    grads = [{k: mx.array(rng.standard_normal(s).astype(np.float32)) for k, s in shapes.items()}
             for _ in range(3)]

    def run(compiled):
        opt, p = make(), dict(params)
        opt.init(p)
        state = [opt.state]
        update = lambda p, g: opt.apply_gradients(g, p)
        if compiled:
            update = mx.compile(update, inputs=state, outputs=state)
        for g in grads:  # the first call traces; the others replay with the step count moving
            new = update(p, g)
            outputs = [v for _, v in tree_flatten(new)]
            outputs += [v for _, v in tree_flatten(opt.state) if isinstance(v, mx.array)]
            names = mx._graph_primitives(outputs)
            mx.eval(outputs)
            p = new
        return p, opt.state, names

    return run(True), run(False)


def expect_same_step(got, want, device):
    from tessera.utils import tree_flatten
    for (_, a), (_, b) in zip(tree_flatten(got[:2]), tree_flatten(want[:2])):
        if isinstance(a, mx.array):
            expect_same(a, b, device)


@pytest.mark.parametrize("opt_name", ["Adam", "AdamW", "SGD", "Lion"])
def test_a_compiled_optimizer_step_is_one_node_per_parameter(opt_name, device, rng):
    # The new parameter and the new moments are outputs of the compiled
    # function, read by nothing else: one pass each parameter writes them all.
    shapes = {"w0": (64, 33), "w1": (33,), "w2": (7, 5, 3)}
    got, want = optimizer_step(opt_name, shapes, rng)
    fused = [n for n in got[2] if n.startswith("Compiled(")]
    assert len(fused) == len(shapes) + (opt_name == "AdamW"), got[2]
    expect_same_step(got, want, device)


@pytest.mark.parametrize("opt_name", ["Adam", "SGD", "Lion"])
def test_parameters_of_one_shape_share_fused_nodes(opt_name, device, rng):
    # Updates of parameters of one shape read the same step size: they join
    # one node, up to 24 inputs and outputs a node.
    shapes = {f"w{i}": (16, 24) for i in range(6)}
    got, want = optimizer_step(opt_name, shapes, rng)
    fused = [n for n in got[2] if n.startswith("Compiled(")]
    assert len(fused) <= 3, got[2]
    assert sum(n.count("Multiply") for n in fused) >= 6
    expect_same_step(got, want, device)


def test_fused_outputs_of_a_function(device, rng):
    def f(x, y):
        e = mx.exp(x)
        z = e * y + 1.0
        return z, e, mx.abs(z)

    x = mx.array(rng.standard_normal((40, 17)).astype(np.float32))
    y = mx.array(rng.standard_normal((17,)).astype(np.float32))
    cf = mx.compile(f)
    mx.eval(cf(x, y))
    got = cf(x, y)
    assert len(fused_nodes(list(got))) == 1
    assert mx._graph_primitives(list(got)) == fused_nodes(list(got))
    for a, b in zip(got, f(x, y)):
        expect_same(a, b, device)
    e = np.exp(np.array(x))
    np.testing.assert_allclose(np.array(got[1]), e, rtol=1e-6)
    np.testing.assert_allclose(np.array(got[2]), np.abs(e * np.array(y) + 1), rtol=1e-5, atol=1e-6)
