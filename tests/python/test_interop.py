"""Interop without copies: NumPy and DLPack producers and consumers, on the host and
the GPU, and the positional-only parameters of MLX."""
import ctypes
import gc
import inspect
import sys

import numpy as np
import pytest

import tessera.core as mx


def capsule_name(cap):
    get = ctypes.pythonapi.PyCapsule_GetName
    get.restype, get.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get(cap).decode()


class Producer:
    """A DLPack producer that hands out a capsule made in advance by `make`."""

    def __init__(self, x, versioned=True):
        self.x, self.versioned, self.calls = x, versioned, []

    def __dlpack__(self, stream=None, **kwargs):
        self.calls.append(dict(kwargs, stream=stream))
        if not self.versioned:
            if "max_version" in kwargs:
                raise TypeError("an old producer: no max_version")
            return self.x.__dlpack__(stream=stream)
        return self.x.__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


# ---- NumPy and host DLPack --------------------------------------------------


def test_array_constructor_copies_numpy():
    n = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = mx.array(n)
    n[0, 0] = 100
    np.testing.assert_array_equal(np.array(a), np.arange(6, dtype=np.float32).reshape(2, 3))


@pytest.mark.parametrize("view", [
    lambda n: n,
    lambda n: n[:, ::2],
    lambda n: n[::-1],
    lambda n: n.T,
    lambda n: n[1:, 1:3],
])
def test_from_dlpack_and_asarray_share_host_memory(view):
    n = np.arange(24, dtype=np.float32).reshape(4, 6)
    v = view(n)
    for a in (mx.from_dlpack(v), mx.asarray(v), mx.asarray(v, copy=False)):
        assert a.shape == v.shape and a.dtype == mx.float32
        np.testing.assert_array_equal(np.array(a), v)
        v[0, 0] += 1000  # a write through the source is seen through the import
        assert np.array(a)[0, 0] == v[0, 0]
        assert a[0, 0].item() == v[0, 0]


def test_copy_true_and_dtype_change_copy():
    n = np.arange(4, dtype=np.int32)
    copied = [mx.from_dlpack(n, copy=True), mx.asarray(n, copy=True),
              mx.asarray(n, dtype=mx.float32), mx.array(n)]
    n[:] = -1
    for c in copied:
        np.testing.assert_array_equal(np.array(c), [0, 1, 2, 3])
    assert copied[2].dtype == mx.float32
    with pytest.raises(ValueError, match="asarray"):
        mx.asarray(n, dtype=mx.float32, copy=False)
    with pytest.raises(ValueError, match="asarray"):
        mx.asarray(mx.array([1, 2]), copy=False)
    with pytest.raises(ValueError, match="from_dlpack"):
        mx.from_dlpack(3.0)


def test_asarray_of_an_array_copies_only_when_asked():
    a = mx.array([1.0, 2.0])
    assert mx.asarray(a).shape == (2,)
    b = mx.asarray(a, copy=True)
    np.testing.assert_array_equal(np.array(b), [1.0, 2.0])
    assert np.from_dlpack(b).ctypes.data != np.from_dlpack(a).ctypes.data


def ops_on(imported):
    """Chains whose only reference to the import is the graph: each op may
    donate (reuse in place) an input buffer it holds the last reference to."""
    return [
        lambda: mx.from_dlpack(imported()) + 1,
        lambda: (mx.from_dlpack(imported()) * 2 - 3) / 4,
        lambda: mx.negative(mx.from_dlpack(imported())),
        lambda: mx.exp(mx.from_dlpack(imported())),
        lambda: mx.softmax(mx.from_dlpack(imported()), axis=-1),
        lambda: mx.copy(mx.from_dlpack(imported())),
        lambda: mx.tril(mx.from_dlpack(imported())),
        lambda: mx.from_dlpack(imported()).at[0].add(5.0),
        lambda: mx.contiguous(mx.from_dlpack(imported())),
        lambda: mx.asarray(imported()).astype(mx.float32) + 0,
    ]


