"""save_gguf and load of .gguf files, against GGUF bytes built by hand with struct and
values computed by hand from ggml's block definitions (dequantize_row_* in ggml-quants.c)."""
import io
import struct

import numpy as np
import pytest

import tessera.core as mx

RNG = np.random.default_rng(0)

# ggml types and (values, bytes) per block.
F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 = 0, 1, 2, 3, 6, 7, 8, 9
Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ2_XXS = 10, 11, 12, 13, 14, 15, 16
BLOCK = {Q4_0: (32, 18), Q4_1: (32, 20), Q8_0: (32, 34), Q5_0: (32, 22), Q5_1: (32, 24),
         Q2_K: (256, 84), Q3_K: (256, 110), Q4_K: (256, 144), Q5_K: (256, 176),
         Q6_K: (256, 210), Q8_K: (256, 292)}


# --- GGUF bytes by hand -------------------------------------------------------------

def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, code, fmt, value):
    """A metadata entry holding one value of type `code` packed with `fmt`."""
    return gstr(key) + struct.pack("<I" + fmt, code, value)


def kv_array(key, code, fmt, values):
    return gstr(key) + struct.pack(f"<IIQ{len(values)}{fmt}", 9, code, len(values), *values)


def kv_str(key, s):
    return gstr(key) + struct.pack("<I", 8) + gstr(s)


def kv_strs(key, strs):
    return gstr(key) + struct.pack("<IIQ", 9, 8, len(strs)) + b"".join(map(gstr, strs))


