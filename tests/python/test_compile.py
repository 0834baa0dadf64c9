"""compile: values against the function itself and NumPy, when it traces again,
trees of arguments and results, frozen closures, the refusal to evaluate during
a trace, implicit inputs and outputs (a training step, random.state), and
composition with grad and vmap."""
import numpy as np
import pytest

import tessera.core as mx
import tessera.nn as nn
import tessera.optimizers as optim
from tessera.utils import tree_flatten

# Every test on each device present (conftest's device fixture).
pytestmark = pytest.mark.usefixtures("device")


@pytest.fixture(autouse=True)
def compile_enabled():
    mx.enable_compile()
    yield
    mx.enable_compile()


def test_matches_the_function_and_traces_once_per_signature(rng):
    traces = []

    def f(x, y, scale=1.0):
        traces.append(1)
        return {"h": mx.tanh(x @ y) * scale, "n": mx.sum(x * x)}, "tag"

    cf = mx.compile(f)
    for _ in range(3):
        x, y = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
        out, tag = cf(mx.array(x), mx.array(y), scale=2.0)
        assert tag == "tag"
        np.testing.assert_allclose(np.array(out["h"]), np.tanh(x @ y) * 2.0, rtol=1e-12)
        np.testing.assert_allclose(out["n"].item(), np.sum(x * x), rtol=1e-12)
    assert len(traces) == 1

    x, y = mx.array(rng.standard_normal((4, 3))), mx.array(rng.standard_normal((3, 5)))
    cf(x, y, scale=3.0)  # a new constant
    assert len(traces) == 2
    cf(x[:2], y, scale=3.0)  # a new shape
    assert len(traces) == 3
    cf(x.astype(mx.float32), y.astype(mx.float32), scale=3.0)  # a new dtype
    assert len(traces) == 4
    out, _ = cf(x, y, scale=3.0)  # seen before
    assert len(traces) == 4
    np.testing.assert_allclose(np.array(out["h"]), np.tanh(np.array(x) @ np.array(y)) * 3.0,
                               rtol=1e-12)


def test_array_only_calls_and_tree_calls_share_traces(rng):
    # Positional arrays alone take a shorter path to the same recorded graph;
    # calls with constants or trees beside them go the long way, in any order.
    traces = []

    def f(x, y=None):
        traces.append(1)
        if y is None:
            return x * mx.sigmoid(x)
        return [x + y, {"p": x * y, "k": 3}]

    cf = mx.compile(f, shapeless=True)
    x, y = rng.standard_normal((2, 5)), rng.standard_normal((2, 5))
    np.testing.assert_allclose(np.array(cf(mx.array(x))), x / (1 + np.exp(-x)), rtol=1e-12)
    np.testing.assert_allclose(np.array(cf(mx.array(y))), y / (1 + np.exp(-y)), rtol=1e-12)
    assert len(traces) == 1
    s, t = cf(mx.array(x), mx.array(y))
    s2, t2 = cf(mx.array(y), y=mx.array(x))  # the keyword: a signature of its own
    assert len(traces) == 3
    s3, t3 = cf(mx.array(y), mx.array(x))
    assert len(traces) == 3
    np.testing.assert_allclose(np.array(s), x + y, rtol=1e-12)
    np.testing.assert_allclose(np.array(t["p"]), x * y, rtol=1e-12)
    assert t["k"] == 3 and t2["k"] == 3 and t3["k"] == 3
    np.testing.assert_allclose(np.array(s2), x + y, rtol=1e-12)
    np.testing.assert_allclose(np.array(t3["p"]), x * y, rtol=1e-12)
    const = mx.compile(lambda a: 5)
    assert const(mx.array(1.0)) == 5 and const(mx.array(2.0)) == 5


def test_activations_are_compiled_into_one_node(rng):
    # As MLX compiles its activations: silu and the gelus are one fused node.
    x = rng.standard_normal((3, 7))
    for f, ref in ((nn.silu, x / (1 + np.exp(-x))),
                   (nn.gelu_fast_approx, x / (1 + np.exp(-1.702 * x)))):
        y = f(mx.array(x))
        nodes = [p.split("(")[0] for p in mx._graph_primitives([y])]
        assert [n for n in nodes if n != "Broadcast"] == ["Compiled"]  # constants broadcast
        np.testing.assert_allclose(np.array(y), ref, rtol=1e-6, atol=1e-7)
    g = mx.grad(lambda v: nn.silu(v).sum())(mx.array(x))
    sig = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(np.array(g), sig * (1 + x * (1 - sig)), rtol=1e-6, atol=1e-7)


def test_a_compiled_function_inside_another_fuses_with_it(rng):
    # The inner function runs inline during the outer trace: one fused node.
    inner_traces = []

    def inner(g):
        inner_traces.append(1)
        return g * mx.sigmoid(g)

    inner_c = mx.compile(inner, shapeless=True)
    outer = mx.compile(lambda g, x: inner_c(g) * x, shapeless=True)
    g, x = rng.standard_normal((2, 6)), rng.standard_normal((2, 6))
    y = outer(mx.array(g), mx.array(x))
    assert [p.split("(")[0] for p in mx._graph_primitives([y])] == ["Compiled"]
    np.testing.assert_allclose(np.array(y), g / (1 + np.exp(-g)) * x, rtol=1e-12)
    np.testing.assert_allclose(np.array(inner_c(mx.array(g))), g / (1 + np.exp(-g)),
                               rtol=1e-12)  # alone, it still traces and replays
    assert len(inner_traces) == 2


def test_closures_are_frozen_at_the_trace():
    box = {"scale": mx.array(2.0)}
    cf = mx.compile(lambda x: x * box["scale"])
    assert cf(mx.array([1.0, 3.0])).tolist() == [2.0, 6.0]
    box["scale"] = mx.array(5.0)
    assert cf(mx.array([1.0, 3.0])).tolist() == [2.0, 6.0]