def test_ops_on_an_imported_array_never_write_the_source():
    n = np.arange(12, dtype=np.float32).reshape(3, 4)
    before = n.copy()
    want = [before + 1, (before * 2 - 3) / 4, -before, np.exp(before),
            np.exp(before) / np.exp(before).sum(-1, keepdims=True), before,
            np.tril(before), np.concatenate([before[:1] + 5, before[1:]]), before, before]
    for make, expect in zip(ops_on(lambda: n), want):
        r = make()
        mx.eval(r)
        np.testing.assert_allclose(np.array(r), expect, rtol=1e-6)
        np.testing.assert_array_equal(n, before)


def test_setitem_on_an_import_leaves_the_source():
    n = np.zeros(4, dtype=np.int32)
    a = mx.from_dlpack(n)
    a[1] = 7
    a += 1
    np.testing.assert_array_equal(np.array(a), [1, 8, 1, 1])
    np.testing.assert_array_equal(n, [0, 0, 0, 0])


def test_import_keeps_the_source_alive_and_lets_it_go():
    n = np.arange(5, dtype=np.float64)
    base = sys.getrefcount(n)
    a = mx.from_dlpack(n)
    b = a[1:]
    assert sys.getrefcount(n) > base
    del n
    gc.collect()
    np.testing.assert_array_equal(np.array(b), [1, 2, 3, 4])
    m = np.arange(3, dtype=np.float32)
    base = sys.getrefcount(m)
    r = mx.from_dlpack(m) * 2  # the import dies inside eval, maybe on a worker
    mx.eval(r)
    del a, b
    for _ in range(3):  # deleters queued off the Python thread run at the next pending call
        gc.collect()
    assert sys.getrefcount(m) == base
    np.testing.assert_array_equal(np.array(r), [0, 2, 4])


def test_unaligned_memory_is_copied_unless_copy_false():
    raw = np.zeros(4 * 5 + 1, dtype=np.uint8)
    n = raw[1:].view(np.float32)  # misaligned float32 elements
    n[:] = [1, 2, 3, 4, 5]
    a = mx.from_dlpack(n)
    np.testing.assert_array_equal(np.array(a), [1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="aligned"):
        mx.from_dlpack(n, copy=False)


def test_large_host_arrays_are_copied_and_borrowed_whole(device, rng):
    """Arrays of several pieces of the GPU's pinned upload ring (16 MiB), and
    not a multiple of it, on the default device: mx.array copies what the
    source holds at the call, mx.asarray reads the source itself."""
    n = rng.standard_normal((6 << 20) + 3).astype(np.float32)
    kept = n.copy()
    a = mx.array(n)
    n[:] = 0  # after the copy
    np.testing.assert_array_equal(np.array(a), kept)
    np.testing.assert_array_equal(np.array(mx.array(kept[::-3])), kept[::-3])
    b = mx.asarray(kept)
    np.testing.assert_allclose(mx.sum(b * 2).item(), 2 * kept.astype(np.float64).sum(),
                               rtol=1e-4)
    np.testing.assert_array_equal(np.array(mx.maximum(b, 0.5)), np.maximum(kept, 0.5))
    # Bool bytes other than 0 and 1 read as True after the copy too.
    raw = (rng.integers(0, 3, 20 << 20).astype(np.uint8)) * 2
    flags = mx.array(raw.view(np.bool_))
    assert flags.dtype == mx.bool_
    assert mx.sum(flags).item() == np.count_nonzero(raw)


def test_buffer_protocol_imports_copy():
    n = np.arange(24, dtype=np.int16).reshape(4, 6)
    for src, want in [(memoryview(n[:, ::2]), n[:, ::2]), (memoryview(n[::-1]), n[::-1]),
                      (memoryview(b"\x01\x02\x03"), np.array([1, 2, 3], np.uint8))]:
        a = mx.array(src)
        np.testing.assert_array_equal(np.array(a), want)
    raw = np.zeros(2 * 6 + 1, dtype=np.uint8)
    odd = raw[1:].view(np.int16)  # misaligned
    odd[:] = np.arange(6)
    b = mx.array(memoryview(odd))
    odd[:] = 0
    np.testing.assert_array_equal(np.array(b), np.arange(6))


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int16, np.int64, np.float16,
                                   np.float64, np.complex64])
