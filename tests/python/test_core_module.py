"""Dtypes, categories, finfo / iinfo, promotion helpers, devices, streams,
evaluation, memory functions, module attributes, and the error kinds of the
reference (a bad input never crashes the interpreter)."""
import math
import pickle

import numpy as np
import pytest

import tessera.core as mx

DTYPES = [mx.bool_, mx.uint8, mx.uint16, mx.uint32, mx.uint64, mx.int8, mx.int16, mx.int32,
          mx.int64, mx.float16, mx.bfloat16, mx.float32, mx.float64, mx.complex64]


def test_dtype_objects():
    sizes = [1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 8]
    assert [d.size for d in DTYPES] == sizes
    assert mx.float32 == mx.float32 and mx.float32 != mx.float16
    assert (mx.float32 == "float32") is False
    assert len(set(DTYPES)) == 14
    assert repr(mx.float32) == "tessera.core.float32" and repr(mx.bool_) == "tessera.core.bool_"
    assert pickle.loads(pickle.dumps(mx.int16)) == mx.int16


def test_categories_and_promotion():
    assert mx.issubdtype(mx.int8, mx.signedinteger)
    assert mx.issubdtype(mx.uint8, mx.integer) and not mx.issubdtype(mx.uint8, mx.signedinteger)
    assert mx.issubdtype(mx.float16, mx.inexact) and mx.issubdtype(mx.complex64, mx.complexfloating)
    assert mx.issubdtype(mx.floating, mx.number) and not mx.issubdtype(mx.number, mx.floating)
    assert mx.issubdtype(mx.float32, mx.float32) and not mx.issubdtype(mx.integer, mx.int32)
    assert mx.isdtype(mx.int8, "signed integer") and mx.isdtype(mx.float32, ("bool", "real floating"))
    assert mx.isdtype(mx.uint8, mx.uint8) and not mx.isdtype(mx.bool_, "numeric")
    assert mx.result_type(mx.int8, mx.uint8) == mx.int16
    assert mx.result_type(mx.array([1], dtype=mx.uint64), mx.int8) == mx.float32
    assert mx.result_type(mx.float16, mx.bfloat16) == mx.float32
    assert mx.can_cast(mx.int8, mx.int32) and not mx.can_cast(mx.int32, mx.int8)


def test_finfo_iinfo():
    for d, nd in [(mx.float16, np.float16), (mx.float32, np.float32), (mx.float64, np.float64)]:
        f, ref = mx.finfo(d), np.finfo(nd)
        assert f.bits == ref.bits and f.max == float(ref.max) and f.min == float(ref.min)
        assert f.eps == float(ref.eps) and f.dtype == d
    assert mx.finfo(mx.bfloat16).eps == 2.0 ** -7
    for d, nd in [(mx.int8, np.int8), (mx.uint16, np.uint16), (mx.int64, np.int64), (mx.uint64, np.uint64)]:
        i, ref = mx.iinfo(d), np.iinfo(nd)
        assert (i.min, i.max, i.bits) == (int(ref.min), int(ref.max), ref.bits)
    with pytest.raises(ValueError):
        mx.finfo(mx.int32)
    with pytest.raises(ValueError):
        mx.iinfo(mx.float32)


def test_module_attributes():
    assert mx.pi == math.pi and mx.e == math.e and math.isinf(mx.inf) and math.isnan(mx.nan)
    assert mx.newaxis is None and isinstance(mx.__version__, str)
    assert abs(mx.euler_gamma - 0.5772156649015329) < 1e-15


def test_devices_and_streams():
    cpu = mx.Device(mx.cpu)
    assert cpu == mx.cpu and cpu.type == mx.cpu and repr(cpu) == "Device(cpu, 0)"
    assert mx.is_available(mx.cpu) and mx.device_count(mx.cpu) >= 1
    assert mx.is_available(mx.gpu) == mx.cuda.is_available()
    assert isinstance(mx.device_info(), dict)
    d = mx.default_device()
    s = mx.new_stream(mx.cpu)
    assert s.device == mx.cpu and s != mx.default_stream(mx.cpu)
    with mx.stream(s):
        x = mx.arange(4) * 2
    assert x.tolist() == [0, 2, 4, 6]
    with mx.stream(mx.cpu):
        assert mx.default_device() == mx.cpu
    assert mx.default_device() == d
    y = mx.add(mx.ones(3), 1, stream=s)
    z = mx.sum(y, stream=mx.cpu)
    mx.synchronize(s)
    mx.synchronize()
    assert z.item() == 6
    old = mx.default_device()
    mx.set_default_device(mx.cpu)
    assert mx.default_device() == mx.cpu
    mx.set_default_device(old)
    with pytest.raises(ValueError):
        mx.stream(None)
    if not mx.cuda.is_available():
        with pytest.raises(Exception):
            mx.eval(mx.add(mx.ones(2), 1, stream=mx.gpu))