def test_evaluating_during_the_trace_raises():
    def f(x):
        if (x > 0).item():
            return x
        return -x

    with pytest.raises(ValueError, match=r"\[compile\]"):
        mx.compile(f)(mx.array(1.0))


def test_disable_and_enable():
    traces = []

    def f(x):
        traces.append(1)
        return x + 1

    cf = mx.compile(f)
    mx.disable_compile()
    assert cf(mx.array(1.0)).item() == 2.0
    assert cf(mx.array(1.0)).item() == 2.0
    assert len(traces) == 2
    mx.enable_compile()
    cf(mx.array(1.0))
    cf(mx.array(1.0))
    assert len(traces) == 3


def mlp():
    mx.random.seed(3)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    mx.eval(model.parameters())
    return model


def test_training_step_with_implicit_state(rng):
    x = mx.array(rng.standard_normal((16, 4)).astype(np.float32))
    y = mx.array(rng.standard_normal((16, 2)).astype(np.float32))

    def run(compiled):
        model = mlp()
        opt = optim.Adam(learning_rate=0.05)

        def loss_fn(model, x, y):
            return mx.mean(mx.square(model(x) - y))

        grad_fn = nn.value_and_grad(model, loss_fn)
        state = [model.state, opt.state]

        def step(x, y):
            loss, grads = grad_fn(model, x, y)
            opt.update(model, grads)
            return loss

        if compiled:
            step = mx.compile(step, inputs=state, outputs=state)
        losses = []
        for _ in range(5):
            losses.append(step(x, y).item())
            mx.eval(state)
        return losses, model

    want_losses, want_model = run(False)
    got_losses, got_model = run(True)
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-5)
    assert got_losses[-1] < got_losses[0]
    for (name, w), (_, g) in zip(
            tree_flatten(want_model.parameters()), tree_flatten(got_model.parameters())):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-5, atol=1e-6,
                                   err_msg=name)


def test_training_step_through_frozen_quantized_weights(rng):
    # The frozen packed weights are placeholders of the trace, as the trainable
    # parameters are, but have no derivative: only what depends on the
    # differentiated parameters gets a cotangent (a tied QuantizedEmbedding
    # used as the output layer, as in mlx-lm's quantized LoRA).
    ids = mx.array([[1, 2, 3]])

    def run(compiled):
        model = nn.Module()
        model.embed = nn.QuantizedEmbedding(10, 64, group_size=32, bits=4)
        model.embed.weight, model.embed.scales, model.embed.biases = mx.quantize(
            mx.array(rng_fixed.standard_normal((10, 64)).astype(np.float32)), 32, 4)
        model.freeze()
        model.adapter = mx.array(0.01 * np.eye(64, dtype=np.float32))
        opt = optim.SGD(learning_rate=0.1)

        def loss_fn(ids):
            logits = model.embed.as_linear(model.embed(ids) @ model.adapter)
            return nn.losses.cross_entropy(logits, (ids + 1) % 10, reduction="mean")

        grad_fn = nn.value_and_grad(model, loss_fn)
        state = [model.state, opt.state]

        def step(ids):
            loss, grads = grad_fn(ids)
            assert [k for k, _ in tree_flatten(grads)] == ["adapter"]
            opt.update(model, grads)
            return loss

        if compiled:
            step = mx.compile(step, inputs=state, outputs=state)
        return [step(ids).item() for _ in range(3)]

    rng_fixed = np.random.default_rng(3)
    want = run(False)
    rng_fixed = np.random.default_rng(3)
    np.testing.assert_allclose(run(True), want, rtol=1e-5)
    assert want[-1] < want[0]


def test_random_state_as_implicit_input_and_output():
    state = [mx.random.state]
    draw = mx.compile(lambda: mx.random.uniform(shape=(3,)), inputs=state, outputs=state)
    mx.random.seed(7)
    want = [np.array(mx.random.uniform(shape=(3,))) for _ in range(3)]
    mx.random.seed(7)
    got = [np.array(draw()) for _ in range(3)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert not np.array_equal(got[0], got[1])


def test_random_state_reads_and_replaces_the_global_key():
    mx.random.seed(5)
    assert mx.random.state[0].tolist() == mx.random.key(5).tolist()
    mx.random.state[0] = mx.random.key(9)
    a = mx.random.uniform(shape=(2,))
    mx.random.seed(9)
    assert mx.random.uniform(shape=(2,)).tolist() == a.tolist()
    with pytest.raises(ValueError):
        mx.random.state[0] = mx.zeros((3,))


def test_composes_with_grad_and_vmap(rng):
    def f(w, x):
        return mx.sum(mx.sin(w) * x)

    w, x = mx.array(rng.standard_normal(5)), mx.array(rng.standard_normal(5))
    want = np.cos(np.array(w)) * np.array(x)
    np.testing.assert_allclose(np.array(mx.grad(mx.compile(f))(w, x)), want, rtol=1e-12)
    np.testing.assert_allclose(np.array(mx.compile(mx.grad(f))(w, x)), want, rtol=1e-12)
    batch = mx.array(rng.standard_normal((3, 5)))
    want_rows = np.sum(np.sin(np.array(w)) * np.array(batch), axis=1)
    np.testing.assert_allclose(np.array(mx.vmap(mx.compile(f), in_axes=(None, 0))(w, batch)),
                               want_rows, rtol=1e-12)


def test_arrays_in_tuples_of_implicit_state_are_refused():
    with pytest.raises(ValueError, match="tuple"):
        mx.compile(lambda: mx.array(1.0), inputs=(mx.array(1.0),))()
