"""GGUF files for tessera.core: save_gguf, and the reader behind load(..., format="gguf").
A GGUF file (version 3, little-endian) is a header, typed key/value metadata, tensor
infos (name, dims in ggml order, ggml type, offset) and the aligned tensor data.
Q4_0, Q4_1 and Q8_0 tensors load as affine-quantized triples (packed uint32 weight,
float16 scales and biases, group size 32); the other quantized types that ggml's
reference code dequantizes and that are implemented here load as float16."""

import os
import struct

import numpy as np

_mx = None  # tessera.core, set by install()

_MAGIC = b"GGUF"
_VERSION = 3
_ALIGNMENT = 32

# Metadata value types.
_STRING, _ARRAY = 8, 9
_META_DTYPES = {
    0: "uint8", 1: "int8", 2: "uint16", 3: "int16", 4: "uint32", 5: "int32",
    6: "float32", 7: "bool_", 10: "uint64", 11: "int64", 12: "float64",
}

# ggml tensor types held as plain arrays: type -> dtype name.
_PLAIN = {
    0: "float32", 1: "float16", 30: "bfloat16", 28: "float64",
    24: "int8", 25: "int16", 26: "int32", 27: "int64",
}
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8,
             "int8": 1, "int16": 2, "int32": 4, "int64": 8}

_TYPE_NAMES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1",
    10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS",
    17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S",
    23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M",
    30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4",
}

# Quantized types read here: type -> (values per block, bytes per block).
_BLOCKS = {
    2: (32, 18), 3: (32, 20), 8: (32, 34),
    6: (32, 22), 7: (32, 24),
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
    15: (256, 292),
}


def _type_name(t):
    return f"{_TYPE_NAMES.get(t, 'unknown')} ({t})"


class _Reader:
    """Little-endian values off a byte buffer, refusing to read past its end."""

    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def need(self, n, what):
        if n > len(self.buf) - self.pos:
            raise ValueError(f"[load] truncated gguf file: {what} needs {n} bytes at byte "
                             f"{self.pos}, the file has {len(self.buf)}")

    def unpack(self, fmt, what):
        n = struct.calcsize(fmt)
        self.need(n, what)
        out = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return out[0] if len(out) == 1 else out

    def array(self, dtype, count, what):
        dtype = np.dtype(dtype)
        self.need(count * dtype.itemsize, what)
        out = np.frombuffer(self.buf, dtype=dtype, count=count, offset=self.pos)
        self.pos += count * dtype.itemsize
        return out

    def string(self, what):
        n = self.unpack("<Q", what)
        self.need(n, what)
        s = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8", "surrogateescape")
        self.pos += n
        return s


def _meta_array(r, vtype, count, key):
    """The `count` items of type `vtype` of a metadata value: a list of str, or a NumPy
    array."""
    if vtype == _STRING:
        return [r.string(f"metadata {key!r}") for _ in range(count)]
    if vtype not in _META_DTYPES:
        kind = "an array of arrays" if vtype == _ARRAY else f"of unknown value type {vtype}"
        raise ValueError(f"[load] gguf metadata {key!r} is {kind}, which is not supported")
    name = _META_DTYPES[vtype]
    if name == "bool_":
        return r.array("u1", count, f"metadata {key!r}") != 0
    return r.array(np.dtype(name).newbyteorder("<"), count, f"metadata {key!r}").astype(name)


def _meta_value(r, key):
    """The value of one metadata key: a str, a list of str, or a 0-d or 1-D NumPy array."""
    vtype = r.unpack("<I", f"the type of metadata {key!r}")
    if vtype == _STRING:
        return r.string(f"metadata {key!r}")
    if vtype == _ARRAY:
        etype, count = r.unpack("<IQ", f"the array header of metadata {key!r}")
        return _meta_array(r, etype, count, key)
    return _meta_array(r, vtype, 1, key).reshape(())


