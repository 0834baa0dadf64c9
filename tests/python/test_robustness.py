"""Bad or extreme input: deep structures, huge shapes, non-finite values,
out-of-range integers and wrong transform rules give a typed error that names
the op (or the right result), and the session keeps working afterwards."""
import sys

import numpy as np
import pytest

import tessera.core as mx


def still_works():
    assert (mx.arange(4) * 2).tolist() == [0, 2, 4, 6]


# ---- deep structures ---------------------------------------------------------


def test_tolist_and_repr_of_an_array_of_100000_dimensions():
    a = mx.ones((1,) * 100000)
    nested = a.tolist()
    depth = 0
    while isinstance(nested, list):
        assert len(nested) == 1
        nested = nested[0]
        depth += 1
    assert depth == 100000 and nested == 1.0
    text = repr(a)
    assert text.startswith("array(" + "[" * 100000 + "1")
    assert text.endswith("]" * 100000 + ", dtype=float32)")
    still_works()


def test_tolist_and_repr_follow_numpy_on_strided_and_empty_arrays():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    a = mx.array(x).transpose(2, 0, 1)[::2]
    assert a.tolist() == x.transpose(2, 0, 1)[::2].tolist()
    assert mx.zeros((2, 0, 3)).tolist() == [[], []]
    assert mx.zeros((0, 3)).tolist() == []
    assert mx.array(5).tolist() == 5
    assert repr(mx.array([[1, 2], [3, 4]])) == "array([[1, 2],\n       [3, 4]], dtype=int32)"
    big = repr(mx.arange(2000).reshape(2, 1000))
    assert big == ("array([[0, 1, 2, ..., 997, 998, 999],\n"
                   "       [1000, 1001, 1002, ..., 1997, 1998, 1999]], dtype=int32)")


def test_nested_lists_too_deep_or_containing_themselves_raise():
    x = []
    x.append(x)
    with pytest.raises(ValueError, match=r"\[array\].*levels deep"):
        mx.array(x)
    deep = [1.0]
    for _ in range(200000):
        deep = [deep]
    with pytest.raises(ValueError, match=r"\[array\].*levels deep"):
        mx.array(deep)
    with pytest.raises(ValueError, match=r"\[array\].*levels deep"):
        mx.array([mx.ones(2), deep])
    ok = [1.0]
    for _ in range(200):
        ok = [ok]
    assert mx.array(ok).shape == (1,) * 201
    still_works()


def test_eval_of_trees_that_contain_themselves_raises_and_deep_trees_evaluate():
    x = [mx.ones(2)]
    x.append(x)
    d = {"a": mx.ones(1)}
    d["self"] = d
    for f, name in ((mx.eval, "eval"), (mx.async_eval, "async_eval")):
        for tree in (x, d, (1, [x])):
            with pytest.raises(ValueError, match=rf"\[{name}\] the argument contains itself"):
                f(tree)
    mx.eval(x[0])
    with pytest.raises(ValueError, match=r"\[get_array_buffer_size\] the argument contains"):
        mx.get_array_buffer_size(x)
    # A list held twice is not a cycle; 200,000 levels of lists evaluate.
    shared = [mx.arange(3) + 1]
    mx.eval([shared, shared], {"k": (shared,)})
    deep = [mx.arange(3) * 2]
    for _ in range(200000):
        deep = [deep]
    mx.eval(deep)
    leaf = deep
    while isinstance(leaf, list):
        leaf = leaf[0]
    assert leaf.tolist() == [0, 2, 4]
    still_works()


def test_set_printoptions_is_bounded():
    before = mx.get_printoptions().precision
    try:
        for p in (10**7, 2**31 - 1, 2**40):
            with pytest.raises(ValueError, match=r"\[set_printoptions\]"):
                mx.set_printoptions(precision=p)
        mx.set_printoptions(precision=100)
        assert repr(mx.array(1.5)) == "array(1." + "5" + "0" * 99 + ", dtype=float32)"
        mx.set_printoptions(precision=3)
        assert repr(mx.array(1.5)) == "array(1.500, dtype=float32)"
    finally:
        mx.set_printoptions(precision=before)
    still_works()


def test_graphs_a_million_ops_deep_evaluate_differentiate_and_free():
    y = mx.array(0.0)
    for _ in range(10**6):
        y = y + 1.0
    assert y.item() == 1e6
    y = mx.array(1.0)
    for _ in range(5 * 10**5):
        y = y * 1.0
    del y  # an unevaluated chain, freed without recursion

    def chain(x):
        for _ in range(100000):
            x = x * 1.000001
        return x.sum()

    g = mx.grad(chain)(mx.array([1.0, 2.0]))
    # The cotangent goes through the same float32 products as chain(1).
    forward = chain(mx.array(1.0)).item()
    np.testing.assert_allclose(np.array(g), [forward] * 2, rtol=1e-5)
    np.testing.assert_allclose(forward, 1.000001**100000, rtol=2e-2)
    still_works()