def build(kvs, tensors, alignment=32, version=3):
    """A GGUF file: `kvs` are metadata entries, `tensors` (name, ggml dims, type, data);
    nothing follows the last tensor's data."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)) + b"".join(kvs)
    offset, blobs = 0, b""
    for i, (name, dims, t, data) in enumerate(tensors):
        head += gstr(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, t, offset)
        pad = b"\0" * (-len(data) % alignment) if i + 1 < len(tensors) else b""
        blobs += data + pad
        offset += len(data) + len(pad)
    return head + b"\0" * (-len(head) % alignment) + blobs


def f16_bytes(x):
    return np.float16(x).tobytes()


def random_blocks(t, n, f16_at=(), f32_at=()):
    """n blocks of type t: random bytes, with finite float16 (float32) fields at the
    given offsets."""
    blocks = RNG.integers(0, 256, (n, BLOCK[t][1]), dtype=np.uint8)
    for off in f16_at:
        d = (RNG.standard_normal(n) * 0.1).astype("<f2")
        blocks[:, off:off + 2] = d.view(np.uint8).reshape(n, 2)
    for off in f32_at:
        d = (RNG.standard_normal(n) * 0.01).astype("<f4")
        blocks[:, off:off + 4] = d.view(np.uint8).reshape(n, 4)
    return blocks


def half(block, at):
    return np.float32(np.frombuffer(bytes(block[at:at + 2]), "<f2")[0])


# --- ggml's dequantize_row_* for one block, element by element -----------------------

def deq_q4_0(b):
    d, qs, y = half(b, 0), b[2:18], np.zeros(32, np.float32)
    for j in range(16):
        y[j] = np.float32((int(qs[j]) & 0xF) - 8) * d
        y[j + 16] = np.float32((int(qs[j]) >> 4) - 8) * d
    return y


def deq_q4_1(b):
    d, m, qs, y = half(b, 0), half(b, 2), b[4:20], np.zeros(32, np.float32)
    for j in range(16):
        y[j] = np.float32(int(qs[j]) & 0xF) * d + m
        y[j + 16] = np.float32(int(qs[j]) >> 4) * d + m
    return y


def deq_q8_0(b):
    d = half(b, 0)
    return np.array([np.float32(int(q)) * d for q in b[2:34].view(np.int8)], np.float32)


def deq_q5(b, with_min):
    d = half(b, 0)
    m = half(b, 2) if with_min else None
    off = 4 if with_min else 2
    qh = int.from_bytes(bytes(b[off:off + 4]), "little")
    qs, y = b[off + 4:off + 20], np.zeros(32, np.float32)
    for j in range(16):
        x0 = (int(qs[j]) & 0xF) | (((qh >> j) << 4) & 0x10)
        x1 = (int(qs[j]) >> 4) | ((qh >> (j + 12)) & 0x10)
        if with_min:
            y[j], y[j + 16] = np.float32(x0) * d + m, np.float32(x1) * d + m
        else:
            y[j], y[j + 16] = np.float32(x0 - 16) * d, np.float32(x1 - 16) * d
    return y


def scale_min_k4(j, q):
    if j < 4:
        return q[j] & 63, q[j + 4] & 63
    return (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)


def deq_q2_k(b):
    scales, qs, d, dmin = [int(v) for v in b[0:16]], b[16:80], half(b, 80), half(b, 82)
    y, i, k = np.zeros(256, np.float32), 0, 0
    for n in range(2):
        q = [int(v) for v in qs[32 * n:32 * n + 32]]
        for shift in (0, 2, 4, 6):
            for part in (0, 16):
                sc = scales[i]
                i += 1
                dl, ml = d * np.float32(sc & 0xF), dmin * np.float32(sc >> 4)
                for l in range(16):
                    y[k] = dl * np.float32((q[l + part] >> shift) & 3) - ml
                    k += 1
    return y


def deq_q3_k(b):
    hm, qs, raw, d = [int(v) for v in b[0:32]], b[32:96], [int(v) for v in b[96:108]], half(b, 108)
    aux = [int.from_bytes(bytes(raw[4 * i:4 * i + 4]), "little") for i in range(3)]
    k1, k2, tmp = 0x03030303, 0x0F0F0F0F, aux[2]
    words = [(aux[0] & k2) | (((tmp >> 0) & k1) << 4), (aux[1] & k2) | (((tmp >> 2) & k1) << 4),
             ((aux[0] >> 4) & k2) | (((tmp >> 4) & k1) << 4),
             ((aux[1] >> 4) & k2) | (((tmp >> 6) & k1) << 4)]
    scales = np.frombuffer(b"".join(w.to_bytes(4, "little") for w in words), np.int8)
    y, i, k, m = np.zeros(256, np.float32), 0, 0, 1
    for n in range(2):
        q = [int(v) for v in qs[32 * n:32 * n + 32]]
        for shift in (0, 2, 4, 6):
            for part in (0, 16):
                dl = d * np.float32(int(scales[i]) - 32)
                i += 1
                for l in range(16):
                    v = ((q[l + part] >> shift) & 3) - (0 if hm[l + part] & m else 4)
                    y[k] = dl * np.float32(v)
                    k += 1
            m <<= 1
    return y


def deq_q45_k(b, five):
    d, dmin, sc = half(b, 0), half(b, 2), [int(v) for v in b[4:16]]
    qh = [int(v) for v in b[16:48]] if five else [0] * 32
    ql = [int(v) for v in (b[48:176] if five else b[16:144])]
    y, k = np.zeros(256, np.float32), 0
    for c in range(4):
        for part in range(2):
            s, m = scale_min_k4(2 * c + part, sc)
            d1, m1 = d * np.float32(s), dmin * np.float32(m)
            for l in range(32):
                q = (ql[32 * c + l] >> (4 * part)) & 0xF
                q += 16 if qh[l] & (1 << (2 * c + part)) else 0
                y[k] = d1 * np.float32(q) - m1
                k += 1
    return y


def deq_q6_k(b):
    ql, qh = [int(v) for v in b[0:128]], [int(v) for v in b[128:192]]
    sc, d = b[192:208].view(np.int8), half(b, 208)
    y = np.zeros(256, np.float32)
    for n in range(2):
        for l in range(32):
            i = l // 16
            q1 = ((ql[64 * n + l] & 0xF) | (((qh[32 * n + l] >> 0) & 3) << 4)) - 32
            q2 = ((ql[64 * n + l + 32] & 0xF) | (((qh[32 * n + l] >> 2) & 3) << 4)) - 32
            q3 = ((ql[64 * n + l] >> 4) | (((qh[32 * n + l] >> 4) & 3) << 4)) - 32
            q4 = ((ql[64 * n + l + 32] >> 4) | (((qh[32 * n + l] >> 6) & 3) << 4)) - 32
            for p, q in enumerate((q1, q2, q3, q4)):
                y[128 * n + 32 * p + l] = d * np.float32(sc[8 * n + i + 2 * p]) * np.float32(q)
    return y


def deq_q8_k(b):
    d = np.frombuffer(bytes(b[0:4]), "<f4")[0]
    return np.array([d * np.float32(int(q)) for q in b[4:260].view(np.int8)], np.float32)


DEQUANTIZE = {Q4_0: deq_q4_0, Q4_1: deq_q4_1, Q8_0: deq_q8_0,
              Q5_0: lambda b: deq_q5(b, False), Q5_1: lambda b: deq_q5(b, True),
              Q2_K: deq_q2_k, Q3_K: deq_q3_k, Q4_K: lambda b: deq_q45_k(b, False),
              Q5_K: lambda b: deq_q45_k(b, True), Q6_K: deq_q6_k, Q8_K: deq_q8_k}
FLOAT_FIELDS = {Q4_0: ([0], []), Q4_1: ([0, 2], []), Q8_0: ([0], []), Q5_0: ([0], []),
                Q5_1: ([0, 2], []), Q2_K: ([80, 82], []), Q3_K: ([108], []),
                Q4_K: ([0, 2], []), Q5_K: ([0, 2], []), Q6_K: ([208], []), Q8_K: ([], [0])}


def hand_values(t, blocks, rows):
    return np.concatenate([DEQUANTIZE[t](b) for b in blocks]).reshape(rows, -1)


def hand_pack(codes, bits):
    """Rows of codes as one bit stream each, value i at bits [i * bits, (i + 1) * bits),
    cut into uint32 words from the low bits."""
    rows = []
    for row in codes:
        stream = 0
        for i, c in enumerate(row):
            stream |= int(c) << (i * bits)
        rows.append([(stream >> (32 * w)) & 0xFFFFFFFF for w in range(len(row) * bits // 32)])
    return np.array(rows, np.uint32)


# --- a file with metadata of every type and F32, F16, Q4_0, Q4_1 and Q8_0 tensors ----

F32_DATA = RNG.standard_normal((3, 5)).astype(np.float32)
F16_DATA = RNG.standard_normal((2, 3, 4)).astype(np.float16)
QUANT = {t: random_blocks(t, 6, *FLOAT_FIELDS[t]) for t in (Q4_0, Q4_1, Q8_0)}
METADATA = [
    kv("u8", 0, "B", 200), kv("i8", 1, "b", -7), kv("u16", 2, "H", 60000),
    kv("i16", 3, "h", -30000), kv("u32", 4, "I", 4000000000), kv("i32", 5, "i", -2**31),
    kv("f32", 6, "f", 1.5), kv("flag", 7, "B", 1), kv("u64", 10, "Q", 2**64 - 1),
    kv("i64", 11, "q", -2**63), kv("f64", 12, "d", 0.1),
    kv_str("general.name", "tïny"), kv_strs("tokens", ["<s>", "héllo", ""]),
    kv_strs("none", []), kv_array("ids", 4, "I", [1, 2, 4000000000]),
    kv_array("weights", 6, "f", [0.5, -2.0]), kv_array("flags", 7, "B", [1, 0, 1]),
]
TENSORS = [
    ("f32", (5, 3), F32, F32_DATA.tobytes()),
    ("blk.0.f16", (4, 3, 2), F16, F16_DATA.tobytes()),
    ("blk.0.attn_q.weight", (64, 3), Q4_0, QUANT[Q4_0].tobytes()),
    ("blk.0.ffn_up.weight", (64, 3), Q4_1, QUANT[Q4_1].tobytes()),
    ("output", (96, 2), Q8_0, QUANT[Q8_0].tobytes()),
]
FILE = build(METADATA, TENSORS)


def test_metadata_of_every_type(tmp_path):
    (tmp_path / "m.gguf").write_bytes(FILE)
    _, meta = mx.load(str(tmp_path / "m.gguf"), return_metadata=True)
    scalars = {"u8": (mx.uint8, 200), "i8": (mx.int8, -7), "u16": (mx.uint16, 60000),
               "i16": (mx.int16, -30000), "u32": (mx.uint32, 4000000000),
               "i32": (mx.int32, -2**31), "f32": (mx.float32, 1.5), "flag": (mx.bool_, True),
               "u64": (mx.uint64, 2**64 - 1), "i64": (mx.int64, -2**63),
               "f64": (mx.float64, 0.1)}
    for k, (dtype, value) in scalars.items():
        assert isinstance(meta[k], mx.array) and meta[k].dtype == dtype, k
        assert meta[k].shape == () and meta[k].item() == value, k
    assert meta["general.name"] == "tïny"
    assert meta["tokens"] == ["<s>", "héllo", ""]
    assert meta["none"] == []
    for k, dtype, values in [("ids", mx.uint32, [1, 2, 4000000000]),
                             ("weights", mx.float32, [0.5, -2.0]),
                             ("flags", mx.bool_, [True, False, True])]:
        assert meta[k].dtype == dtype and meta[k].shape == (len(values),), k
        assert np.array(meta[k]).tolist() == values, k
    assert list(meta) == [e[0] for e in scalars.items()] + [
        "general.name", "tokens", "none", "ids", "weights", "flags"]


def test_plain_tensors_load_in_numpy_order(tmp_path):
    (tmp_path / "m.gguf").write_bytes(FILE)
    arrays = mx.load(str(tmp_path / "m.gguf"))
    assert arrays["f32"].dtype == mx.float32 and arrays["f32"].shape == (3, 5)
    np.testing.assert_array_equal(np.array(arrays["f32"]), F32_DATA)
    assert arrays["blk.0.f16"].dtype == mx.float16 and arrays["blk.0.f16"].shape == (2, 3, 4)
    np.testing.assert_array_equal(np.array(arrays["blk.0.f16"]), F16_DATA)


@pytest.mark.parametrize("t,name,base,bits,shape", [
    (Q4_0, "blk.0.attn_q.weight", "blk.0.attn_q", 4, (3, 64)),
    (Q4_1, "blk.0.ffn_up.weight", "blk.0.ffn_up", 4, (3, 64)),
    (Q8_0, "output", "output", 8, (2, 96)),
])
def test_q4_0_q4_1_q8_0_load_as_affine_triples(tmp_path, t, name, base, bits, shape):
    (tmp_path / "m.gguf").write_bytes(FILE)
    arrays = mx.load(str(tmp_path / "m.gguf"))
    blocks = QUANT[t]
    rows, cols = shape
    d = np.array([half(b, 0) for b in blocks])
    if t == Q4_0:
        codes = [list((b[2:18] & 0xF)) + list(b[2:18] >> 4) for b in blocks]
        scales, biases = d, -8 * d
    elif t == Q4_1:
        codes = [list((b[4:20] & 0xF)) + list(b[4:20] >> 4) for b in blocks]
        scales, biases = d, np.array([half(b, 2) for b in blocks])
    else:
        codes = [[int(q) + 128 for q in b[2:34].view(np.int8)] for b in blocks]
        scales, biases = d, -128 * d
    codes = np.array(codes).reshape(rows, cols)
    w, s, b = arrays[name], arrays[base + ".scales"], arrays[base + ".biases"]
    assert w.dtype == mx.uint32 and w.shape == (rows, cols * bits // 32)
    np.testing.assert_array_equal(np.array(w), hand_pack(codes, bits))
    assert s.dtype == b.dtype == mx.float16 and s.shape == b.shape == (rows, cols // 32)
    np.testing.assert_array_equal(np.array(s), scales.astype(np.float16).reshape(rows, -1))
    np.testing.assert_array_equal(np.array(b), biases.astype(np.float16).reshape(rows, -1))
    want = hand_values(t, blocks, rows)
    got = mx.dequantize(w, s, b, group_size=32, bits=bits)
    assert got.dtype == mx.float16
    np.testing.assert_array_equal(np.array(got), want.astype(np.float16))


def test_the_loaded_names(tmp_path):
    (tmp_path / "m.gguf").write_bytes(FILE)
    assert sorted(mx.load(str(tmp_path / "m.gguf"))) == sorted([
        "f32", "blk.0.f16", "blk.0.attn_q.weight", "blk.0.attn_q.scales",
        "blk.0.attn_q.biases", "blk.0.ffn_up.weight", "blk.0.ffn_up.scales",
        "blk.0.ffn_up.biases", "output", "output.scales", "output.biases"])


@pytest.mark.parametrize("t", [Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K])
def test_other_quantized_types_load_dequantized_to_float16(tmp_path, t):
    per, _ = BLOCK[t]
    blocks = random_blocks(t, 4, *FLOAT_FIELDS[t])
    data = build([], [("x.weight", (2 * per, 2), t, blocks.tobytes())])
    (tmp_path / "q.gguf").write_bytes(data)
    arrays = mx.load(str(tmp_path / "q.gguf"))
    assert list(arrays) == ["x.weight"]
    got = arrays["x.weight"]
    assert got.dtype == mx.float16 and got.shape == (2, 2 * per)
    np.testing.assert_array_equal(np.array(got), hand_values(t, blocks, 2).astype(np.float16))


def test_load_from_a_file_object_and_with_format(tmp_path):
    arrays, meta = mx.load(io.BytesIO(FILE), format="gguf", return_metadata=True)
    np.testing.assert_array_equal(np.array(arrays["f32"]), F32_DATA)
    assert meta["tokens"] == ["<s>", "héllo", ""]
    (tmp_path / "m.bin").write_bytes(FILE)
    np.testing.assert_array_equal(np.array(mx.load(str(tmp_path / "m.bin"), format="gguf")
                                           ["blk.0.f16"]), F16_DATA)


def test_alignment_and_version_2(tmp_path):
    x = np.arange(6, dtype=np.float32)
    meta = [kv("general.alignment", 4, "I", 64)]
    for version in (2, 3):
        data = build(meta, [("a", (3,), F32, x[:3].tobytes()), ("b", (3,), F32, x[3:].tobytes())],
                     alignment=64, version=version)
        arrays, got = mx.load(io.BytesIO(data), format="gguf", return_metadata=True)
        np.testing.assert_array_equal(np.array(arrays["b"]), x[3:])
        assert got["general.alignment"].item() == 64


# --- save_gguf ----------------------------------------------------------------------

def parse_by_hand(path):
    """(version, metadata count, [(name, ggml dims, type, offset)], data start, bytes)."""
    data = path.read_bytes()
    assert data[:4] == b"GGUF"
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", data, 4)
    pos = 24

    def string():
        nonlocal pos
        n, = struct.unpack_from("<Q", data, pos)
        pos += 8 + n
        return data[pos - n:pos].decode()

    def skip_value(vtype):
        nonlocal pos
        sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
        if vtype == 8:
            string()
        elif vtype == 9:
            etype, count = struct.unpack_from("<IQ", data, pos)
            pos += 12
            for _ in range(count):
                skip_value(etype)
        else:
            pos += sizes[vtype]

    for _ in range(n_kv):
        string()
        vtype, = struct.unpack_from("<I", data, pos)
        pos += 4
        skip_value(vtype)
    infos = []
    for _ in range(n_tensors):
        name = string()
        n_dims, = struct.unpack_from("<I", data, pos)
        dims = struct.unpack_from(f"<{n_dims}Q", data, pos + 4)
        t, offset = struct.unpack_from("<IQ", data, pos + 4 + 8 * n_dims)
        pos += 4 + 8 * n_dims + 12
        infos.append((name, dims, t, offset))
    return version, n_kv, infos, pos + (-pos % 32), data


SAVE_DTYPES = [(mx.float32, np.float32, 0), (mx.float16, np.float16, 1),
               (mx.float64, np.float64, 28), (mx.int8, np.int8, 24), (mx.int16, np.int16, 25),
               (mx.int32, np.int32, 26), (mx.int64, np.int64, 27)]


def test_save_gguf_layout_by_hand(tmp_path):
    arrays = {f"t{i}": mx.array((RNG.standard_normal((2, 3, 5)) * 30).astype(np_dtype))
              for i, (_, np_dtype, _) in enumerate(SAVE_DTYPES)}
    bf = RNG.standard_normal((4, 3)).astype(np.float32)
    arrays["bf"] = mx.array(bf).astype(mx.bfloat16)
    mx.save_gguf(str(tmp_path / "w"), arrays, {"name": "w"})  # ".gguf" appended
    version, n_kv, infos, start, data = parse_by_hand(tmp_path / "w.gguf")
    assert version == 3 and n_kv == 1 and len(infos) == len(arrays)
    for (name, dims, t, offset), (_, np_dtype, code) in zip(infos, SAVE_DTYPES):
        assert dims == (5, 3, 2) and t == code and offset % 32 == 0
        x = np.frombuffer(data, np.dtype(np_dtype).newbyteorder("<"), 30, start + offset)
        np.testing.assert_array_equal(x.reshape(2, 3, 5), np.array(arrays[name]))
    name, dims, t, offset = infos[-1]
    assert (name, dims, t) == ("bf", (3, 4), 30)
    bits = np.frombuffer(data, "<u2", 12, start + offset)
    want = np.array(arrays["bf"].astype(mx.float32)).view(np.uint32) >> 16
    np.testing.assert_array_equal(bits, want.reshape(-1))


@pytest.mark.parametrize("dtype,np_dtype,code", SAVE_DTYPES)
@pytest.mark.parametrize("shape", [(), (7,), (3, 4), (2, 1, 3, 2)])
def test_round_trip_of_every_dtype(tmp_path, dtype, np_dtype, code, shape):
    x = np.asarray(RNG.standard_normal(shape) * 40).astype(np_dtype)
    mx.save_gguf(tmp_path / "r.gguf", {"x": mx.array(x)})
    got = mx.load(str(tmp_path / "r.gguf"))["x"]
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_array_equal(np.array(got), x)


def test_round_trip_of_bfloat16(tmp_path):
    x = mx.array(RNG.standard_normal((3, 33)).astype(np.float32)).astype(mx.bfloat16)
    mx.save_gguf(str(tmp_path / "b.gguf"), {"x": x})
    got = mx.load(str(tmp_path / "b.gguf"))["x"]
    assert got.dtype == mx.bfloat16 and got.shape == (3, 33)
    assert mx.array_equal(got, x).item()


def test_round_trip_of_metadata(tmp_path):
    meta = {"s": "naïve", "strs": ["a", "", "ünï"], "empty": [],
            "b": mx.array(True), "bs": mx.array([True, False]),
            "u8": mx.array(np.array(250, np.uint8)), "i8": mx.array(np.array([-1, 2], np.int8)),
            "u16": mx.array(np.array(65535, np.uint16)), "i16": mx.array(np.array([-5], np.int16)),
            "u32": mx.array(np.array([1, 4000000000], np.uint32)),
            "i32": mx.array(np.array(-9, np.int32)),
            "f32": mx.array(np.array([0.25, 3.0], np.float32)),
            "u64": mx.array(np.array(2**64 - 2, np.uint64)),
            "i64": mx.array(np.array([-2**62, 5], np.int64)), "f64": mx.array(np.array(0.1)),
            "f64s": mx.array(np.array([], np.float64))}
    mx.save_gguf(str(tmp_path / "m.gguf"), {"w": mx.zeros((2,))}, meta)
    arrays, got = mx.load(str(tmp_path / "m.gguf"), return_metadata=True)
    assert list(arrays) == ["w"] and list(got) == list(meta)
    for k, v in meta.items():
        if isinstance(v, mx.array):
            assert isinstance(got[k], mx.array)
            assert got[k].dtype == v.dtype and got[k].shape == v.shape, k
            np.testing.assert_array_equal(np.array(got[k]), np.array(v))
        else:
            assert got[k] == v, k


def test_save_gguf_with_an_alignment(tmp_path):
    x, y = np.arange(1000, 1005, dtype=np.int16), np.arange(2000, 2005, dtype=np.int16)
    meta = {"general.alignment": mx.array(np.array(64, np.uint32))}
    mx.save_gguf(str(tmp_path / "a.gguf"), {"x": mx.array(x), "y": mx.array(y)}, meta)
    data = (tmp_path / "a.gguf").read_bytes()
    at_x, at_y = data.index(x.astype("<i2").tobytes()), data.index(y.astype("<i2").tobytes())
    assert at_x % 64 == 0 and at_y == at_x + 64
    np.testing.assert_array_equal(np.array(mx.load(str(tmp_path / "a.gguf"))["y"]), y)
    with pytest.raises(ValueError, match=r"\[save_gguf\] general.alignment"):
        mx.save_gguf(str(tmp_path / "b.gguf"), {}, {"general.alignment": mx.array(48)})


def test_save_gguf_then_load_of_no_tensors(tmp_path):
    mx.save_gguf(str(tmp_path / "e.gguf"), {})
    assert mx.load(str(tmp_path / "e.gguf")) == {}


# --- errors -------------------------------------------------------------------------

def test_metadata_arrays_must_be_scalars_or_1d(tmp_path):
    with pytest.raises(ValueError, match=r"\[save_gguf\].*'m'.*scalar or 1-D"):
        mx.save_gguf(str(tmp_path / "x"), {}, {"m": mx.zeros((2, 2))})


@pytest.mark.parametrize("value", [mx.array(np.array(1, np.float16)),
                                   mx.array(np.zeros(2, np.complex64))])
def test_metadata_dtype_without_gguf_type(tmp_path, value):
    with pytest.raises(ValueError, match=rf"\[save_gguf\].*'m'.*{value.dtype}"):
        mx.save_gguf(str(tmp_path / "x"), {}, {"m": value})


@pytest.mark.parametrize("value", [3, 1.5, ["a", 1], ("a",)])
def test_metadata_values_of_other_kinds(tmp_path, value):
    with pytest.raises(ValueError, match=r"\[save_gguf\].*'m'"):
        mx.save_gguf(str(tmp_path / "x"), {}, {"m": value})


@pytest.mark.parametrize("dtype", [mx.bool_, mx.uint8, mx.uint16, mx.uint32, mx.uint64,
                                   mx.complex64])
def test_tensor_dtype_without_gguf_type(tmp_path, dtype):
    with pytest.raises(ValueError, match=rf"\[save_gguf\].*'bad'.*{dtype}"):
        mx.save_gguf(str(tmp_path / "x"), {"ok": mx.zeros((2,)), "bad": mx.zeros((2,), dtype)})
    assert not (tmp_path / "x.gguf").exists()


def test_save_gguf_takes_a_path_only():
    with pytest.raises(ValueError, match=r"\[save_gguf\].*path"):
        mx.save_gguf(io.BytesIO(), {"x": mx.zeros((2,))})


def test_every_truncation_is_a_clear_error(tmp_path):
    for n in range(len(FILE)):
        with pytest.raises(ValueError, match="gguf"):
            mx.load(io.BytesIO(FILE[:n]), format="gguf")
    for n in (0, 3, 30, len(FILE) - 1):
        (tmp_path / "t.gguf").write_bytes(FILE[:n])
        with pytest.raises(ValueError, match=r"\[load\].*gguf"):
            mx.load(str(tmp_path / "t.gguf"))


def test_not_a_gguf_file_and_big_endian(tmp_path):
    with pytest.raises(ValueError, match=r"\[load\] not a gguf file"):
        mx.load(io.BytesIO(b"GGML" + FILE[4:]), format="gguf")
    swapped = FILE[:4] + struct.pack(">I", 3) + FILE[8:]
    with pytest.raises(ValueError, match=r"\[load\] gguf version"):
        mx.load(io.BytesIO(swapped), format="gguf")


@pytest.mark.parametrize("t,name", [(IQ2_XXS, "IQ2_XXS"), (Q8_1, "Q8_1"), (99, "unknown")])
def test_unsupported_ggml_types_are_refused_by_name(t, name):
    data = build([], [("blk.3.ffn_down.weight", (256, 1), t, bytes(1024))])
    with pytest.raises(ValueError, match=rf"'blk\.3\.ffn_down\.weight'.*{name} \({t}\)"):
        mx.load(io.BytesIO(data), format="gguf")


def test_quantized_rows_must_hold_whole_blocks():
    data = build([], [("w", (48, 2), Q4_0, bytes(18 * 3))])
    with pytest.raises(ValueError, match=r"'w'.*Q4_0.*multiple of 32"):
        mx.load(io.BytesIO(data), format="gguf")


def test_nested_metadata_arrays_are_refused():
    entry = gstr("nested") + struct.pack("<IIQ", 9, 9, 1) + struct.pack("<IQB", 0, 1, 7)
    with pytest.raises(ValueError, match=r"\[load\] gguf metadata 'nested'.*arrays"):
        mx.load(io.BytesIO(build([entry], [])), format="gguf")