def test_dlpack_round_trip_dtypes(dtype):
    n = (np.arange(6) % 3).astype(dtype).reshape(2, 3)
    a = mx.from_dlpack(n)
    back = np.from_dlpack(a)
    assert back.dtype == n.dtype
    np.testing.assert_array_equal(back, n)
    assert back.ctypes.data == n.ctypes.data  # NumPy -> Tessera -> NumPy: one buffer


def test_dlpack_capsules_versioned_and_not():
    a = mx.array([1.0, 2.0, 3.0])
    assert capsule_name(a.__dlpack__()) == "dltensor"
    assert capsule_name(a.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    assert capsule_name(a.__dlpack__(max_version=(0, 8))) == "dltensor"
    for versioned in (True, False):
        p = Producer(np.arange(4.0), versioned)
        b = mx.from_dlpack(p)
        np.testing.assert_array_equal(np.array(b), [0, 1, 2, 3])
        assert p.calls[0]["max_version"] == (1, 0) and p.calls[0]["stream"] is None
        assert len(p.calls) == (1 if versioned else 2)
    # Tessera -> Tessera through both kinds of capsule.
    c = mx.from_dlpack(Producer(mx.array([[1, 2], [3, 4]]).T, versioned=False))
    np.testing.assert_array_equal(np.array(c), [[1, 3], [2, 4]])


def test_dlpack_export_arguments():
    a = mx.array([[1.0, 2.0], [3.0, 4.0]])
    assert a.__dlpack_device__() == (1, 0)
    assert capsule_name(a.__dlpack__(dl_device=(1, 0), copy=False)) == "dltensor"
    shared = np.from_dlpack(a)
    copied = np.from_dlpack(Producer(a), copy=True)
    assert copied.ctypes.data != shared.ctypes.data
    np.testing.assert_array_equal(copied, [[1, 2], [3, 4]])
    with pytest.raises(ValueError, match="stream"):
        a.__dlpack__(stream=5)
    with pytest.raises(TypeError):
        a.__dlpack__(None)  # keyword-only
    if not mx.is_available(mx.gpu):
        with pytest.raises(BufferError, match="DLPack device"):
            a.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError):
        a.__dlpack__(dl_device=(7, 0))


def test_broadcast_export_is_read_only():
    b = mx.broadcast_to(mx.array([1, 2]), (3, 2))
    n = np.from_dlpack(b)
    np.testing.assert_array_equal(n, [[1, 2]] * 3)
    assert not n.flags.writeable
    assert memoryview(b).readonly and not np.asarray(b).flags.writeable
    assert np.asarray(mx.array([1, 2])).flags.writeable


def test_negative_strides_export_as_a_copy_unless_copy_false():
    a = mx.array(np.arange(6, dtype=np.int32))[::-1]
    np.testing.assert_array_equal(np.from_dlpack(a), [5, 4, 3, 2, 1, 0])
    shared = np.from_dlpack(Producer(a), copy=False)
    assert shared.strides == (-4,)
    np.testing.assert_array_equal(shared, [5, 4, 3, 2, 1, 0])
    assert shared.ctypes.data == np.from_dlpack(a[::-1]).ctypes.data + 5 * 4  # a's own buffer


# ---- the GPU ----------------------------------------------------------------

gpu = pytest.mark.skipif(not mx.cuda.is_available(), reason="needs a CUDA GPU")


def torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs torch with CUDA")
    return torch