# ---- shapes ------------------------------------------------------------------


@pytest.mark.parametrize("make", [
    lambda: mx.zeros((2**40,)),
    lambda: mx.ones((3, 2**31)),
    lambda: mx.reshape(mx.ones(4), (2**40, 0)),
    lambda: mx.ones(4).reshape(2**33, 1),
    lambda: mx.pad(mx.ones(2), 2**40),
    lambda: mx.pad(mx.ones(2), [(0, 2**40)]),
    lambda: mx.random.uniform(shape=(2**40,)),
    lambda: mx.broadcast_to(mx.ones(1), (2**31,)),
])
def test_shape_entries_beyond_int32_raise_overflow_error(make):
    # OverflowError, as MLX raises.
    with pytest.raises(OverflowError, match=r"shape entry .* out of range"):
        make()
    still_works()


def test_shapes_whose_size_overflows_raise():
    with pytest.raises(ValueError, match=r"\[broadcast_to\].*overflows"):
        mx.broadcast_to(mx.ones(1), (4, 2**31 - 1, 2**31 - 1))
    with pytest.raises(ValueError, match=r"\[broadcast_to\].*overflows"):
        mx.broadcast_to(mx.ones(1), (2**31 - 1,) * 3)
    with pytest.raises(ValueError, match=r"\[(array|zeros)\].*overflows"):
        mx.zeros((2**31 - 1, 2**31 - 1, 2**31 - 1))
    still_works()


# ---- values ------------------------------------------------------------------


def test_categorical_with_non_finite_logits_stays_in_range():
    inf, nan = np.inf, np.nan
    k = mx.random.key(0)
    cases = {
        (-inf, -inf, -inf): {0, 1, 2},     # no finite logit: uniform
        (inf, 0.0, inf): {0, 2},           # the +inf entries share the mass
        (0.0, inf, 0.0, inf): {1, 3},
        (0.0, nan, 1.0): {1},              # the first NaN, as MLX's argmax
        (nan, nan): {0},
        (-inf, inf, nan): {2},
    }
    for logits, allowed in cases.items():
        a = mx.array(logits)
        one = mx.random.categorical(a, key=k).item()
        many = mx.random.categorical(a, num_samples=400, key=k).tolist()
        rows = mx.random.categorical(mx.stack([a, a]), key=k).tolist()
        assert one in allowed and set(rows) <= allowed, logits
        assert set(many) == allowed, logits
    # Finite logits keep their samples (the values MLX gives for this key).
    logits = mx.array([0.1, 1.0, -0.5, 2.0])
    assert mx.random.categorical(logits, shape=(6,), key=mx.random.key(42)).tolist() == \
        [3, 3, 3, 1, 1, 3]


@pytest.mark.parametrize("read", [
    lambda x: x.sum().item(),
    lambda x: float(x[0]),
    lambda x: np.array(x),
    lambda x: x[x > 0],
    lambda x: x.tolist(),
])
def test_vmap_refuses_to_read_traced_values(read):
    def f(x):
        read(x)
        return x * 2

    with pytest.raises(ValueError, match=r"\[vmap\] cannot evaluate"):
        mx.vmap(f)(mx.ones((3, 2)))
    np.testing.assert_array_equal(np.array(mx.vmap(lambda x: x * 2)(mx.ones((3, 2)))),
                                  np.full((3, 2), 2.0))
    still_works()


def test_bool_bytes_other_than_zero_and_one_read_as_true():
    raw = np.array([0, 1, 2, 255], dtype=np.uint8)
    for b in (mx.array(raw).view(mx.bool_), mx.array(raw.view(np.bool_))):
        assert b.tolist() == [False, True, True, True]
        assert b.astype(mx.int32).tolist() == [0, 1, 1, 1]
        assert mx.logical_not(b).tolist() == [True, False, False, False]
        assert (~b).tolist() == [True, False, False, False]
        assert b.sum().item() == 3
        xs, ys = mx.array([1.0, 2.0, 3.0, 4.0]), mx.array([-1.0, -2.0, -3.0, -4.0])
        assert mx.where(b, xs, ys).tolist() == [-1.0, 2.0, 3.0, 4.0]
        assert mx.where(b, xs, 0.0).tolist() == [0.0, 2.0, 3.0, 4.0]
        assert mx.where(b, 5.0, ys).tolist() == [-1.0, 5.0, 5.0, 5.0]
        assert mx.where(b, 1, 0).tolist() == [0, 1, 1, 1]
    still_works()