def _f16(blocks, start):
    """The float16 at byte `start` of each block, as a (n, 1) float32 column."""
    return np.ascontiguousarray(blocks[:, start:start + 2]).view("<f2").astype(np.float32)


def _nibbles(qs):
    """Values 0..2n-1 of n bytes: the low nibbles, then the high nibbles."""
    return np.concatenate([qs & 0xF, qs >> 4], axis=1)


def _pack(codes, bits):
    """Rows of 32 * k codes packed into uint32 words, first value in the lowest bits."""
    codes = codes.astype(np.uint32)
    per = 32 // bits
    words = np.zeros((codes.shape[0], codes.shape[1] // per), np.uint32)
    for i in range(per):
        words |= codes[:, i::per] << np.uint32(i * bits)
    return words


def _affine(t, blocks):
    """(bits, packed codes, scales, biases) of Q4_0, Q4_1 and Q8_0 blocks."""
    d = _f16(blocks, 0)
    if t == 2:
        return 4, _pack(_nibbles(blocks[:, 2:]), 4), d, -8 * d
    if t == 3:
        return 4, _pack(_nibbles(blocks[:, 4:]), 4), d, _f16(blocks, 2)
    codes = blocks[:, 2:] ^ np.uint8(0x80)  # int8 q as q + 128
    return 8, _pack(codes, 8), d, -128 * d


def _scale_min_k4(s):
    """The 8 6-bit (scale, min) pairs of the 12 packed bytes of Q4_K and Q5_K blocks."""
    s = s.astype(np.int32)
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 0xF) | ((s[:, 0:4] >> 6) << 4)], 1)
    m = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], 1)
    return sc.astype(np.float32), m.astype(np.float32)


def _bits2(q, halves):
    """The 2-bit fields of the 32-byte chunks of q (n, 32 * halves), in ggml's order:
    for each chunk, shifts 0, 2, 4, 6, each the 32 bytes in order."""
    q = q.reshape(q.shape[0], halves, 1, 32)
    shifts = np.array([0, 2, 4, 6], np.uint8).reshape(1, 1, 4, 1)
    return ((q >> shifts) & 3).reshape(q.shape[0], -1)


