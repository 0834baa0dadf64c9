"""Transforms over pytrees: grad against central finite differences (float64),
argnums / argnames, value_and_grad with aux outputs, vjp / jvp, vmap against a
loop, checkpoint and custom_function."""
import numpy as np
import pytest

import tessera.core as mx

# Every test on each device present (conftest's device fixture).
pytestmark = pytest.mark.usefixtures("device")


def finite_diff(f, x, eps=1e-6):
    """Central differences of a scalar f of a float64 NumPy array."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


def loss(params, x):
    h = mx.tanh(x @ params["w"] + params["b"])
    return mx.sum(h * h) + mx.sum(mx.exp(params["extra"][0]) * params["extra"][1])


def test_grad_matches_finite_differences_over_a_dict(rng):
    x = mx.array(rng.standard_normal((4, 3)))
    params = {
        "w": mx.array(rng.standard_normal((3, 2))),
        "b": mx.array(rng.standard_normal(2)),
        "extra": [mx.array(rng.standard_normal(2) * 0.1), mx.array(rng.standard_normal(2))],
    }
    assert params["w"].dtype == mx.float64
    g = mx.grad(loss)(params, x)
    assert set(g) == {"w", "b", "extra"} and isinstance(g["extra"], list)
    for key in ("w", "b"):
        def f(v, key=key):
            p = dict(params)
            p[key] = mx.array(v)
            return loss(p, x).item()
        np.testing.assert_allclose(np.array(g[key]), finite_diff(f, np.array(params[key])), rtol=1e-6, atol=1e-8)
    def f0(v):
        p = dict(params)
        p["extra"] = [mx.array(v), params["extra"][1]]
        return loss(p, x).item()
    np.testing.assert_allclose(np.array(g["extra"][0]), finite_diff(f0, np.array(params["extra"][0])), rtol=1e-6, atol=1e-8)
    assert g["w"].shape == (3, 2) and g["w"].dtype == mx.float64


def test_argnums_and_argnames():
    def f(a, b, c=None, *, k):
        return mx.sum(a * b * k) + (0 if c is None else mx.sum(c))

    a, b, k = mx.array([1.0, 2.0]), mx.array([3.0, 4.0]), mx.array(2.0)
    ga = mx.grad(f)(a, b, k=k)
    assert ga.tolist() == [6, 8]
    ga, gb = mx.grad(f, argnums=(1, 0))(a, b, k=k)  # ascending order
    assert ga.tolist() == [6, 8] and gb.tolist() == [2, 4]
    pos, named = mx.grad(f, argnames="k")(a, b, k=k)
    assert pos is None and named["k"].item() == 1 * 3 + 2 * 4
    pos, named = mx.grad(f, argnums=[0], argnames=["k"])(a, b, k=k)
    assert pos[0].tolist() == [6, 8] and named["k"].item() == 11
    with pytest.raises(ValueError):
        mx.grad(f, argnums=5)(a, b, k=k)
    with pytest.raises(ValueError):
        mx.grad(f, argnums=-1)
    with pytest.raises(ValueError):
        mx.grad(f, argnums=[0, 0])
    with pytest.raises(ValueError):
        mx.grad(f, argnames="missing")(a, b, k=k)
    with pytest.raises(ValueError):
        mx.grad(lambda x: x * 2)(a)  # not a scalar
    with pytest.raises(ValueError):
        mx.grad(lambda x: mx.sum(x))("not an array")


def test_value_and_grad_with_aux_outputs():
    def f(x, y):
        s = mx.sum(x * x)
        return s, {"aux": y * 2}

    x, y = mx.array([1.0, 2.0, 3.0]), mx.array([5.0])
    (value, aux), g = mx.value_and_grad(f)(x, y)
    assert value.item() == 14 and aux["aux"].tolist() == [10] and g.tolist() == [2, 4, 6]
    v, (gx, gy) = mx.value_and_grad(lambda a, b: mx.sum(a * b), argnums=[0, 1])(x, mx.array([1.0, 1.0, 2.0]))
    assert v.item() == 9 and gx.tolist() == [1, 1, 2] and gy.tolist() == [1, 2, 3]


def test_grad_of_grad_and_tuple_inputs():
    f = lambda x: mx.sum(x ** 3)
    x = mx.array([1.0, 2.0])
    assert mx.grad(lambda z: mx.sum(mx.grad(f)(z)))(x).tolist() == [6, 12]
    g = mx.grad(lambda t: mx.sum(t[0] * t[1]))((mx.array([2.0]), mx.array([3.0])))
    assert isinstance(g, tuple) and g[0].tolist() == [3] and g[1].tolist() == [2]


def test_vjp_and_jvp(rng):
    x = rng.standard_normal((3,))
    f = lambda a, b: [mx.sin(a) * b, a + b]
    a, b = mx.array(x), mx.array(2 * x)
    outs, vjps = mx.vjp(f, [a, b], [mx.ones(3), mx.ones(3)])
    np.testing.assert_allclose(np.array(outs[0]), np.sin(x) * 2 * x)
    np.testing.assert_allclose(np.array(vjps[0]), np.cos(x) * 2 * x + 1, rtol=1e-12)
    np.testing.assert_allclose(np.array(vjps[1]), np.sin(x) + 1, rtol=1e-12)
    outs, jvps = mx.jvp(lambda a: mx.exp(a), [a], [mx.ones(3)])
    np.testing.assert_allclose(np.array(jvps[0]), np.exp(x), rtol=1e-12)
    with pytest.raises(ValueError):
        mx.vjp(f, [a, 1.0], [mx.ones(3)])


def test_vmap_matches_a_loop(rng):
    x = rng.standard_normal((5, 3)).astype(np.float32)
    y = rng.standard_normal((3, 5)).astype(np.float32)
    f = lambda a, b: mx.sum(mx.exp(a) * b)
    got = mx.vmap(f, in_axes=(0, 1))(mx.array(x), mx.array(y))
    ref = [f(mx.array(x[i]), mx.array(y[:, i])).item() for i in range(5)]
    np.testing.assert_allclose(np.array(got), ref, rtol=1e-5)
    # A dict input, an unmapped input and a tree output with out_axes.
    def g(d, w):
        return {"s": d["a"] * w, "t": (d["b"].sum(),)}

    d = {"a": mx.array(x), "b": mx.array(y.T)}
    w = mx.array([1.0, 2.0, 3.0])
    out = mx.vmap(g, in_axes=({"a": 0, "b": 0}, None), out_axes={"s": 1, "t": (0,)})(d, w)
    assert out["s"].shape == (3, 5)
    np.testing.assert_allclose(np.array(out["s"]), (x * np.array([1, 2, 3])).T, rtol=1e-6)
    np.testing.assert_allclose(np.array(out["t"][0]), y.T.sum(axis=1), rtol=1e-5)
    # vmap of grad against a loop of grads.
    h = lambda v: mx.sum(mx.sin(v) * v)
    vg = mx.vmap(mx.grad(h))(mx.array(x))
    for i in range(5):
        np.testing.assert_allclose(np.array(vg[i]), np.array(mx.grad(h)(mx.array(x[i]))), rtol=1e-6)
    with pytest.raises(ValueError):
        mx.vmap(f, in_axes=(None, None))(mx.array(x), mx.array(y))
    with pytest.raises(IndexError, match=r"\[vmap\] in_axes 3"):
        mx.vmap(f, in_axes=(3, 0))(mx.array(x), mx.array(y))


def test_checkpoint_gives_the_same_gradient(rng):
    x = mx.array(rng.standard_normal(4))
    f = lambda t, scale: mx.sum(mx.tanh(t["v"]) * scale)
    ck = mx.checkpoint(f)
    g1 = mx.grad(lambda v: f({"v": v}, 3.0))(x)
    g2 = mx.grad(lambda v: ck({"v": v}, 3.0))(x)
    np.testing.assert_allclose(np.array(g1), np.array(g2), rtol=1e-12)
    np.testing.assert_allclose(np.array(g1), 3 * (1 - np.tanh(np.array(x)) ** 2), rtol=1e-12)


def test_custom_function_rules():
    @mx.custom_function
    def f(x, y):
        return mx.exp(x) * y

    @f.vjp
    def f_vjp(primals, cotangent, output):
        x, y = primals
        return (cotangent * 100, cotangent * 200)

    x, y = mx.array([0.0, 1.0]), mx.array([2.0, 3.0])
    np.testing.assert_allclose(np.array(f(x, y)), np.exp([0.0, 1.0]) * [2, 3], rtol=1e-6)
    gx, gy = mx.grad(lambda a, b: mx.sum(f(a, b)), argnums=(0, 1))(x, y)
    assert gx.tolist() == [100, 100] and gy.tolist() == [200, 200]

    @mx.custom_function
    def g(x):
        return mx.sin(x)

    @g.jvp
    def g_jvp(primals, tangents):
        return tangents * 7

    _, t = mx.jvp(g, [mx.array([1.0])], [mx.array([1.0])])
    assert t[0].tolist() == [7]

    @mx.custom_function
    def h(x):
        return x * 2

    @h.vmap
    def h_vmap(inputs, axes):
        return inputs * 3, axes

    assert mx.vmap(h)(mx.array([1.0, 2.0])).tolist() == [3, 6]
    # Without rules it differentiates the function itself.
    plain = mx.custom_function(lambda x: mx.sum(x * x))
    assert mx.grad(plain)(mx.array([1.0, 2.0])).tolist() == [2, 4]


def test_depends_passes_inputs_through_after_their_dependencies():
    x = mx.array([1.0, 2.0])
    later = mx.exp(mx.array([0.0, 1.0]))
    y = mx.depends(x, later)
    assert isinstance(y, mx.array)
    assert y.tolist() == [1.0, 2.0]
    a, b = mx.depends([x, x * 2], [later, x])
    assert a.tolist() == [1.0, 2.0] and b.tolist() == [2.0, 4.0]
    g = mx.grad(lambda v: mx.sum(mx.depends(v, later) ** 2))(x)
    assert g.tolist() == [2.0, 4.0]
    with pytest.raises(TypeError, match=r"\[depends\]"):
        mx.depends(x, 3)


def test_transforms_leave_no_reference_cycles():
    """A call of a transformed function frees its arrays when they go out of
    scope: nothing it creates waits for Python's cycle collector."""
    import gc

    import tessera.utils as tu

    x = mx.arange(1000, dtype=mx.float32)
    tree = {"a": [x, (x, 2)], "b": x}
    calls = [
        mx.compile(lambda x: x * x + x),
        mx.compile(lambda t: {"y": t["a"][0] * 2.0}),
        mx.grad(lambda x: (x * x).sum()),
        mx.value_and_grad(lambda t: (t["b"] * t["a"][0]).sum()),  # arrays only
        mx.vmap(lambda x: x * 2.0),
        mx.jvp,
        lambda t: tu.tree_flatten(t),
        lambda t: tu.tree_map(lambda v: v + 1 if isinstance(v, mx.array) else v, t),
    ]
    arrays = {"a": [x, x], "b": x}
    args = [(x,), (tree,), (x,), (arrays,), (x,), (lambda x: x * 3.0, [x], [x]), (tree,), (tree,)]

    def run(f, a):
        out = f(*a)
        mx.eval([v for _, v in tu.tree_flatten(out) if isinstance(v, mx.array)])

    for f, a in zip(calls, args):  # the first calls trace and fill caches
        run(f, a)
    gc.collect()
    gc.disable()
    try:
        for k, (f, a) in enumerate(zip(calls, args)):
            run(f, a)
            assert gc.collect() == 0, f"call {k} left cyclic garbage"
    finally:
        gc.enable()