def test_eval_over_trees_and_memory_functions():
    a = mx.ones((256, 256))
    tree = {"x": [a + 1, (a * 2, "ignored")], "y": 3}
    mx.eval(tree)
    mx.async_eval(a - 1)
    mx.eval()
    assert mx.get_active_memory() >= 256 * 256 * 4
    assert mx.get_peak_memory() >= mx.get_active_memory()
    mx.reset_peak_memory()
    assert mx.get_cache_memory() >= 0
    prev = mx.set_cache_limit(1 << 30)
    mx.set_cache_limit(prev)
    limit = mx.get_memory_limit()
    assert mx.set_memory_limit(limit) == limit
    mx.set_wired_limit(0)
    mx.clear_cache()
    assert mx.get_cache_memory() == 0


@pytest.mark.parametrize("call,kind", [
    (lambda: mx.add(mx.zeros((2, 3)), mx.zeros((4,))), ValueError),
    (lambda: mx.reshape(mx.zeros(6), (4, 2)), ValueError),
    (lambda: mx.sum(mx.zeros((2, 3)), axis=3), IndexError),
    (lambda: mx.matmul(mx.zeros((2, 3)), mx.zeros((4, 5))), ValueError),
    (lambda: mx.zeros((2, 3))[5], IndexError),
    (lambda: mx.array([[1], [2, 3]]), ValueError),
    (lambda: mx.array(object()), ValueError),
    (lambda: mx.zeros((2,)) + "a", ValueError),
    (lambda: mx.zeros("a"), TypeError),
    (lambda: mx.transpose(mx.zeros((2, 3)), [0, 0]), ValueError),
    (lambda: mx.concatenate([mx.zeros((2, 3)), mx.zeros((2, 4))]), ValueError),
    (lambda: mx.split(mx.zeros(5), 2), ValueError),
    (lambda: mx.array([1, 2]).item(), ValueError),
    (lambda: mx.clip(mx.zeros(2), None, None), ValueError),
    (lambda: mx.array([1], dtype=mx.int8) * 1000, ValueError),
    (lambda: mx.arange(0, 1, 0), ValueError),
    (lambda: mx.pad(mx.zeros((2, 2)), [(1, 1)] * 3), ValueError),
])
def test_error_kinds(call, kind):
    with pytest.raises(kind) as info:
        call()
    assert str(info.value)


def test_error_messages_name_the_op_and_values():
    with pytest.raises(ValueError, match=r"\[add\].*\(2,3\).*\(4,\)"):
        mx.add(mx.zeros((2, 3)), mx.zeros((4,)))
    with pytest.raises(IndexError, match=r"index 5 .* axis 0 with size 2"):
        mx.zeros((2, 3))[5]
    # The interpreter survives and the arrays stay usable.
    a = mx.ones(3)
    with pytest.raises(ValueError):
        a.reshape(7)
    assert a.sum().item() == 3


def test_printoptions():
    a = mx.array([1.23456789])
    with mx.printoptions(precision=2):
        assert mx.get_printoptions().precision == 2
        assert "1.23" in repr(a) and "1.2346" not in repr(a)
    assert mx.get_printoptions().precision == -1
    mx.set_printoptions(precision=4)
    assert "1.2346" in repr(a)
    mx.set_printoptions(precision=-1)


def test_none_and_strings_as_operands_raise_value_error():
    for call in (lambda: mx.add(None, 1), lambda: mx.exp(None), lambda: mx.array([1]) * None,
                 lambda: mx.maximum("a", 1)):
        with pytest.raises(ValueError):
            call()


def test_unsupported_imports_raise():
    if hasattr(np, "float128"):
        with pytest.raises(ValueError):
            mx.array(np.zeros(3, dtype=np.float128))
    with pytest.raises(ValueError):
        mx.array(np.array(["a", "b"]))
    with pytest.raises(ValueError):
        mx.array(np.zeros(2, dtype=object))
    assert mx.array(np.float32(1.5)).dtype == mx.float32
    assert mx.array(np.int16(3)).dtype == mx.int16
