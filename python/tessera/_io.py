"""File I/O of tessera.core: save, savez, savez_compressed, save_safetensors,
save_gguf and load, for the .npy, .npz, .safetensors and .gguf formats. The bytes
go through NumPy, which writes and reads .npy and .npz; safetensors is a JSON
header and the raw little-endian data, written here; GGUF is in _gguf."""

import json
import os

import numpy as np

from . import _gguf

_SAFETENSORS_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
    "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8",
    "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool_",
}

_mx = None  # tessera.core, set by install()


def _path(file, suffix):
    """A path with `suffix` appended when it lacks it; file objects as they are."""
    if isinstance(file, (str, os.PathLike)):
        path = os.fspath(file)
        return path if path.endswith(suffix) else path + suffix
    return file


def _numpy(op, name, a):
    """The NumPy array of `a` for the .npy and .npz formats."""
    if not isinstance(a, _mx.array):
        a = _mx.array(a)
    if a.dtype == _mx.bfloat16:
        raise ValueError(f"[{op}] the .npy format cannot hold bfloat16 ({name}); "
                         "use save_safetensors or convert with astype")
    return np.array(a)


def save(file, arr):
    """Saves one array in the .npy format (".npy" is appended to a path without it)."""
    np.save(_path(file, ".npy"), _numpy("save", "the array", arr), allow_pickle=False)


def _savez(op, write, file, args, kwargs):
    arrays = {}
    for i, a in enumerate(args):
        arrays[f"arr_{i}"] = _numpy(op, f"arr_{i}", a)
    for k, a in kwargs.items():
        if k in arrays:
            raise ValueError(f"[{op}] cannot use un-named variables and keyword {k}")
        arrays[k] = _numpy(op, k, a)
    write(_path(file, ".npz"), **arrays)


def savez(file, *args, **kwargs):
    """Saves arrays uncompressed in the .npz format: positional ones as arr_0,
    arr_1, ..., keyword ones under their names."""
    _savez("savez", np.savez, file, args, kwargs)


def savez_compressed(file, *args, **kwargs):
    """savez with deflate compression."""
    _savez("savez_compressed", np.savez_compressed, file, args, kwargs)


def _safetensors_payload(name, a):
    """(little-endian bytes, dtype code) of one array."""
    if a.dtype == _mx.bfloat16:
        # bfloat16 is the top half of a float32.
        bits = np.array(a.astype(_mx.float32)).view(np.uint32)
        return (bits >> 16).astype("<u2").tobytes(), "BF16"
    for code, n in _SAFETENSORS_DTYPES.items():
        if getattr(_mx, n) == a.dtype:
            arr = np.ascontiguousarray(np.array(a))
            return arr.astype(arr.dtype.newbyteorder("<")).tobytes(), code
    raise ValueError(f"[save_safetensors] cannot save {name!r} of dtype {a.dtype}")


def save_safetensors(file, arrays, metadata=None):
    """Saves a dict of arrays in the safetensors format, with optional str -> str
    metadata (".safetensors" is appended to a path without it)."""
    if not isinstance(arrays, dict):
        raise TypeError("[save_safetensors] arrays must be a dict of str to array, "
                        f"not {type(arrays).__name__}")
    header, blobs, offset = {}, [], 0
    for k, a in arrays.items():
        if not isinstance(k, str):
            raise TypeError(f"[save_safetensors] names must be str, not {type(k).__name__}")
        if not isinstance(a, _mx.array):
            a = _mx.array(a)
        data, code = _safetensors_payload(k, a)
        header[k] = {"dtype": code, "shape": list(a.shape),
                     "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise ValueError("[save_safetensors] metadata must map str to str, got "
                                 f"{k!r}: {v!r}")
        header["__metadata__"] = dict(metadata)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    path = _path(file, ".safetensors")
    f = open(path, "wb") if isinstance(path, str) else path
    try:
        f.write(len(head).to_bytes(8, "little"))
        f.write(head)
        for b in blobs:
            f.write(b)
    finally:
        if f is not path:
            f.close()


def _read_safetensors(f):
    n = int.from_bytes(f.read(8), "little")
    header = json.loads(f.read(n))
    body = f.read()
    out = {}
    for k, info in header.items():
        if k == "__metadata__":
            continue
        start, end = info["data_offsets"]
        code, shape = info["dtype"], info["shape"]
        if code == "BF16":
            bits = np.frombuffer(body[start:end], dtype="<u2").astype(np.uint32) << 16
            out[k] = _mx.array(bits.view(np.float32).reshape(shape)).astype(_mx.bfloat16)
            continue
        if code not in _SAFETENSORS_DTYPES:
            raise ValueError(f"[load] safetensors dtype {code} of {k!r} is not supported")
        dtype = np.dtype("bool" if code == "BOOL" else _SAFETENSORS_DTYPES[code])
        arr = np.frombuffer(body[start:end], dtype=dtype.newbyteorder("<"))
        out[k] = _mx.array(arr.astype(dtype).reshape(shape))
    return out, dict(header.get("__metadata__", {}))


def load(file, /, format=None, return_metadata=False, *, stream=None):
    """Loads a .npy file (an array), or a .npz, .safetensors or .gguf file (a dict
    of arrays; with return_metadata, safetensors and gguf also give their metadata).
    The format is `format`, else the path's (or file object's name's) extension.
    The file is read at once; the arrays are created from host memory, where
    any device reads them (`stream` is accepted for compatibility)."""
    if format is None:
        name = os.fspath(file) if isinstance(file, (str, os.PathLike)) else getattr(file, "name", "")
        name = str(name)
        if "." not in os.path.basename(name):
            raise ValueError(f"[load] cannot infer the format of {name!r}; pass format=")
        format = name.rsplit(".", 1)[1]
    if format not in ("npy", "npz", "safetensors", "gguf"):
        raise ValueError(f"[load] format {format!r} is not supported "
                         "(supported: 'npy', 'npz', 'safetensors', 'gguf')")
    if return_metadata and format not in ("safetensors", "gguf"):
        raise ValueError("[load] metadata is only returned for safetensors and gguf, "
                         f"not {format}")
    if format == "gguf":
        arrays, metadata = _gguf.load(file)
        return (arrays, metadata) if return_metadata else arrays
    path = os.fspath(file) if isinstance(file, (str, os.PathLike)) else None
    f = open(path, "rb") if path is not None else file
    try:
        if format == "npy":
            return _mx.array(np.load(f, allow_pickle=False))
        if format == "npz":
            with np.load(f, allow_pickle=False) as data:
                return {k: _mx.array(data[k]) for k in data.files}
        arrays, metadata = _read_safetensors(f)
        return (arrays, metadata) if return_metadata else arrays
    finally:
        if path is not None:
            f.close()


def install(module):
    global _mx
    _mx = module
    _gguf.install(module)
    for name in ("save", "savez", "savez_compressed", "save_safetensors", "load"):
        setattr(module, name, globals()[name])