def test_multivariate_normal_refuses_nan_and_indefinite_covariances():
    k = mx.random.key(0)
    mean = mx.zeros(2)
    for cov in ([[np.nan, 0.0], [0.0, 1.0]], [[1.0, 2.0], [2.0, 1.0]], [[-1.0, 0.0], [0.0, -1.0]]):
        with pytest.raises(ValueError, match=r"\[multivariate_normal\]"):
            mx.random.multivariate_normal(mean, mx.array(cov), shape=(3,), key=k)
    # Positive semi-definite (singular) covariances are fine: the second
    # coordinate is then always 0.
    s = mx.random.multivariate_normal(mean, mx.array([[1.0, 0.0], [0.0, 0.0]]), shape=(5,), key=k)
    assert np.all(np.array(s)[:, 1] == 0)
    still_works()


def test_custom_function_rules_returning_wrong_shapes_raise():
    @mx.custom_function
    def f(x):
        return x * 2

    @f.vjp
    def f_vjp(primals, cotangent, output):
        return mx.ones((3, 3))

    @f.jvp
    def f_jvp(primals, tangents):
        return mx.ones((4,))

    with pytest.raises(ValueError, match=r"\[custom_function\].*vjp.*shape"):
        mx.grad(lambda x: f(x).sum())(mx.ones(3))
    with pytest.raises(ValueError, match=r"\[custom_function\].*jvp.*shape"):
        mx.jvp(f, [mx.ones(3)], [mx.ones(3)])
    still_works()


@pytest.mark.parametrize("make", [
    lambda: mx.array(2**40, dtype=mx.int32),
    lambda: mx.array([300, -1], mx.uint8),
    lambda: mx.array(-1, mx.uint32),
    lambda: mx.array([2**63], mx.int64),
    lambda: mx.array([2**63, -1]),
    lambda: mx.array(128, mx.int8),
])
def test_ints_out_of_range_for_the_dtype_raise_overflow_error(make):
    with pytest.raises(OverflowError, match=r"\[array\]"):
        make()
    still_works()


def test_ints_in_range_and_uint64_above_2_63():
    assert mx.array([255, 0], mx.uint8).tolist() == [255, 0]
    assert mx.array(-128, mx.int8).item() == -128
    a = mx.array([2**63, 2**64 - 1])
    assert a.dtype == mx.uint64 and a.tolist() == [2**63, 2**64 - 1]
    assert mx.array(2**63).dtype == mx.uint64


