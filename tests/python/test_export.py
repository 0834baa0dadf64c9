"""export_function, import_function, exporter and export_to_dot: imported
functions against the functions themselves and NumPy, on every device; keyword
inputs, several traces, shapeless traces, metadata, the callback, DOT, and the
errors (bad files, wrong signatures, wrong inputs and outputs)."""

import io

import numpy as np
import pytest

import tessera.core as mx
import tessera.nn as nn


def round_trip(tmp_path, fun, example, inputs, **kwargs):
    """fun exported on example, imported and called on inputs; checked equal
    to fun itself (the same primitives give the same bits)."""
    path = str(tmp_path / "f.mlxfn")
    mx.export_function(path, fun, *example, **kwargs)
    imported = mx.import_function(path)
    got = imported(*inputs)
    assert isinstance(got, tuple)
    want = fun(*inputs)
    want = (want,) if isinstance(want, mx.array) else tuple(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert mx.array_equal(g, w, equal_nan=True).item()
    return got


def test_arithmetic_matches_numpy(tmp_path, device, rng):
    def fun(x, y):
        return mx.exp(x) * y + 2, mx.sum(x * y, axis=1)

    a, b = rng.standard_normal((2, 3, 4)).astype(np.float32)
    got = round_trip(tmp_path, fun, (mx.zeros((3, 4)), mx.zeros((3, 4))), (mx.array(a), mx.array(b)))
    np.testing.assert_allclose(np.array(got[0]), np.exp(a) * b + 2, rtol=1e-6)
    np.testing.assert_allclose(np.array(got[1]), (a * b).sum(axis=1), rtol=1e-5)


def test_matmul_reductions_indexing_and_softmax(tmp_path, device, rng):
    def fun(x, w):
        idx = mx.array([2, 0, 1])
        return (
            x @ w,
            mx.max(x, axis=0),
            mx.argmin(x, axis=1),
            mx.var(x, axis=1, keepdims=True),
            mx.logsumexp(x),
            x[1:, ::2],
            x[idx],
            x[:, -1],
            mx.take_along_axis(x, mx.argsort(x, axis=1), axis=1),
            mx.softmax(x, axis=-1),
            mx.cumsum(x, axis=0),
            mx.concatenate([x, x], axis=1).reshape(-1),
            mx.pad(x, [(1, 1), (0, 2)]),
            mx.where(x > 0, x, 0.5 * x),
        )

    x = mx.array(rng.standard_normal((3, 5)).astype(np.float32))
    w = mx.array(rng.standard_normal((5, 2)).astype(np.float32))
    got = round_trip(tmp_path, fun, (mx.zeros((3, 5)), mx.zeros((5, 2))), (x, w))
    xn, wn = np.array(x), np.array(w)
    np.testing.assert_allclose(np.array(got[0]), xn @ wn, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.array(got[5]), xn[1:, ::2])
    np.testing.assert_array_equal(np.array(got[6]), xn[[2, 0, 1]])


def test_fast_ops_and_convolution(tmp_path, device, rng):
    def fun(x, w, q, k):
        return (
            mx.fast.rms_norm(x, w, 1e-5),
            mx.fast.layer_norm(x, w, None, 1e-5),
            mx.fast.rope(q, 8, traditional=False, base=10000.0, scale=1.0, offset=2),
            mx.fast.scaled_dot_product_attention(q, k, k, scale=0.3, mask="causal"),
        )

    args = [rng.standard_normal(s).astype(np.float32) for s in [(2, 8), (8,), (1, 4, 6, 8), (1, 2, 6, 8)]]
    round_trip(tmp_path, fun, [mx.zeros(a.shape) for a in args], [mx.array(a) for a in args])

    def conv(x, w):
        return mx.conv2d(x, w, stride=(1, 2), padding=1), mx.conv1d(x[0], w[:, 0], groups=1)

    x = mx.array(rng.standard_normal((2, 6, 6, 3)).astype(np.float32))
    w = mx.array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    round_trip(tmp_path, conv, (x, w), (x * 2, w))


def test_module_forward_with_weights_as_constants(tmp_path, device, rng):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    mx.eval(model.parameters())
    x = mx.array(rng.standard_normal((5, 4)).astype(np.float32))
    got = round_trip(tmp_path, model, (mx.zeros((5, 4)),), (x,))
    params = model.parameters()["layers"]
    w1, b1 = np.array(params[0]["weight"]), np.array(params[0]["bias"])
    w2, b2 = np.array(params[2]["weight"]), np.array(params[2]["bias"])
    want = np.maximum(np.array(x) @ w1.T + b1, 0) @ w2.T + b2
    np.testing.assert_allclose(np.array(got[0]), want, rtol=1e-5, atol=1e-6)


def test_keyword_inputs_and_call_forms(tmp_path):
    def fun(x, *, scale, shift):
        return x * scale + shift

    path = str(tmp_path / "kw.mlxfn")
    x = mx.array([1.0, 2.0])
    mx.export_function(path, fun, x, scale=mx.ones(2), shift=mx.zeros(2))
    f = mx.import_function(path)
    scale, shift = mx.array([2.0, 3.0]), mx.array([10.0, 20.0])
    want = [12.0, 26.0]
    assert f(x, scale=scale, shift=shift)[0].tolist() == want
    assert f((x,), {"scale": scale, "shift": shift})[0].tolist() == want
    assert f([x], {"shift": shift, "scale": scale})[0].tolist() == want
    with pytest.raises(ValueError, match="No imported function"):
        f(x, scale=scale, offset=shift)
    with pytest.raises(ValueError, match="Inputs can either be"):
        f(1.0)

    # The example inputs as one tuple and one dict.
    mx.export_function(path, lambda a, b, *, c: a + b * c, (x, x), {"c": x})
    assert mx.import_function(path)(x, x, c=mx.array([3.0, 4.0]))[0].tolist() == [4.0, 10.0]


def test_exporter_keeps_one_trace_per_signature(tmp_path):
    path = str(tmp_path / "traces.mlxfn")
    calls = []

    def fun(*args):
        calls.append(len(args))
        return sum(args)

    with mx.exporter(path, fun, metadata="traces") as ex:
        assert isinstance(ex, mx.FunctionExporter)
        ex(mx.array(1))
        ex(mx.array(1), mx.array(2))
        ex(mx.array([1.0, 2.0]), mx.array([1.0, 2.0]), mx.array([1.0, 2.0]))
    assert calls == [1, 2, 3]
    f, metadata = mx.import_function(path, return_metadata=True)
    assert metadata == "traces"
    assert f(mx.array(5))[0].item() == 5
    assert f(mx.array(5), mx.array(7))[0].item() == 12
    assert f(*[mx.array([1.0, 2.0])] * 3)[0].tolist() == [3.0, 6.0]
    assert calls == [1, 2, 3]
    with pytest.raises(ValueError, match=r"(?s)Possible functions.*\(2,?\) float32.*Called with"):
        f(mx.array([1.0, 2.0, 3.0]), mx.array([1.0, 2.0, 3.0]))
    with pytest.raises(RuntimeError, match="closed"):
        ex(mx.array(1))
    ex.close()  # closing again does nothing


def test_shapeless(tmp_path, device, rng):
    w = mx.array(rng.standard_normal((4, 3)).astype(np.float32))
    b = mx.array(rng.standard_normal((3,)).astype(np.float32))

    def fun(x):
        h = x @ w + b
        return mx.softmax(h * 2.0, axis=-1), h.reshape(-1), mx.sum(h, axis=1), h[:, 1:]

    path = str(tmp_path / "shapeless.mlxfn")
    mx.export_function(path, fun, mx.zeros((2, 4)), shapeless=True)
    f = mx.import_function(path)
    for n in (2, 5, 1):
        x = mx.array(rng.standard_normal((n, 4)).astype(np.float32))
        for g, want in zip(f(x), fun(x)):
            assert g.shape == want.shape
            assert mx.array_equal(g, want).item()
    with pytest.raises(ValueError, match="No imported function"):
        f(mx.zeros((2, 4, 1)))

    mx.export_function(path, lambda x: x[1:3], mx.zeros(5), shapeless=True)
    f = mx.import_function(path)
    assert f(mx.arange(5.0))[0].tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="Slice"):
        f(mx.zeros(7))


