"""Optimizers against NumPy implementations of their update rules over several
steps, schedules against their formulas, clip_grad_norm, state handling."""

import math

import numpy as np
import pytest

import tessera.core as mx
import tessera.nn as nn
import tessera.optimizers as optim
from tessera.utils import tree_flatten, tree_map, tree_unflatten

# Every test on each device present (conftest's device fixture).
pytestmark = pytest.mark.usefixtures("device")

STEPS = 4
SHAPES = {"w": (3, 4), "b": (4,), "layers": [(2, 5)]}


def make_problem(seed=0):
    rng = np.random.default_rng(seed)
    params = tree_map(lambda s: rng.standard_normal(s), SHAPES,
                      is_leaf=lambda n: isinstance(n, tuple))
    grads = [tree_map(lambda s: rng.standard_normal(s), SHAPES,
                      is_leaf=lambda n: isinstance(n, tuple)) for _ in range(STEPS)]
    return params, grads


def to_mx(tree):
    return tree_map(lambda a: mx.array(np.asarray(a, np.float32)), tree)


def run_tessera(opt, params, grads):
    p = to_mx(params)
    for g in grads:
        p = opt.apply_gradients(to_mx(g), p)
        mx.eval(p, opt.state)
    return tree_map(np.array, p)


def run_numpy(rule, params, grads):
    """rule(p, g, state, t) -> new p, for each leaf; state a dict per leaf."""
    flat_p = dict(tree_flatten(params))
    states = {k: {} for k in flat_p}
    for t, g in enumerate(grads, start=1):
        flat_g = dict(tree_flatten(g))
        for k in flat_p:
            flat_p[k] = rule(flat_p[k].astype(np.float64), flat_g[k].astype(np.float64),
                             states[k], t)
    return tree_unflatten(list(flat_p.items()))


def assert_trees_close(got, want, rtol=2e-5, atol=2e-6):
    for (k1, a), (k2, b) in zip(tree_flatten(got), tree_flatten(want)):
        assert k1 == k2
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=k1)


def sgd_rule(lr, momentum=0.0, weight_decay=0.0, dampening=0.0, nesterov=False):
    def rule(p, g, s, t):
        g = g + weight_decay * p
        if momentum <= 0:
            return p - lr * g
        v = s.get("v", np.zeros_like(p))
        v = momentum * v + (1 - dampening) * g
        s["v"] = v
        u = g + momentum * v if nesterov else v
        return p - lr * u
    return rule


@pytest.mark.parametrize("kw", [
    {},
    {"momentum": 0.9},
    {"momentum": 0.9, "weight_decay": 0.1},
    {"momentum": 0.8, "dampening": 0.3},
    {"momentum": 0.9, "nesterov": True},
])
def test_sgd(kw):
    params, grads = make_problem()
    got = run_tessera(optim.SGD(0.1, **kw), params, grads)
    assert_trees_close(got, run_numpy(sgd_rule(0.1, **kw), params, grads))


def test_sgd_nesterov_validation():
    with pytest.raises(ValueError):
        optim.SGD(0.1, nesterov=True)
    with pytest.raises(ValueError):
        optim.SGD(0.1, momentum=0.9, dampening=0.1, nesterov=True)


def test_rmsprop():
    lr, alpha, eps = 0.01, 0.9, 1e-6

    def rule(p, g, s, t):
        v = alpha * s.get("v", 0) + (1 - alpha) * g * g
        s["v"] = v
        return p - lr * g / (np.sqrt(v) + eps)

    params, grads = make_problem()
    got = run_tessera(optim.RMSprop(lr, alpha=alpha, eps=eps), params, grads)
    assert_trees_close(got, run_numpy(rule, params, grads))
    with pytest.raises(ValueError):
        optim.RMSprop(lr, alpha=-1)
    with pytest.raises(ValueError):
        optim.RMSprop(lr, eps=0)


def test_adagrad():
    lr, eps = 0.1, 1e-8

    def rule(p, g, s, t):
        v = s.get("v", 0) + g * g
        s["v"] = v
        return p - lr * g / (np.sqrt(v) + eps)

    params, grads = make_problem()
    got = run_tessera(optim.Adagrad(lr, eps=eps), params, grads)
    assert_trees_close(got, run_numpy(rule, params, grads))