def _dequantize(t, blocks):
    """The float32 values (n, values per block) of ggml's dequantize_row_* for type t."""
    n = blocks.shape[0]
    if t in (6, 7):  # Q5_0, Q5_1
        off = 2 if t == 6 else 4
        qh = np.ascontiguousarray(blocks[:, off:off + 4]).view("<u4")
        high = ((qh >> np.arange(32, dtype=np.uint32)) & 1) << 4
        q = (_nibbles(blocks[:, off + 4:]) | high).astype(np.float32)
        d = _f16(blocks, 0)
        return (q - 16) * d if t == 6 else q * d + _f16(blocks, 2)
    if t == 10:  # Q2_K: scales[16], qs[64], d, dmin
        d, dmin = _f16(blocks, 80), _f16(blocks, 82)
        sc = blocks[:, 0:16]
        dl = (d * (sc & 0xF).astype(np.float32))[:, :, None]
        ml = (dmin * (sc >> 4).astype(np.float32))[:, :, None]
        q = _bits2(blocks[:, 16:80], 2).reshape(n, 16, 16).astype(np.float32)
        return (dl * q - ml).reshape(n, 256)
    if t == 11:  # Q3_K: hmask[32], qs[64], scales[12], d
        d = _f16(blocks, 108)
        s = blocks[:, 96:108].astype(np.int32)
        j = np.arange(16)
        low = np.where(j < 8, s[:, j % 8] & 0xF, s[:, j % 8] >> 4)
        high = (s[:, 8 + j % 4] >> (2 * (j // 4))) & 3
        dl = (d * ((low | (high << 4)) - 32).astype(np.float32))[:, :, None]
        hm = blocks[:, 0:32].reshape(n, 1, 32)
        hbit = (hm >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)) & 1
        q = _bits2(blocks[:, 32:96], 2).astype(np.int32) - 4 * (1 - hbit.reshape(n, 256))
        return (dl * q.reshape(n, 16, 16).astype(np.float32)).reshape(n, 256)
    if t in (12, 13):  # Q4_K, Q5_K: d, dmin, scales[12], (qh[32],) qs[128]
        d, dmin = _f16(blocks, 0), _f16(blocks, 2)
        sc, m = _scale_min_k4(blocks[:, 4:16])
        qs = blocks[:, 16:144] if t == 12 else blocks[:, 48:176]
        q = np.concatenate([qs.reshape(n, 4, 1, 32) & 0xF, qs.reshape(n, 4, 1, 32) >> 4], 2)
        if t == 13:
            qh = blocks[:, 16:48].reshape(n, 1, 32)
            hbit = (qh >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)) & 1
            q = q | (hbit.reshape(n, 4, 2, 32) << 4)
        d1, m1 = (d * sc)[:, :, None], (dmin * m)[:, :, None]
        return (d1 * q.reshape(n, 8, 32).astype(np.float32) - m1).reshape(n, 256)
    if t == 14:  # Q6_K: ql[128], qh[64], scales[16] (int8), d
        d = _f16(blocks, 208)
        ql = blocks[:, 0:128].reshape(n, 2, 2, 32)
        qh = blocks[:, 128:192].reshape(n, 2, 1, 32)
        low = np.stack([ql & 0xF, ql >> 4], 2).reshape(n, 2, 4, 32)
        high = (qh >> np.array([0, 2, 4, 6], np.uint8).reshape(1, 1, 4, 1)) & 3
        q = (low | (high << 4)).astype(np.int32) - 32
        sc = blocks[:, 192:208].view(np.int8).astype(np.float32).reshape(n, 2, 8)
        ds = d.reshape(n, 1, 1) * sc
        # Values 16 k .. 16 k + 15 of the 32 of part p have scale 2 p + k.
        ds = ds.reshape(n, 2, 4, 2)[:, :, :, :, None]
        q = q.reshape(n, 2, 4, 2, 16).astype(np.float32)
        return (ds * q).reshape(n, 256)
    if t == 15:  # Q8_K: d (float32), qs[256], bsums[16]
        d = np.ascontiguousarray(blocks[:, 0:4]).view("<f4")
        return d * blocks[:, 4:260].view(np.int8).astype(np.float32)
    raise AssertionError(t)


def _tensor(buf, start, name, dims, t, out):
    """Adds the arrays of one tensor (data at byte `start` of `buf`) to `out`."""
    shape = tuple(reversed(dims))
    count = 1
    for n in dims:
        count *= n
    if t in _PLAIN:
        dtype = _PLAIN[t]
        nbytes = count * _ITEMSIZE[dtype]
    elif t in _BLOCKS:
        per, size = _BLOCKS[t]
        if not dims or dims[0] % per:
            raise ValueError(f"[load] gguf tensor {name!r} of type {_type_name(t)} has shape "
                             f"{shape}, whose last axis is not a multiple of {per}")
        nbytes = count // per * size
    else:
        raise ValueError(f"[load] gguf tensor {name!r} has ggml type {_type_name(t)}, "
                         "which is not supported")
    if start + nbytes > len(buf):
        raise ValueError(f"[load] truncated gguf file: tensor {name!r} needs bytes "
                         f"[{start}, {start + nbytes}), the file has {len(buf)}")
    raw = np.frombuffer(buf, np.uint8, nbytes, start)
    arrays = {}
    if t in _PLAIN:
        if dtype == "bfloat16":
            bits = raw.view("<u2").astype(np.uint32) << 16
            arrays[name] = _mx.array(bits.view(np.float32).reshape(shape)).astype(_mx.bfloat16)
        else:
            data = raw.view(np.dtype(dtype).newbyteorder("<")).astype(dtype)
            arrays[name] = _mx.array(data.reshape(shape))
    elif t in (2, 3, 8):
        bits, words, scales, biases = _affine(t, raw.reshape(-1, _BLOCKS[t][1]))
        base = name[:-len(".weight")] if name.endswith(".weight") else name
        arrays[name] = _mx.array(words.reshape(shape[:-1] + (shape[-1] * bits // 32,)))
        groups = shape[:-1] + (shape[-1] // 32,)
        arrays[base + ".scales"] = _mx.array(scales.astype(np.float16).reshape(groups))
        arrays[base + ".biases"] = _mx.array(biases.astype(np.float16).reshape(groups))
    else:
        values = _dequantize(t, raw.reshape(-1, _BLOCKS[t][1]))
        arrays[name] = _mx.array(values.astype(np.float16).reshape(shape))
    for k, v in arrays.items():
        if k in out:
            raise ValueError(f"[load] gguf tensor {name!r} gives the array {k!r}, which "
                             "the file already has")
        out[k] = v


def _parse(buf):
    """(arrays, metadata) of the GGUF bytes `buf`."""
    r = _Reader(buf)
    magic = bytes(buf[:4])
    if magic != _MAGIC:
        raise ValueError(f"[load] not a gguf file: it starts with {magic!r}, not {_MAGIC!r}")
    r.pos = 4
    version = r.unpack("<I", "the header")
    if version not in (2, 3):
        raise ValueError(f"[load] gguf version {version} is not supported (2 and 3 are; "
                         "big-endian files are not)")
    n_tensors, n_kv = r.unpack("<QQ", "the header")
    metadata = {}
    for _ in range(n_kv):
        key = r.string("a metadata key")
        metadata[key] = _meta_value(r, key)
    infos = []
    for _ in range(n_tensors):
        name = r.string("a tensor name")
        n_dims = r.unpack("<I", f"the tensor info of {name!r}")
        dims = tuple(int(n) for n in r.array("<u8", n_dims, f"the tensor info of {name!r}"))
        t, offset = r.unpack("<IQ", f"the tensor info of {name!r}")
        infos.append((name, dims, t, offset))
    alignment = metadata.get("general.alignment", _ALIGNMENT)
    if (not isinstance(alignment, (int, np.ndarray)) or np.ndim(alignment) != 0
            or not np.issubdtype(np.asarray(alignment).dtype, np.integer) or alignment <= 0):
        raise ValueError("[load] gguf general.alignment must be a positive integer, got "
                         f"{alignment!r}")
    alignment = int(alignment)
    data = r.pos + (-r.pos % alignment)
    arrays = {}
    for name, dims, t, offset in infos:
        _tensor(buf, data + offset, name, dims, t, arrays)
    metadata = {k: v if isinstance(v, (str, list)) else _mx.array(v)
                for k, v in metadata.items()}
    return arrays, metadata


def load(file):
    """(arrays, metadata) of a GGUF file, given as a path or a binary file object."""
    if isinstance(file, (str, os.PathLike)):
        if os.path.getsize(file) == 0:
            raise ValueError(f"[load] truncated gguf file: {os.fspath(file)!r} is empty")
        buf = np.memmap(file, dtype=np.uint8, mode="r")
    else:
        buf = np.frombuffer(file.read(), np.uint8)
    return _parse(buf)


def _string(s):
    b = s.encode("utf-8", "surrogateescape")
    return struct.pack("<Q", len(b)) + b


def _meta_type(key, a):
    """The metadata value type of the dtype of array `a`."""
    for code, name in _META_DTYPES.items():
        if getattr(_mx, name) == a.dtype:
            return code
    raise ValueError(f"[save_gguf] metadata {key!r} has dtype {a.dtype}, which GGUF "
                     "metadata cannot hold")


def _meta_bytes(key, v):
    """The type and value bytes of one metadata entry."""
    if isinstance(v, str):
        return struct.pack("<I", _STRING) + _string(v)
    if isinstance(v, list):
        if not all(isinstance(s, str) for s in v):
            raise ValueError(f"[save_gguf] metadata {key!r}: a list must hold only str")
        return struct.pack("<IIQ", _ARRAY, _STRING, len(v)) + b"".join(map(_string, v))
    if not isinstance(v, _mx.array):
        raise ValueError(f"[save_gguf] metadata {key!r} must be an array, a str or a list "
                         f"of str, not {type(v).__name__}")
    if v.ndim > 1:
        raise ValueError(f"[save_gguf] metadata {key!r} must be a scalar or 1-D array, "
                         f"got shape {tuple(v.shape)}")
    code = _meta_type(key, v)
    data = np.array(v)
    name = _META_DTYPES[code]
    data = data.astype("u1" if name == "bool_" else np.dtype(name).newbyteorder("<")).tobytes()
    if v.ndim == 0:
        return struct.pack("<I", code) + data
    return struct.pack("<IIQ", _ARRAY, code, v.shape[0]) + data


def _tensor_type(name, a):
    for t, dtype in _PLAIN.items():
        if getattr(_mx, dtype) == a.dtype:
            return t
    raise ValueError(f"[save_gguf] tensor {name!r} has dtype {a.dtype}, which has no GGUF "
                     "type (supported: float32, float16, bfloat16, float64, int8, int16, "
                     "int32, int64)")


def _tensor_bytes(a):
    """The little-endian data of array `a`."""
    if a.dtype == _mx.bfloat16:
        bits = np.array(a.astype(_mx.float32)).view(np.uint32)
        return (bits >> 16).astype("<u2").tobytes()
    data = np.ascontiguousarray(np.array(a))
    return data.astype(data.dtype.newbyteorder("<")).tobytes()


def save_gguf(file, arrays, metadata=None):
    """Saves a dict of arrays in the GGUF format (version 3), with optional metadata
    whose values are arrays (scalars or 1-D), str or lists of str (".gguf" is appended
    to a path without it)."""
    if not isinstance(file, (str, os.PathLike)):
        raise ValueError(f"[save_gguf] file must be a path (str or os.PathLike), not "
                         f"{type(file).__name__}")
    if not isinstance(arrays, dict):
        raise TypeError("[save_gguf] arrays must be a dict of str to array, "
                        f"not {type(arrays).__name__}")
    metadata = metadata or {}
    if not isinstance(metadata, dict):
        raise TypeError("[save_gguf] metadata must be a dict, "
                        f"not {type(metadata).__name__}")
    alignment = _ALIGNMENT
    head = bytearray()
    for key, v in metadata.items():
        if not isinstance(key, str):
            raise ValueError(f"[save_gguf] metadata keys must be str, not {type(key).__name__}")
        head += _string(key) + _meta_bytes(key, v)
        if key == "general.alignment":
            if (not isinstance(v, _mx.array) or v.dtype != _mx.uint32 or v.ndim != 0
                    or v.item() == 0 or v.item() & (v.item() - 1)):
                raise ValueError("[save_gguf] general.alignment must be a uint32 scalar "
                                 f"and a power of two, got {v!r}")
            alignment = v.item()
    tensors, offset = [], 0
    for name, a in arrays.items():
        if not isinstance(name, str):
            raise TypeError(f"[save_gguf] names must be str, not {type(name).__name__}")
        if not isinstance(a, _mx.array):
            a = _mx.array(a)
        t = _tensor_type(name, a)
        dims = tuple(reversed(a.shape))
        head += _string(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, t, offset)
        size = a.size * _ITEMSIZE[_PLAIN[t]]
        tensors.append(a)
        offset += size + (-size % alignment)
    header = struct.pack("<4sIQQ", _MAGIC, _VERSION, len(arrays), len(metadata)) + head
    path = os.fspath(file)
    path = path if path.endswith(".gguf") else path + ".gguf"
    with open(path, "wb") as f:
        f.write(header)
        f.write(b"\0" * (-len(header) % alignment))
        for a in tensors:
            data = _tensor_bytes(a)
            f.write(data)
            f.write(b"\0" * (-len(data) % alignment))


def install(module):
    global _mx
    _mx = module
    module.save_gguf = save_gguf