@gpu
def test_gpu_arrays_export_and_import_device_memory():
    n = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = mx.exp(mx.array(n), stream=mx.gpu)
    assert x.__dlpack_device__() == (2, 0)
    assert capsule_name(x.__dlpack__(stream=None, max_version=(1, 0))) == "dltensor_versioned"
    y = mx.from_dlpack(x)  # CUDA -> CUDA through our own export
    np.testing.assert_allclose(np.array(y), np.exp(n), rtol=1e-6)
    # Host views of borrowed device memory are read-only.
    assert not np.asarray(y).flags.writeable and memoryview(y).readonly
    z = mx.from_dlpack(Producer(x.T, versioned=False))
    np.testing.assert_allclose(np.array(z), np.exp(n).T, rtol=1e-6)
    # To the host on request; copy=False cannot move it.
    h = np.from_dlpack(x, device="cpu")
    np.testing.assert_allclose(h, np.exp(n), rtol=1e-6)
    with pytest.raises(BufferError):
        mx.exp(mx.array(n), stream=mx.gpu).__dlpack__(dl_device=(1, 0), copy=False)
    # A host array exported to the GPU when asked.
    g = mx.from_dlpack(Producer(mx.array(n)), copy=False)
    assert g.__dlpack_device__() == (1, 0)
    cap = mx.array(n).__dlpack__(dl_device=(2, 0), stream=2)
    assert capsule_name(cap) == "dltensor"


@gpu
def test_gpu_ops_on_an_imported_device_array_never_write_it():
    n = np.arange(8, dtype=np.float32)
    x = mx.multiply(mx.array(n), 1.0, stream=mx.gpu)
    mx.eval(x)
    ops = [(lambda v: mx.add(v, 1, stream=mx.gpu), n + 1),
           (lambda v: mx.exp(v, stream=mx.gpu), np.exp(n)),
           (lambda v: mx.negative(mx.multiply(v, 2, stream=mx.gpu), stream=mx.gpu), -2 * n),
           (lambda v: mx.copy(v, stream=mx.gpu), n)]
    for op, want in ops:
        r = op(mx.from_dlpack(x))  # the import's only reference is the graph
        mx.eval(r)
        np.testing.assert_allclose(np.array(r), want, rtol=1e-6)
        np.testing.assert_array_equal(np.array(x), n)


@gpu
def test_torch_cuda_round_trips():
    torch = torch_cuda()
    t = torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4)[:, ::2]
    a = mx.from_dlpack(t)
    np.testing.assert_array_equal(np.array(a), t.cpu().numpy())
    b = mx.from_dlpack(t)
    t.add_(100)  # shared memory: a later read of a fresh import sees the write
    torch.cuda.synchronize()
    np.testing.assert_array_equal(np.array(b), t.cpu().numpy())
    # Ops never write the torch tensor.
    s = torch.ones(6, device="cuda")
    r = mx.add(mx.from_dlpack(s), 1, stream=mx.gpu)
    mx.eval(r)
    torch.cuda.synchronize()
    assert torch.equal(s, torch.ones(6, device="cuda"))
    np.testing.assert_array_equal(np.array(r), np.full(6, 2, np.float32))
    # Tessera -> torch on torch's current stream.
    x = mx.sqrt(mx.array(np.arange(5, dtype=np.float32)), stream=mx.gpu)
    u = torch.from_dlpack(x)
    assert u.is_cuda
    np.testing.assert_allclose(u.cpu().numpy(), np.sqrt(np.arange(5)), rtol=1e-6)


@gpu
def test_cupy_round_trip():
    cp = pytest.importorskip("cupy")
    c = cp.arange(6, dtype=cp.float32)
    a = mx.from_dlpack(c)
    np.testing.assert_array_equal(np.array(a), np.arange(6, dtype=np.float32))
    d = cp.from_dlpack(mx.multiply(a, 2, stream=mx.gpu))
    np.testing.assert_array_equal(cp.asnumpy(d), 2 * np.arange(6, dtype=np.float32))


# ---- positional-only parameters ---------------------------------------------