def test_adadelta():
    lr, rho, eps = 1.0, 0.9, 1e-6

    def rule(p, g, s, t):
        v = rho * s.get("v", 0) + (1 - rho) * g * g
        u = s.get("u", 0)
        d = np.sqrt(u + eps) / np.sqrt(v + eps) * g
        s["u"] = rho * u + (1 - rho) * d * d
        s["v"] = v
        return p - lr * d

    params, grads = make_problem()
    got = run_tessera(optim.AdaDelta(lr, rho=rho, eps=eps), params, grads)
    assert_trees_close(got, run_numpy(rule, params, grads))


def adam_rule(lr, b1, b2, eps, bias_correction, weight_decay=0.0):
    def rule(p, g, s, t):
        p = p * (1 - lr * weight_decay)
        m = b1 * s.get("m", 0) + (1 - b1) * g
        v = b2 * s.get("v", 0) + (1 - b2) * g * g
        s["m"], s["v"] = m, v
        if bias_correction:
            return p - (lr / (1 - b1 ** t)) * m / (np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps)
        return p - lr * m / (np.sqrt(v) + eps)
    return rule


@pytest.mark.parametrize("bias_correction", [False, True])
def test_adam(bias_correction):
    params, grads = make_problem()
    got = run_tessera(optim.Adam(0.01, betas=[0.8, 0.95], eps=1e-6,
                                 bias_correction=bias_correction), params, grads)
    want = run_numpy(adam_rule(0.01, 0.8, 0.95, 1e-6, bias_correction), params, grads)
    assert_trees_close(got, want)


@pytest.mark.parametrize("bias_correction", [False, True])
def test_adamw(bias_correction):
    params, grads = make_problem()
    got = run_tessera(optim.AdamW(0.01, weight_decay=0.1, bias_correction=bias_correction),
                      params, grads)
    want = run_numpy(adam_rule(0.01, 0.9, 0.999, 1e-8, bias_correction, 0.1), params, grads)
    assert_trees_close(got, want)


def test_adam_validation():
    with pytest.raises(ValueError):
        optim.Adam(0.1, betas=[1.0, 0.9])
    with pytest.raises(ValueError):
        optim.Adam(0.1, eps=-1.0)


def test_adamax():
    lr, b1, b2, eps = 0.01, 0.9, 0.99, 1e-8

    def rule(p, g, s, t):
        m = b1 * s.get("m", 0) + (1 - b1) * g
        v = np.maximum(b2 * s.get("v", 0), np.abs(g))
        s["m"], s["v"] = m, v
        return p - lr * m / (v + eps)

    params, grads = make_problem()
    got = run_tessera(optim.Adamax(lr, betas=[b1, b2], eps=eps), params, grads)
    assert_trees_close(got, run_numpy(rule, params, grads))


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_lion(weight_decay):
    lr, b1, b2 = 0.01, 0.9, 0.99

    def rule(p, g, s, t):
        m = s.get("m", 0)
        c = b1 * m + (1 - b1) * g
        s["m"] = b2 * m + (1 - b2) * g
        if weight_decay > 0:
            p = p * (1 - lr * weight_decay)
        return p - lr * np.sign(c)

    params, grads = make_problem()
    got = run_tessera(optim.Lion(lr, betas=[b1, b2], weight_decay=weight_decay), params, grads)
    assert_trees_close(got, run_numpy(rule, params, grads))


def adafactor_rule(learning_rate=None, eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8,
                   beta_1=None, weight_decay=0.0, scale_parameter=True, relative_step=True,
                   warmup_init=False):
    def rms(x):
        return np.sqrt(np.mean(x * x))

    def rule(p, g, s, t):
        if relative_step:
            rho = min(1e-6 * t if warmup_init else 1e-2, 1 / math.sqrt(t))
        else:
            rho = learning_rate
        if scale_parameter:
            rho = max(eps[1], rms(p)) * rho
        beta2 = 1 - t ** decay_rate
        G = g * g + eps[0]
        if p.ndim >= 2:
            row = beta2 * s.get("row", 0) + (1 - beta2) * G.mean(-1)
            col = beta2 * s.get("col", 0) + (1 - beta2) * G.mean(-2)
            s["row"], s["col"] = row, col
            u = (1 / np.sqrt(row / row.mean(-1, keepdims=True)))[..., None] \
                * (1 / np.sqrt(col))[..., None, :] * g
        else:
            v = beta2 * s.get("v", 0) + (1 - beta2) * G
            s["v"] = v
            u = g / np.sqrt(v)
        u = u / max(1.0, rms(u) / clip_threshold)
        u = rho * u
        if beta_1 is not None:
            m = beta_1 * s.get("m", 0) + (1 - beta_1) * u
            s["m"] = m
            u = m
        if weight_decay != 0:
            p = p - weight_decay * rho * p
        return p - u
    return rule