@pytest.mark.parametrize("name, call", [
    ("inv", lambda a: mx.linalg.inv(a, stream=mx.cpu)),
    ("cholesky", lambda a: mx.linalg.cholesky(a, stream=mx.cpu)),
    ("svd", lambda a: mx.linalg.svd(a, stream=mx.cpu)),
    ("eig", lambda a: mx.linalg.eig(a, stream=mx.cpu)),
    ("eigh", lambda a: mx.linalg.eigh(a, stream=mx.cpu)),
    ("qr", lambda a: mx.linalg.qr(a, stream=mx.cpu)),
    ("solve", lambda a: mx.linalg.solve(a, mx.ones(2), stream=mx.cpu)),
])
def test_linalg_of_nan_input_names_the_op(name, call):
    a = mx.array([[np.nan, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match=r"\[linalg::" + name + r"\].*NaN"):
        mx.eval(call(a))
    still_works()


# ---- argument checks ---------------------------------------------------------


@pytest.mark.parametrize("call, op", [
    (lambda: mx.random.randint(0, 10, shape=(-1,)), "randint"),
    (lambda: mx.random.randint(mx.zeros((2,)), 10, shape=(3,)), "randint"),
    (lambda: mx.clip(mx.ones(3), mx.ones(2), 4), "clip"),
    (lambda: mx.allclose(mx.ones(3), mx.ones(2)), "allclose"),
    (lambda: mx.random.seed(-5), "random.seed"),
    (lambda: mx.random.key(2**64), "random.key"),
    (lambda: mx.set_memory_limit(-1), "set_memory_limit"),
    (lambda: mx.linspace(0, 1, 2**40), "linspace"),
])
def test_errors_name_the_op_called(call, op):
    with pytest.raises(ValueError, match=r"\[" + op.replace(".", r"\.") + r"\]"):
        call()
    still_works()


@pytest.mark.parametrize("call", [
    lambda: mx.conv1d(mx.ones((1, 4, 1)), mx.ones((1, 2, 1)), dilation=0),
    lambda: mx.conv1d(mx.ones((1, 4, 1)), mx.ones((1, 2, 1)), padding=-1),
    lambda: mx.conv2d(mx.ones((1, 4, 4, 1)), mx.ones((1, 2, 2, 1)), padding=(1, -1)),
    lambda: mx.conv_transpose1d(mx.ones((1, 4, 1)), mx.ones((1, 2, 1)), padding=-1),
    lambda: mx.conv_transpose1d(mx.ones((1, 4, 1)), mx.ones((1, 2, 1)), stride=2,
                                output_padding=2),
    lambda: mx.conv_transpose1d(mx.ones((1, 4, 1)), mx.ones((1, 2, 1)), stride=1,
                                output_padding=1),
])
def test_convolutions_refuse_bad_geometry(call):
    with pytest.raises(ValueError, match=r"\[conv"):
        call()
    y = mx.conv_transpose1d(mx.ones((1, 4, 1)), mx.ones((1, 2, 1)), stride=2, output_padding=1)
    assert y.shape == (1, 9, 1)  # (4 - 1) * 2 + 2 + 1
    still_works()


def test_nn_layers_and_optimizers_check_their_arguments():
    import tessera.nn as nn
    import tessera.optimizers as optim
    from tessera.nn.layers.pooling import sliding_windows

    with pytest.raises(ValueError, match=r"\[Linear\]"):
        nn.Linear(-1, 4)
    with pytest.raises(ValueError, match=r"\[Linear\]"):
        nn.Linear(0, 4)
    with pytest.raises(ValueError, match=r"\[sliding_windows\]"):
        sliding_windows(mx.ones((1, 4, 1)), (2,), (0,))
    model = nn.Linear(2, 3)
    opt = optim.SGD(learning_rate=0.1)
    with pytest.raises(ValueError, match=r"\[SGD.update\]"):
        opt.update(model, {"weight": mx.zeros((3, 2)), "other": mx.zeros(2)})
    opt.update(model, {"weight": mx.zeros((3, 2)), "bias": mx.zeros(3)})
    still_works()


# ---- files -------------------------------------------------------------------


def test_big_endian_numpy_arrays_and_npy_files(tmp_path):
    x = np.arange(6, dtype=">i4").reshape(2, 3)
    assert mx.array(x).tolist() == x.tolist()
    assert mx.array(x.astype(">f8")).dtype == mx.float64
    np.save(tmp_path / "be.npy", x.astype(">f4"))
    np.testing.assert_array_equal(np.array(mx.load(str(tmp_path / "be.npy"))), x)


def test_safetensors_bool_bytes_and_bad_headers(tmp_path):
    import json
    import struct

    def write(header, data):
        h = json.dumps(header).encode()
        path = tmp_path / "x.safetensors"
        path.write_bytes(struct.pack("<Q", len(h)) + h + data)
        return str(path)

    b = mx.load(write({"a": {"dtype": "BOOL", "shape": [4], "data_offsets": [0, 4]}},
                      bytes([0, 1, 2, 255])))["a"]
    assert b.sum().item() == 3 and (~b).tolist() == [True, False, False, False]
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 4) + b"\xff\xfe{}")
    with pytest.raises(ValueError, match=r"\[load\].*not valid JSON"):
        mx.load(str(bad))
    with pytest.raises(ValueError, match=r"\[save_safetensors\].*__metadata__"):
        mx.save_safetensors(str(tmp_path / "m.safetensors"), {"__metadata__": mx.ones(2)})
    still_works()


def test_conversion_errors_name_the_function_called(tmp_path, monkeypatch):
    # Every function of the core modules given a str or an object where an
    # array is expected names itself (or the op it calls), never the conversion.
    monkeypatch.chdir(tmp_path)  # savez("x") writes x.npz
    named_array = []
    modules = [(mx, ""), (mx.linalg, "linalg."), (mx.fft, "fft."), (mx.random, "random."), (mx.fast, "fast.")]
    for module, prefix in modules:
        for name in dir(module):
            f = getattr(module, name)
            if name.startswith("_") or not callable(f) or isinstance(f, type) or name in (
                    "set_default_device", "set_default_stream", "synchronize"):
                continue
            for args in (("x",), (mx.ones((2, 2)), "x"), ([object()],)):
                try:
                    f(*args)
                except (ValueError, TypeError, IndexError, OverflowError, RuntimeError) as e:
                    if str(e).startswith("[array]"):
                        named_array.append(prefix + name)
    assert named_array == []
    with pytest.raises(ValueError, match=r"^\[add\] cannot convert an object of type NoneType"):
        mx.add(mx.ones(2), None)
    with pytest.raises(ValueError, match=r"^\[multiply\] cannot convert an object of type str"):
        mx.ones(2) * "a"
    with pytest.raises(ValueError, match=r"^\[linalg::inv\]|^\[inv\]"):
        mx.linalg.inv("x")
    still_works()
