"""save, savez, savez_compressed, save_safetensors and load, against NumPy's own
readers and writers and the safetensors layout written out by hand."""
import io
import json
import struct

import numpy as np
import pytest

import tessera.core as mx

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64,
          np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]


def sample(dtype, shape=(3, 4), seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 50
    return (x > 0) if dtype == np.bool_ else x.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_save_writes_what_numpy_reads(tmp_path, dtype):
    x = sample(dtype)
    mx.save(str(tmp_path / "a"), mx.array(x))  # ".npy" appended
    got = np.load(tmp_path / "a.npy")
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_load_reads_what_numpy_saves(tmp_path, dtype):
    x = sample(dtype, (2, 3, 5), seed=1)
    np.save(tmp_path / "b.npy", x)
    got = mx.load(str(tmp_path / "b.npy"))
    assert isinstance(got, mx.array)
    np.testing.assert_array_equal(np.array(got), x)


def test_save_of_a_view_saves_its_values(tmp_path):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    mx.save(tmp_path / "v.npy", mx.array(x)[::2, 1::2].T)
    np.testing.assert_array_equal(np.load(tmp_path / "v.npy"), x[::2, 1::2].T)


def test_savez_names_and_numpy_round_trip(tmp_path):
    a, b, c = sample(np.float32), sample(np.int32, (5,)), sample(np.float64, (2, 2))
    mx.savez(str(tmp_path / "z"), mx.array(a), mx.array(b), weights=mx.array(c))
    with np.load(tmp_path / "z.npz") as data:
        assert sorted(data.files) == ["arr_0", "arr_1", "weights"]
        np.testing.assert_array_equal(data["arr_0"], a)
        np.testing.assert_array_equal(data["arr_1"], b)
        np.testing.assert_array_equal(data["weights"], c)
    got = mx.load(str(tmp_path / "z.npz"))
    assert sorted(got) == ["arr_0", "arr_1", "weights"]
    np.testing.assert_array_equal(np.array(got["weights"]), c)


def test_savez_compressed_is_compressed_and_reads_back(tmp_path):
    x = np.zeros((256, 256), np.float32)
    mx.savez(tmp_path / "plain.npz", x=mx.array(x))
    mx.savez_compressed(tmp_path / "small.npz", x=mx.array(x))
    assert (tmp_path / "small.npz").stat().st_size < (tmp_path / "plain.npz").stat().st_size / 10
    np.testing.assert_array_equal(np.array(mx.load(str(tmp_path / "small.npz"))["x"]), x)


def test_savez_keyword_that_collides_with_a_positional_name_raises(tmp_path):
    with pytest.raises(ValueError, match="arr_0"):
        mx.savez(tmp_path / "c.npz", mx.zeros(2), arr_0=mx.ones(2))


def test_file_objects(tmp_path):
    x = sample(np.float32)
    buf = io.BytesIO()
    mx.save(buf, mx.array(x))
    buf.seek(0)
    np.testing.assert_array_equal(np.array(mx.load(buf, format="npy")), x)
    with open(tmp_path / "f.npy", "wb") as f:
        mx.save(f, mx.array(x))
    with open(tmp_path / "f.npy", "rb") as f:
        np.testing.assert_array_equal(np.array(mx.load(f)), x)  # format from f.name


def read_safetensors_by_hand(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    return header, raw[8 + n:]


def test_safetensors_layout_and_round_trip(tmp_path):
    arrays = {name: mx.array(sample(dtype, seed=i)) for i, (name, dtype) in
              enumerate([("f32", np.float32), ("i64", np.int64), ("b", np.bool_),
                         ("f16", np.float16)])}
    mx.save_safetensors(str(tmp_path / "w"), arrays, metadata={"format": "mlx"})
    header, body = read_safetensors_by_hand(tmp_path / "w.safetensors")
    assert header["__metadata__"] == {"format": "mlx"}
    codes = {"f32": ("F32", "<f4"), "i64": ("I64", "<i8"), "b": ("BOOL", "?"),
             "f16": ("F16", "<f2")}
    for name, (code, np_dtype) in codes.items():
        info = header[name]
        assert info["dtype"] == code and info["shape"] == [3, 4]
        start, end = info["data_offsets"]
        got = np.frombuffer(body[start:end], dtype=np_dtype).reshape(3, 4)
        np.testing.assert_array_equal(got, np.array(arrays[name]))
    loaded, metadata = mx.load(str(tmp_path / "w.safetensors"), return_metadata=True)
    assert metadata == {"format": "mlx"}
    for name, a in arrays.items():
        assert loaded[name].dtype == a.dtype
        np.testing.assert_array_equal(np.array(loaded[name]), np.array(a))


def test_safetensors_bfloat16_is_the_top_half_of_float32(tmp_path):
    x = np.array([1.0, -2.5, 3.140625, 65280.0], np.float32)  # exact in bfloat16
    mx.save_safetensors(tmp_path / "bf.safetensors", {"x": mx.array(x).astype(mx.bfloat16)})
    header, body = read_safetensors_by_hand(tmp_path / "bf.safetensors")
    assert header["x"]["dtype"] == "BF16"
    np.testing.assert_array_equal(np.frombuffer(body, "<u2"), x.view(np.uint32) >> 16)
    got = mx.load(str(tmp_path / "bf.safetensors"))["x"]
    assert got.dtype == mx.bfloat16
    np.testing.assert_array_equal(np.array(got.astype(mx.float32)), x)


def test_bad_input_is_refused_clearly(tmp_path):
    with pytest.raises(ValueError, match=r"\[load\] format 'txt'"):
        mx.load(str(tmp_path / "m.txt"))
    mx.save(tmp_path / "a.npy", mx.zeros(3))
    with pytest.raises(ValueError, match="metadata"):
        mx.load(str(tmp_path / "a.npy"), return_metadata=True)
    with pytest.raises(ValueError, match="bfloat16"):
        mx.save(tmp_path / "bf.npy", mx.zeros(3, dtype=mx.bfloat16))
    with pytest.raises(ValueError, match="metadata"):
        mx.save_safetensors(tmp_path / "m.safetensors", {"x": mx.zeros(2)}, metadata={"a": 1})
    with pytest.raises(TypeError, match="dict"):
        mx.save_safetensors(tmp_path / "m.safetensors", [mx.zeros(2)])


@pytest.mark.parametrize("writer", [np.savez, np.savez_compressed])
def test_load_reads_what_numpy_savez_writes(tmp_path, writer):
    a, b = sample(np.float32), sample(np.int64, (0, 3))
    c = np.asfortranarray(sample(np.float64, (3, 5), seed=2))
    writer(tmp_path / "n.npz", a=a, b=b, c=c)
    got = mx.load(str(tmp_path / "n.npz"))
    assert list(got) == ["a", "b", "c"]
    for name, x in [("a", a), ("b", b), ("c", c)]:
        assert got[name].shape == x.shape
        np.testing.assert_array_equal(np.array(got[name]), x)


def test_load_reads_big_endian_and_fortran_order(tmp_path):
    x = sample(np.float64, (4, 3), seed=3)
    np.save(tmp_path / "be.npy", x.astype(">f8"))
    np.save(tmp_path / "f.npy", np.asfortranarray(x))
    np.testing.assert_array_equal(np.array(mx.load(str(tmp_path / "be.npy"))), x)
    np.testing.assert_array_equal(np.array(mx.load(str(tmp_path / "f.npy"))), x)


def test_a_failed_save_leaves_the_file_untouched(tmp_path):
    mx.save(tmp_path / "a.npy", mx.arange(3))
    before = (tmp_path / "a.npy").read_bytes()
    with pytest.raises(ValueError, match="bfloat16"):
        mx.save(tmp_path / "a.npy", mx.zeros(3, dtype=mx.bfloat16))
    with pytest.raises(ValueError, match="bfloat16"):
        mx.savez(tmp_path / "a.npy", x=mx.zeros(3, dtype=mx.bfloat16))
    assert (tmp_path / "a.npy").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy"]


def test_corrupt_files_name_the_file(tmp_path):
    x = mx.arange(10, dtype=mx.float32)
    mx.save_safetensors(tmp_path / "w.safetensors", {"x": x})
    data = (tmp_path / "w.safetensors").read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[:-4])
    with pytest.raises(ValueError, match=r"\[load\].*cut\.safetensors"):
        mx.load(str(tmp_path / "cut.safetensors"))
    (tmp_path / "bad.npz").write_bytes(b"not a zip file at all")
    with pytest.raises(ValueError, match=r"bad\.npz.*not a zip archive"):
        mx.load(str(tmp_path / "bad.npz"))
    with pytest.raises(RuntimeError, match="missing.npy"):
        mx.load(str(tmp_path / "missing.npy"))