@pytest.mark.parametrize("kw", [
    {},
    {"learning_rate": 0.05, "relative_step": False},
    {"beta_1": 0.9, "weight_decay": 0.1},
    {"warmup_init": True, "scale_parameter": False},
])
def test_adafactor(kw):
    params, grads = make_problem()
    got = run_tessera(optim.Adafactor(**kw), params, grads)
    assert_trees_close(got, run_numpy(adafactor_rule(**kw), params, grads), rtol=1e-4)
    if "learning_rate" not in kw:
        assert "learning_rate" not in optim.Adafactor(**kw).state


def test_state_contents_and_step():
    params, grads = make_problem()
    opt = optim.Adam(0.1)
    p = to_mx(params)
    assert opt.step.item() == 0 and opt.step.dtype == mx.uint64
    opt.apply_gradients(to_mx(grads[0]), p)
    assert opt.step.item() == 1
    assert set(opt.state) == {"step", "learning_rate", "w", "b", "layers"}
    assert set(opt.state["w"]) == {"m", "v"}
    assert opt.state["layers"][0]["m"].shape == (2, 5)
    np.testing.assert_allclose(np.array(opt.state["w"]["m"]), 0.1 * grads[0]["w"], rtol=1e-6)
    opt.learning_rate = 0.5
    assert isinstance(opt.learning_rate, mx.array) and opt.learning_rate.item() == 0.5


def test_state_round_trip_through_flatten():
    params, grads = make_problem()
    opt = optim.Adam(0.1)
    p = opt.apply_gradients(to_mx(grads[0]), to_mx(params))
    saved = tree_flatten(opt.state, destination={})
    restored = optim.Adam(0.1)
    restored.state = tree_unflatten(saved)
    a = opt.apply_gradients(to_mx(grads[1]), p)
    b = restored.apply_gradients(to_mx(grads[1]), p)
    assert_trees_close(tree_map(np.array, a), tree_map(np.array, b), rtol=0, atol=0)


def test_schedule_as_learning_rate_uses_step_before_update():
    params, grads = make_problem()
    sched = optim.exponential_decay(0.1, 0.5)
    got = run_tessera(optim.SGD(sched), params, grads)

    lrs = [0.1 * 0.5 ** t for t in range(STEPS)]

    def rule(p, g, s, t):
        return p - lrs[t - 1] * g

    assert_trees_close(got, run_numpy(rule, params, grads))


def test_update_on_module_and_multioptimizer():
    model = nn.Linear(3, 2)
    w0, b0 = np.array(model.weight), np.array(model.bias)
    grads = {"weight": mx.ones((2, 3)), "bias": mx.ones((2,))}
    opt = optim.MultiOptimizer([optim.SGD(0.1), optim.SGD(1.0)],
                               [lambda path, g: path.endswith("weight")])
    opt.update(model, grads)
    np.testing.assert_allclose(np.array(model.weight), w0 - 0.1, rtol=1e-6)
    np.testing.assert_allclose(np.array(model.bias), b0 - 1.0, rtol=1e-6)
    assert len(opt.state["states"]) == 2
    opt.learning_rate = 0.2
    assert opt.optimizers[1].learning_rate.item() == pytest.approx(0.2)
    with pytest.raises(ValueError):
        optim.MultiOptimizer([optim.SGD(0.1), optim.SGD(0.1)])