def test_compiled_and_custom_functions(tmp_path, device):
    compiled = mx.compile(lambda x: mx.exp(x) * 2 + 1)
    custom = mx.custom_function(lambda x: mx.sin(x) * x)
    x = mx.array([[0.5, -1.0], [2.0, 0.25]])
    round_trip(tmp_path, lambda x: compiled(x) - custom(x), (x,), (x * 3,))


def test_gradient_export(tmp_path, device, rng):
    def loss(x, w):
        return mx.sum(mx.fast.rms_norm(x, w, 1e-5) ** 2)

    grad = mx.grad(loss, argnums=(0, 1))
    x = mx.array(rng.standard_normal((3, 8)).astype(np.float32))
    w = mx.array(rng.standard_normal((8,)).astype(np.float32))
    round_trip(tmp_path, lambda x, w: grad(x, w), (x, w), (x * 2, w))


def test_metadata(tmp_path):
    path = str(tmp_path / "m.mlxfn")
    text = '{"model": "tiny", "layers": 2} ✓'
    mx.export_function(path, lambda x: x + 1, mx.zeros(1), metadata=text)
    f, got = mx.import_function(path, return_metadata=True)
    assert got == text and f(mx.ones(1))[0].item() == 2
    mx.export_function(path, lambda x: x + 1, mx.zeros(1))
    assert mx.import_function(path, return_metadata=True)[1] == ""
    with pytest.raises(ValueError, match="metadata"):
        mx.export_function(lambda item: None, lambda x: x, mx.zeros(1), metadata="m")