# MLX's '/': the parameters before it, for each function.
POSITIONAL_ONLY = {
    ("a",): """abs negative positive sign square sqrt rsqrt reciprocal exp expm1 log log2 log10
        log1p sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh arctanh degrees
        radians floor ceil trunc sigmoid erf erfinv stop_gradient conj conjugate real imag
        logical_not bitwise_invert isnan isinf isfinite isposinf isneginf round nan_to_num clip
        asarray zeros_like ones_like full_like as_strided sum prod max min mean median
        logsumexp all any var std argmax argmin count_nonzero softmax trace cumsum cumprod
        cummax cummin logcumsumexp reshape flatten unflatten squeeze expand_dims transpose
        permute_dims swapaxes moveaxis broadcast_to split pad flip diff roll diag contiguous
        view astype take take_along_axis put_along_axis slice slice_update sort argsort
        partition argpartition topk hadamard_transform""",
    ("a", "b"): """add subtract multiply divide floor_divide remainder divmod power maximum
        minimum logaddexp arctan2 equal not_equal less less_equal greater greater_equal
        logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor left_shift
        right_shift isclose allclose array_equal matmul inner outer vecdot tensordot
        block_masked_mm gather_mm segmented_mm""",
    ("x",): "from_dlpack unstack to_fp8 from_fp8",
    ("arrays",): "concatenate concat stack",
    ("array",): "repeat",
    ("a", "reps"): "tile",
    ("condition", "x", "y"): "where",
    ("sorted_sequence", "values"): "searchsorted",
    ("c", "a", "b"): "addmm",
    ("input", "weight"): "conv1d conv2d conv3d conv_transpose1d conv_general",
    ("a", "v"): "convolve",
    ("x", "w"): "quantized_matmul gather_qmm qqmm gather_qqmm",
    ("w",): "quantize dequantize",
    ("file",): "load",
}


def positional_params(fn):
    """The parameter names before '/' in the signature nanobind shows, or in a
    Python function's signature."""
    if inspect.isfunction(fn):
        names = tuple(p.name for p in inspect.signature(fn).parameters.values()
                      if p.kind == inspect.Parameter.POSITIONAL_ONLY)
        return names or None
    line = fn.__doc__.splitlines()[0]
    params, depth, cur = [], 0, ""
    for ch in line[line.index("(") + 1:]:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            params.append(cur.strip())
            cur = ""
        else:
            cur += ch
    params.append(cur.strip())
    if "/" not in params:
        return None
    return tuple(p.split(":")[0].split("=")[0].strip() for p in params[:params.index("/")])


def test_positional_only_parameters_match_the_reference():
    checked = 0
    for names, fns in POSITIONAL_ONLY.items():
        for name in fns.split():
            if not hasattr(mx, name):
                continue  # not implemented yet
            assert positional_params(getattr(mx, name)) == names, name
            checked += 1
    assert checked > 120


def test_positional_only_parameters_reject_keywords():
    x = mx.array([1.0, -2.0, 3.0])
    calls = [
        (mx.abs, {"a": x}), (mx.exp, {"a": x}), (mx.add, {"a": x, "b": x}),
        (mx.add, {"b": x}), (mx.sum, {"a": x}), (mx.reshape, {"a": x, "shape": (3,)}),
        (mx.where, {"condition": x > 0, "x": x, "y": x}), (mx.matmul, {"a": x, "b": x}),
        (mx.cumsum, {"a": x}), (mx.sort, {"a": x}), (mx.asarray, {"a": x}),
        (mx.from_dlpack, {"x": x}), (mx.concatenate, {"arrays": [x, x]}),
        (mx.round, {"a": x, "decimals": 1}), (mx.clip, {"a": x, "a_min": 0, "a_max": 1}),
    ]
    for fn, kwargs in calls:
        with pytest.raises(TypeError):
            fn(**kwargs)
    # The parameters after '/' are still keywords.
    np.testing.assert_array_equal(np.array(mx.round(x, decimals=0)), [1, -2, 3])
    np.testing.assert_array_equal(np.array(mx.sum(x, axis=0, keepdims=True)), [2])
    np.testing.assert_array_equal(np.array(mx.clip(x, a_min=0, a_max=1)), [1, 0, 1])
    np.testing.assert_array_equal(np.array(mx.reshape(x, shape=(3, 1))), [[1], [-2], [3]])
    np.testing.assert_array_equal(np.array(mx.searchsorted(mx.array([1, 3]), 2, side="right")), 1)