def test_schedules_against_formulas():
    for step in [0, 1, 5, 17]:
        assert float(optim.exponential_decay(0.2, 0.9)(step)) == pytest.approx(0.2 * 0.9 ** step)
        assert float(optim.step_decay(0.2, 0.5, 4)(step)) == pytest.approx(
            0.2 * 0.5 ** (step // 4))
        s = min(step, 10)
        assert float(optim.cosine_decay(0.2, 10, 0.01)(step)) == pytest.approx(
            0.01 + 0.5 * (1 + math.cos(math.pi * s / 10)) * (0.2 - 0.01), rel=1e-5)
        assert float(optim.linear_schedule(0.0, 1.0, 8)(step)) == pytest.approx(
            min(step, 8) / 8, rel=1e-6)
    warm = optim.linear_schedule(0.0, 0.1, 5)
    cos = optim.cosine_decay(0.1, 20)
    joined = optim.join_schedules([warm, cos], [5])
    for step in [0, 3, 5, 9, 30]:
        want = float(warm(step)) if step < 5 else float(cos(step - 5))
        assert float(joined(mx.array(step))) == pytest.approx(want, rel=1e-5, abs=1e-7)
    with pytest.raises(ValueError):
        optim.join_schedules([warm, cos], [])
    with pytest.raises(ValueError):
        optim.step_decay(0.1, 0.5, 0)
    with pytest.raises(ValueError):
        optim.cosine_decay(0.1, 0)
    with pytest.raises(ValueError):
        optim.linear_schedule(0.1, 0.0, 0)


def test_clip_grad_norm():
    rng = np.random.default_rng(1)
    grads = {"a": rng.standard_normal((3, 3)), "b": [rng.standard_normal(4)]}
    norm = math.sqrt(sum(float((g ** 2).sum()) for _, g in tree_flatten(grads)))
    for max_norm in [0.5, 100.0]:
        clipped, total = optim.clip_grad_norm(to_mx(grads), max_norm)
        assert total.item() == pytest.approx(norm, rel=1e-5)
        scale = min(max_norm / (norm + 1e-6), 1.0)
        assert_trees_close(tree_map(np.array, clipped), tree_map(lambda g: g * scale, grads))
    with pytest.raises(ValueError):
        optim.clip_grad_norm(to_mx(grads), -1.0)


@pytest.mark.parametrize("nesterov", [True, False])
def test_muon(nesterov):
    lr, mu, wd, ns = 0.02, 0.9, 0.01, 5

    def newton_schulz(X):
        a, b, c = 3.4445, -4.7750, 2.0315
        transpose = X.shape[0] > X.shape[1]
        if transpose:
            X = X.T
        X = X / (np.sqrt((X ** 2).sum()) + 1e-7)
        for _ in range(ns):
            A = X @ X.T
            X = a * X + (b * A + c * A @ A) @ X
        return X.T if transpose else X

    def rule(p, g, s, t):
        g = g + wd * p
        v = mu * s.get("v", 0) + (1 - mu) * g
        s["v"] = v
        u = (1 - mu) * g + mu * v if nesterov else v
        eta = lr
        if p.ndim >= 2:
            m = u.reshape(u.shape[0], -1)
            eta = lr * math.sqrt(max(1, m.shape[0] / m.shape[1]))
            u = newton_schulz(m).reshape(u.shape)
        return p - eta * u

    params, grads = make_problem()
    params["t"] = RNG_PARAMS.standard_normal((6, 2, 2))
    for g in grads:
        g["t"] = RNG_PARAMS.standard_normal((6, 2, 2))
    got = run_tessera(optim.Muon(lr, momentum=mu, weight_decay=wd, nesterov=nesterov),
                      params, grads)
    assert_trees_close(got, run_numpy(rule, params, grads), rtol=1e-4, atol=1e-5)


RNG_PARAMS = np.random.default_rng(5)


def test_update_skips_gradient_parts_that_hold_no_array():
    # A model's non-array attributes (a list of str) come back from grad as
    # empty containers: nothing to update there, and no error.
    opt = optim.SGD(learning_rate=0.5)
    params = {"w": mx.array([1.0, 2.0]), "kinds": ["a", "b"]}
    grads = {"w": mx.array([1.0, 1.0]), "kinds": [{}, {}]}
    out = opt.apply_gradients(grads, params)
    np.testing.assert_allclose(np.array(out["w"]), [0.5, 1.5])
    with pytest.raises(ValueError, match=r"\[SGD.update\]"):
        opt.apply_gradients({"v": mx.array([1.0])}, params)