def test_bad_files_raise_runtime_errors(tmp_path):
    path = tmp_path / "bad.mlxfn"
    with pytest.raises(RuntimeError, match="cannot open"):
        mx.import_function(str(path))
    path.write_bytes(b"garbage, not an export")
    with pytest.raises(RuntimeError, match="not a Tessera export"):
        mx.import_function(str(path))
    mx.export_function(str(path), lambda x: mx.exp(x) + mx.array([1.0, 2.0]), mx.zeros(2))
    data = path.read_bytes()
    for cut in (12, 30, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(RuntimeError, match="truncated"):
            mx.import_function(str(path))
    path.write_bytes(data[:16] + bytes([9, 0, 0, 0]) + data[20:])
    with pytest.raises(RuntimeError, match="newer"):
        mx.import_function(str(path))


def test_wrong_inputs_and_outputs(tmp_path):
    path = str(tmp_path / "w.mlxfn")
    with pytest.raises(ValueError, match="Inputs can either be"):
        mx.export_function(path, lambda x: x, 1.0)
    with pytest.raises(ValueError, match="Outputs can be either"):
        mx.export_function(path, lambda x: {"y": x}, mx.zeros(1))
    with pytest.raises(ValueError, match="Outputs can be either"):
        mx.export_function(path, lambda x: 1.0, mx.zeros(1))
    with pytest.raises(ValueError, match="export_function"):
        mx.export_function(path, lambda x: x * x.sum().item(), mx.zeros(1))
    with pytest.raises(TypeError):
        mx.export_function(3, lambda x: x, mx.zeros(1))


def test_callback_receives_the_graph():
    items = []

    def fun(x, y, *, z):
        return x @ y + z * 2.0, mx.sum(x)

    x, y, z = mx.ones((2, 3)), mx.ones((3, 4)), mx.ones((4,))
    mx.export_function(items.append, fun, x, y, z=z)
    types = [item["type"] for item in items]
    assert types[:4] == ["inputs", "keyword_inputs", "outputs", "constants"]
    assert set(types[4:]) == {"primitive"}
    assert items[0]["inputs"] == [("A", (2, 3), mx.float32), ("B", (3, 4), mx.float32),
                                  ("C", (4,), mx.float32)]
    assert items[1]["keywords"] == [("z", "C")]
    assert [o[1] for o in items[2]["outputs"]] == [(2, 4), ()]
    (name, constant), = items[3]["constants"]
    assert constant.item() == 2.0
    names = [item["name"] for item in items[4:]]
    assert "Matmul" in names and "Reduce" in names and "Broadcast" in names
    broadcast = next(item for item in items[4:] if item["name"] == "Broadcast")
    assert broadcast["arguments"] in ([[4]], [[2, 4]])
    reduce = next(item for item in items[4:] if item["name"] == "Reduce")
    assert reduce["inputs"] == [("A", (2, 3), mx.float32)]
    assert reduce["arguments"][1:] == [[0, 1], False]


def test_export_to_dot(tmp_path):
    x, y = mx.array([1.0, 2.0]), mx.array([3.0, 4.0])
    z = mx.exp(x) * y + 1
    w = mx.sum(z)
    path = tmp_path / "g.dot"
    mx.export_to_dot(str(path), w, z, xin=x, zz=z)
    dot = path.read_text()
    assert dot.startswith("digraph {") and dot.rstrip().endswith("}")
    for part in ('{ rank=source; "xin"; }', 'label ="Exp"', '"xin" -> n0', '-> "zz"',
                 'label ="Multiply"', "rank=sink"):
        assert part in dot, part
    buffer = io.StringIO()
    mx.export_to_dot(buffer, [w])
    assert buffer.getvalue().startswith("digraph {") and '"A" -> n0' in buffer.getvalue()
    with pytest.raises(ValueError):
        mx.export_to_dot(str(path), w, 3)


def test_names_in_the_module():
    for name in ("export_function", "import_function", "exporter", "export_to_dot",
                 "FunctionExporter"):
        assert hasattr(mx, name), name
