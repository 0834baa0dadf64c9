"""Bad and edge-case calls, each with the outcome MLX 0.32.4 gives it.

Every case is a call written against the MLX interface (`mx`, `nn`, `optim`,
bound by `bind`) and one expected outcome:
  err(name, Kind, ops, call)  the call raises Kind (the exception type MLX
                              raises); Tessera's message must also name one
                              of `ops` (the op the user called).
  ok(name, call, ref)         the call succeeds; its value equals `ref()`, a
                              NumPy computation (dtype and values).
test_fuzz.py runs the table on Tessera. Where MLX does otherwise (it crashes,
returns garbage, or raises a kind that is an accident of its implementation,
such as RuntimeError: std::bad_cast), the case records what MLX does with
`mlx=` (a kind, OK or CRASH), and the kind is Tessera's; on a case that
succeeds, `mlx=OK` says that MLX gives another value.
Run with an interpreter that has MLX, this file checks the table itself:
    python tests/python/fuzz_cases.py
lists every case where MLX does not do what the table records.
"""

import atexit
import builtins
import os
import shutil
import tempfile

import numpy as np

mx = nn = optim = None
TMP = None


class Case:
    __slots__ = ("name", "kind", "ops", "call", "ref", "mlx")

    def __init__(self, name, kind, ops, call, ref=None, mlx=None):
        self.name, self.kind, self.ops, self.call, self.ref = name, kind, ops, call, ref
        # What MLX does where Tessera deliberately differs.
        self.mlx = mlx


OK, CRASH = "succeeds", "crashes"
# MLX reads memory it does not own: it returns garbage or crashes, from run to run.
UNOWNED = "reads memory out of bounds"
CASES = []


def err(name, kind, ops, call, mlx=None):
    CASES.append(Case(name, kind, (ops,) if isinstance(ops, str) else ops, call, mlx=mlx))


def ok(name, call, ref, mlx=None):
    CASES.append(Case(name, None, (), call, ref, mlx=mlx))


def bind(core, nn_module, optim_module):
    """Makes the cases call `core` as mx (tessera.core or mlx.core)."""
    global mx, nn, optim, TMP
    mx, nn, optim = core, nn_module, optim_module
    if TMP is None:
        TMP = tempfile.mkdtemp(prefix="fuzz-")
        atexit.register(shutil.rmtree, TMP, True)
        with open(os.path.join(TMP, "empty.npy"), "wb"):
            pass
        with open(os.path.join(TMP, "junk.npy"), "wb") as f:
            f.write(b"\x93NUMPY\x01\x00\x10\x00{'descr': '<f4',     \n")
        with open(os.path.join(TMP, "junk.safetensors"), "wb") as f:
            f.write(b'\x08\x00\x00\x00\x00\x00\x00\x00{"a":1}')
        with open(os.path.join(TMP, "big.safetensors"), "wb") as f:
            f.write((1 << 40).to_bytes(8, "little") + b"{}")
        with open(os.path.join(TMP, "junk.npz"), "wb") as f:
            f.write(b"PK\x03\x04garbage")
        with open(os.path.join(TMP, "junk.gguf"), "wb") as f:
            f.write(b"GGUF\x03\x00\x00\x00")
        os.mkdir(os.path.join(TMP, "dir.npy"))


def path(name):
    return os.path.join(TMP, name)


def f32(x):
    return np.array(x, dtype=np.float32)


def i32(x):
    return np.array(x, dtype=np.int32)


def a23():
    return mx.arange(6, dtype=mx.float32).reshape(2, 3)


def n23():
    return np.arange(6, dtype=np.float32).reshape(2, 3)


# ---- creation ----------------------------------------------------------------

for op, call in [("zeros", lambda s: mx.zeros(s)), ("ones", lambda s: mx.ones(s)), ("full", lambda s: mx.full(s, 2.0))]:
    err(f"{op}_negative_size", ValueError, (op, "full"), lambda call=call: call((-1,)))
    err(f"{op}_negative_in_shape", ValueError, (op, "full"), lambda call=call: call((2, -3)))
    err(f"{op}_float_shape", TypeError, op, lambda call=call: call((2.5,)), mlx=RuntimeError)
    err(f"{op}_string_shape", TypeError, op, lambda call=call: call("3"), mlx=RuntimeError)
    err(f"{op}_none_shape", TypeError, op, lambda call=call: call(None))
    err(f"{op}_nested_shape", TypeError, op, lambda call=call: call(((2,),)), mlx=RuntimeError)
    err(f"{op}_huge_size", OverflowError, op, lambda call=call: call((2**40,)))
    ok(f"{op}_empty", lambda call=call: call((0, 3)), lambda: np.zeros((0, 3), np.float32))
    ok(f"{op}_scalar_shape", lambda call=call: call(()).shape, lambda: ())
err("zeros_bad_dtype", TypeError, "zeros", lambda: mx.zeros((2,), dtype="float32"))
err("zeros_dtype_class", TypeError, "zeros", lambda: mx.zeros((2,), dtype=np.float32))
err("full_bad_value", ValueError, ("full", "array"), lambda: mx.full((2,), "x"))
err("full_list_value_mismatch", ValueError, ("full", "broadcast"), lambda: mx.full((2,), [1.0, 2.0, 3.0]))
ok("full_broadcast_value", lambda: mx.full((2, 3), mx.array([1.0, 2.0, 3.0])), lambda: np.tile(f32([1, 2, 3]), (2, 1)))
err("arange_zero_step", ValueError, "arange", lambda: mx.arange(0, 10, 0))
err("arange_float_zero_step", ValueError, "arange", lambda: mx.arange(0.0, 1.0, 0.0))
err("arange_huge", ValueError, "arange", lambda: mx.arange(0, 2**40))
err("arange_string", TypeError, "arange", lambda: mx.arange("5"))
err("arange_nan", ValueError, "arange", lambda: mx.arange(0.0, float("nan")))
err("arange_inf", ValueError, "arange", lambda: mx.arange(0.0, float("inf")))
ok("arange_empty", lambda: mx.arange(5, 2), lambda: np.arange(5, 2, dtype=np.int32))
ok("arange_negative_step", lambda: mx.arange(5, 0, -2), lambda: np.arange(5, 0, -2, dtype=np.int32))
err("linspace_negative_num", ValueError, "linspace", lambda: mx.linspace(0, 1, -1))
err("linspace_float_num", TypeError, "linspace", lambda: mx.linspace(0, 1, 2.5))
ok("linspace_zero_num", lambda: mx.linspace(0, 1, 0), lambda: np.zeros((0,), np.float32))
err("eye_negative", ValueError, ("eye", "full"), lambda: mx.eye(-2))
err("eye_negative_m", ValueError, ("eye", "full"), lambda: mx.eye(2, -2))
ok("eye_k_far", lambda: mx.eye(3, k=5), lambda: np.eye(3, k=5, dtype=np.float32))
ok("eye_k_negative_far", lambda: mx.eye(3, 4, k=-7), lambda: np.eye(3, 4, k=-7, dtype=np.float32))
err("identity_negative", ValueError, ("identity", "eye", "full"), lambda: mx.identity(-1))
err("tri_negative", ValueError, ("tri", "full"), lambda: mx.tri(-1), mlx=OK)
ok("tri_k", lambda: mx.tri(3, 4, k=1), lambda: np.tri(3, 4, k=1, dtype=np.float32))
err("tril_1d", ValueError, "tril", lambda: mx.tril(mx.ones(3)))
err("triu_0d", ValueError, "triu", lambda: mx.triu(mx.array(1.0)))
ok("tril_k_far", lambda: mx.tril(mx.ones((2, 3)), k=-5), lambda: np.zeros((2, 3), np.float32))
ok("zeros_like_list", lambda: mx.zeros_like([1, 2]), lambda: i32([0, 0]), mlx=TypeError)
err("ones_like_none", TypeError, "ones_like", lambda: mx.ones_like(None))
err("full_like_string", ValueError, "full_like", lambda: mx.full_like("ab", 1), mlx=TypeError)

# ---- conversion --------------------------------------------------------------

err("array_ragged", ValueError, "array", lambda: mx.array([[1, 2], [3]]))
err("array_ragged_deep", ValueError, "array", lambda: mx.array([[[1]], [2]]))
err("array_string", ValueError, "array", lambda: mx.array("abc"))
err("array_dict", ValueError, "array", lambda: mx.array({"a": 1}))
err("array_none", TypeError, ("array", "__init__"), lambda: mx.array(None))
err("array_list_of_strings", ValueError, "array", lambda: mx.array(["a", "b"]))
err("array_list_with_none", ValueError, "array", lambda: mx.array([1, None]))
err("array_object", ValueError, "array", lambda: mx.array(object()))
err("array_bad_dtype", TypeError, ("array", "__init__"), lambda: mx.array([1], dtype="int32"))
err(
    "array_numpy_object", ValueError, "array", mlx=RuntimeError, call=lambda: mx.array(np.array([1, "a"], dtype=object))
)
err("array_numpy_string", ValueError, "array", lambda: mx.array(np.array(["ab"])), mlx=RuntimeError)
ok("array_empty_list", lambda: mx.array([]), lambda: np.zeros((0,), np.float32))
ok("array_empty_nested", lambda: mx.array([[], []]), lambda: np.zeros((2, 0), np.float32))
ok("array_bool_list", lambda: mx.array([True, False]), lambda: np.array([True, False]))
ok("array_mixed_int_float", lambda: mx.array([1, 2.5]), lambda: f32([1, 2.5]))
ok("array_mixed_bool_int", lambda: mx.array([True, 2]), lambda: i32([1, 2]))
ok("array_from_array_list", lambda: mx.array([mx.array(1.0), mx.array(2.0)]), lambda: f32([1, 2]))
ok("array_from_numpy_float64", lambda: mx.array(np.ones(2)), lambda: np.ones(2), mlx=OK)
ok("array_from_numpy_empty", lambda: mx.array(np.zeros((0, 2), np.int64)), lambda: np.zeros((0, 2), np.int64))
ok("array_complex_scalar", lambda: mx.array(1 + 2j), lambda: np.array(1 + 2j, np.complex64))
ok("array_nan", lambda: mx.isnan(mx.array(float("nan"))), lambda: np.array(True))
err("item_of_vector", ValueError, "item", lambda: mx.ones(3).item())
err("item_of_empty", ValueError, "item", lambda: mx.zeros((0,)).item())
err("float_of_vector", ValueError, ("item", "float"), lambda: float(mx.ones(3)))
err("int_of_vector", ValueError, ("item", "int"), lambda: int(mx.ones(2)))
err("bool_of_vector", ValueError, ("item", "bool"), lambda: bool(mx.ones(2)))
err("len_of_scalar", TypeError, ("len", "0-d", "scalar"), lambda: len(mx.array(1.0)))
err("iter_of_scalar", TypeError, ("iter", "0-d", "scalar"), lambda: iter(mx.array(1.0)))
ok("astype_float_to_int_truncates", lambda: mx.array([1.7, -1.7]).astype(mx.int32), lambda: i32([1, -1]))
ok("astype_to_bool", lambda: mx.array([0.0, 2.0, float("nan")]).astype(mx.bool_), lambda: np.array([False, True, True]))
err("astype_string", TypeError, "astype", lambda: mx.ones(2).astype("float32"))
err("view_size_mismatch", ValueError, "view", lambda: mx.ones(3, dtype=mx.int8).view(mx.int32))
ok("view_scalar_same_size", lambda: mx.array(1.0).view(mx.int32), lambda: np.array(1.0, np.float32).view(np.int32))
err("view_scalar_resize", ValueError, "view", lambda: mx.array(1.0).view(mx.int16))

# ---- arithmetic and elementwise ---------------------------------------------

err("add_incompatible", ValueError, ("add", "broadcast"), lambda: mx.ones((2, 3)) + mx.ones((4,)))
err(
    "multiply_incompatible",
    ValueError,
    ("multiply", "broadcast"),
    lambda: mx.multiply(mx.ones((2, 3)), mx.ones((3, 2))),
)
err("add_string", ValueError, ("add", "__add__", "+"), lambda: mx.ones(2) + "a")
err("add_none", ValueError, ("add", "__add__", "+"), lambda: mx.add(mx.ones(2), None), mlx=TypeError)
err("add_list_of_strings", ValueError, ("add", "array"), lambda: mx.add(mx.ones(2), ["a", "b"]))
err(
    "where_incompatible",
    ValueError,
    ("where", "broadcast"),
    lambda: mx.where(mx.array([True, False]), mx.ones(3), mx.zeros(3)),
)
err("where_string", ValueError, "where", lambda: mx.where("x", 1, 2))
for op in ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"]:
    err(f"{op}_float", ValueError, op, lambda op=op: getattr(mx, op)(mx.ones(2), mx.ones(2)), mlx=RuntimeError)
    ok(
        f"{op}_int",
        lambda op=op: getattr(mx, op)(mx.array([6, 3]), mx.array([3, 1])),
        lambda op=op: getattr(np, {"left_shift": "left_shift", "right_shift": "right_shift"}.get(op, op))(
            i32([6, 3]), i32([3, 1])
        ).astype(np.int32),
    )
err("bitwise_invert_float", ValueError, ("bitwise_invert", "invert"), lambda: mx.bitwise_invert(mx.ones(2)))
err("invert_operator_float", ValueError, ("bitwise_invert", "invert", "~"), lambda: ~mx.ones(2))
err("and_operator_float", ValueError, ("bitwise_and", "&"), lambda: mx.ones(2) & mx.ones(2))
err("lshift_operator_float", ValueError, ("left_shift", "<<"), lambda: mx.ones(2) << 1)
for op in ["floor", "ceil"]:
    err(f"{op}_complex", ValueError, op, lambda op=op: getattr(mx, op)(mx.array([1 + 1j])))
for op in ["remainder", "floor_divide", "maximum", "minimum", "arctan2"]:
    ok(
        f"{op}_empty",
        lambda op=op: getattr(mx, op)(mx.zeros((0, 2)), mx.ones((2,))),
        lambda: np.zeros((0, 2), np.float32),
    )
    err(
        f"{op}_incompatible", ValueError, (op, "broadcast"), lambda op=op: getattr(mx, op)(mx.ones((3,)), mx.ones((2,)))
    )
ok("divide_by_zero", lambda: mx.array([1.0, -1.0, 0.0]) / 0.0, lambda: f32([np.inf, -np.inf, np.nan]))
ok("floor_divide_int_by_zero_is_defined", lambda: (mx.array([7]) // mx.array([0])).shape, lambda: (1,))
ok("sqrt_negative", lambda: mx.sqrt(mx.array([-1.0])), lambda: f32([np.nan]))
ok("log_zero", lambda: mx.log(mx.array([0.0])), lambda: f32([-np.inf]))
ok("exp_overflow", lambda: mx.exp(mx.array([1000.0])), lambda: f32([np.inf]))
ok("abs_int_min", lambda: mx.abs(mx.array([-(2**31)], mx.int32)), lambda: i32([-(2**31)]))
ok("sigmoid_extremes", lambda: mx.sigmoid(mx.array([-1e4, 1e4])), lambda: f32([0, 1]))
ok("clip_lo_above_hi", lambda: mx.clip(mx.array([0.0, 5.0]), 3.0, 1.0), lambda: f32([1, 1]))
err("clip_both_none", ValueError, "clip", lambda: mx.clip(mx.ones(2), None, None))
err("clip_incompatible", ValueError, ("clip", "broadcast"), lambda: mx.clip(mx.ones(2), mx.zeros(3), 1.0))
ok("round_negative_decimals", lambda: mx.round(mx.array([1234.5]), -2), lambda: f32([1200]))
err("round_float_decimals", TypeError, "round", lambda: mx.round(mx.ones(2), 1.5))
ok("isclose_nan", lambda: mx.isclose(mx.array([np.nan]), mx.array([np.nan]), equal_nan=True), lambda: np.array([True]))
err("allclose_incompatible", ValueError, ("allclose", "broadcast"), lambda: mx.allclose(mx.ones(2), mx.ones(3)))
ok("array_equal_shapes_differ", lambda: mx.array_equal(mx.ones(2), mx.ones(3)), lambda: np.array(False))
ok(
    "nan_to_num",
    lambda: mx.nan_to_num(mx.array([np.nan, np.inf, -np.inf]), posinf=1.0, neginf=-1.0),
    lambda: f32([0, 1, -1]),
)
err("logaddexp_incompatible", ValueError, ("logaddexp", "broadcast"), lambda: mx.logaddexp(mx.ones(2), mx.ones(3)))

# ---- shapes ------------------------------------------------------------------

err("reshape_wrong_size", ValueError, "reshape", lambda: a23().reshape(4, 2))
err("reshape_two_inferred", ValueError, "reshape", lambda: a23().reshape(-1, -1))
err("reshape_inferred_indivisible", ValueError, "reshape", lambda: a23().reshape(-1, 4))
err("reshape_negative", ValueError, "reshape", lambda: a23().reshape(-2, -3), mlx=OK)
err("reshape_float", TypeError, "reshape", lambda: a23().reshape(2.0, 3), mlx=RuntimeError)
err("reshape_huge", OverflowError, "reshape", lambda: a23().reshape(2**40, 1), mlx=RuntimeError)
err("reshape_empty_inferred", ValueError, "reshape", lambda: mx.zeros((0, 3)).reshape(0, -1, 3))
err("reshape_empty_inferred_ambiguous", ValueError, "reshape", lambda: mx.zeros((0, 3)).reshape(-1, 0))
err("transpose_wrong_count", ValueError, "transpose", lambda: mx.transpose(a23(), (0,)))
err("transpose_repeat", ValueError, "transpose", lambda: mx.transpose(a23(), (0, 0)))
err("transpose_out_of_range", IndexError, "transpose", lambda: mx.transpose(a23(), (0, 2)))
err("transpose_negative_out_of_range", IndexError, "transpose", lambda: mx.transpose(a23(), (0, -3)))
ok("transpose_negative", lambda: mx.transpose(a23(), (-1, 0)), lambda: n23().T)
err("swapaxes_out_of_range", IndexError, "swapaxes", lambda: mx.swapaxes(a23(), 0, 2))
err("moveaxis_out_of_range", IndexError, "moveaxis", lambda: mx.moveaxis(a23(), 0, 5))
err("moveaxis_source_out_of_range", IndexError, "moveaxis", lambda: mx.moveaxis(a23(), -3, 0))
err("squeeze_not_one", ValueError, "squeeze", lambda: mx.squeeze(a23(), 0))
err("squeeze_out_of_range", IndexError, "squeeze", lambda: mx.squeeze(mx.ones((1, 2)), 2))
err("squeeze_repeat", ValueError, "squeeze", lambda: mx.squeeze(mx.ones((1, 2)), (0, 0)))
ok("squeeze_all", lambda: mx.squeeze(mx.ones((1, 2, 1))).shape, lambda: (2,))
err("expand_dims_out_of_range", IndexError, "expand_dims", lambda: mx.expand_dims(a23(), 4))
err("expand_dims_negative_out_of_range", IndexError, "expand_dims", lambda: mx.expand_dims(a23(), -4))
err("expand_dims_repeat", ValueError, "expand_dims", lambda: mx.expand_dims(a23(), (0, 0)))
ok("expand_dims_many", lambda: mx.expand_dims(a23(), (0, 3)).shape, lambda: (1, 2, 3, 1))
ok("flatten_end_past_last_axis", lambda: mx.flatten(a23(), 0, 2), lambda: np.arange(6, dtype=np.float32))
err("flatten_reversed", ValueError, "flatten", lambda: mx.flatten(mx.ones((2, 3, 4)), 2, 1))
ok("flatten_scalar", lambda: mx.flatten(mx.array(3.0)), lambda: f32([3]))
err("unflatten_wrong_size", ValueError, "unflatten", lambda: mx.unflatten(a23(), 1, (2, 2)))
err("unflatten_out_of_range", IndexError, "unflatten", lambda: mx.unflatten(a23(), 2, (3, 1)))
err("unflatten_empty_shape", ValueError, "unflatten", lambda: mx.unflatten(a23(), 1, ()))
err("broadcast_to_incompatible", ValueError, "broadcast", lambda: mx.broadcast_to(mx.ones(3), (2, 4)))
err("broadcast_to_fewer_dims", ValueError, "broadcast", lambda: mx.broadcast_to(mx.ones((2, 3)), (3,)))
err("broadcast_to_negative", ValueError, "broadcast", lambda: mx.broadcast_to(mx.ones(1), (-1,)))
ok("broadcast_to_zero", lambda: mx.broadcast_to(mx.ones(1), (0, 3)), lambda: np.zeros((0, 3), np.float32))
err("broadcast_arrays_incompatible", ValueError, "broadcast", lambda: mx.broadcast_arrays(mx.ones(2), mx.ones(3)))
err("concatenate_empty_list", ValueError, "concatenate", lambda: mx.concatenate([]))
err("concatenate_shape_mismatch", ValueError, "concatenate", lambda: mx.concatenate([mx.ones((2, 3)), mx.ones((2, 4))]))
err("concatenate_ndim_mismatch", ValueError, "concatenate", lambda: mx.concatenate([mx.ones((2, 3)), mx.ones(3)]))
err("concatenate_axis_out_of_range", IndexError, "concatenate", lambda: mx.concatenate([mx.ones(2)], axis=1), mlx=OK)
err("concatenate_scalars", IndexError, "concatenate", lambda: mx.concatenate([mx.array(1.0), mx.array(2.0)]))
err("concatenate_not_list", IndexError, "concatenate", lambda: mx.concatenate(mx.ones(2)))
ok(
    "concatenate_empty_arrays",
    lambda: mx.concatenate([mx.zeros((0, 2)), mx.ones((1, 2))]),
    lambda: np.ones((1, 2), np.float32),
)
ok(
    "concatenate_axis_none",
    lambda: mx.concatenate([mx.ones((2, 1)), mx.zeros(3)], axis=None),
    lambda: f32([1, 1, 0, 0, 0]),
)
err("stack_empty_list", ValueError, "stack", lambda: mx.stack([]))
err("stack_shape_mismatch", ValueError, "stack", lambda: mx.stack([mx.ones(2), mx.ones(3)]))
err("stack_axis_out_of_range", IndexError, "stack", lambda: mx.stack([mx.ones(2), mx.ones(2)], axis=3))
ok("stack_negative_axis", lambda: mx.stack([mx.ones(2), mx.zeros(2)], axis=-1), lambda: f32([[1, 0], [1, 0]]))
err("split_indivisible", ValueError, "split", lambda: mx.split(mx.ones(5), 2))
err("split_zero", ValueError, "split", lambda: mx.split(mx.ones(4), 0))
err("split_negative", ValueError, "split", lambda: mx.split(mx.ones(4), -2))
err("split_axis_out_of_range", IndexError, "split", lambda: mx.split(mx.ones(4), 2, axis=1))
err("split_scalar", IndexError, "split", lambda: mx.split(mx.array(1.0), 1))
ok("split_indices_unsorted", lambda: [x.shape for x in mx.split(mx.arange(5), [3, 1])], lambda: [(3,), (0,), (4,)])
ok("split_indices_past_end", lambda: [x.shape for x in mx.split(mx.arange(5), [2, 9])], lambda: [(2,), (3,), (0,)])
err("repeat_negative", ValueError, "repeat", lambda: mx.repeat(mx.ones(2), -1))
err("repeat_axis_out_of_range", IndexError, "repeat", lambda: mx.repeat(mx.ones(2), 2, axis=1))
ok("repeat_zero", lambda: mx.repeat(mx.ones(2), 0), lambda: np.zeros((0,), np.float32))
err("tile_negative", ValueError, "tile", lambda: mx.tile(mx.ones(2), -1))
ok("tile_zero", lambda: mx.tile(mx.ones(2), (0, 2)).shape, lambda: (0, 4))
err("pad_negative", ValueError, "pad", lambda: mx.pad(mx.ones(3), -1))
err("pad_too_many", ValueError, "pad", lambda: mx.pad(mx.ones(3), [(1, 1), (1, 1)]))
err("pad_bad_mode", ValueError, "pad", lambda: mx.pad(mx.ones(3), 1, mode="wrap"))
ok("pad_reflect", lambda: mx.pad(mx.array([1.0, 2.0, 3.0]), 1, mode="reflect"), lambda: f32([2, 1, 2, 3, 2]))
err("pad_edge_empty", ValueError, "pad", lambda: mx.pad(mx.zeros((0,)), 1, mode="edge"), mlx=OK)
ok("pad_zero", lambda: mx.pad(mx.ones(2), 0), lambda: f32([1, 1]))
ok("pad_edge", lambda: mx.pad(mx.array([1.0, 2.0]), (1, 2), mode="edge"), lambda: f32([1, 1, 2, 2, 2]))
err("roll_axis_out_of_range", IndexError, "roll", lambda: mx.roll(mx.ones(3), 1, axis=1))
ok("roll_big_shift", lambda: mx.roll(mx.arange(4), 9), lambda: np.roll(np.arange(4, dtype=np.int32), 9))
ok("roll_negative_shift", lambda: mx.roll(mx.arange(4), -5), lambda: np.roll(np.arange(4, dtype=np.int32), -5))
ok("roll_empty", lambda: mx.roll(mx.zeros((0,)), 3), lambda: np.zeros((0,), np.float32))
err("diagonal_same_axes", ValueError, "diagonal", lambda: mx.diagonal(a23(), axis1=0, axis2=0))
err("diagonal_1d", ValueError, "diagonal", lambda: mx.diagonal(mx.ones(3)))
err("diagonal_axis_out_of_range", IndexError, "diagonal", lambda: mx.diagonal(a23(), axis1=0, axis2=5))
ok("diagonal_offset_far", lambda: mx.diagonal(a23(), 7), lambda: np.zeros((0,), np.float32))
err("diag_3d", ValueError, "diag", lambda: mx.diag(mx.ones((2, 2, 2))))
ok("diag_offset", lambda: mx.diag(mx.array([1.0, 2.0]), k=1), lambda: np.diag(f32([1, 2]), k=1))
err("trace_1d", ValueError, ("trace", "diagonal"), lambda: mx.trace(mx.ones(3)))
err("atleast_1d_string", ValueError, "atleast_1d", lambda: mx.atleast_1d("a"), mlx=RuntimeError)
err("meshgrid_bad_indexing", ValueError, "meshgrid", lambda: mx.meshgrid(mx.ones(2), mx.ones(3), indexing="zz"))
err("as_strided_out_of_bounds", ValueError, "as_strided", lambda: mx.as_strided(mx.ones(4), (3,), (2,)), mlx=UNOWNED)
err("as_strided_negative_shape", ValueError, "as_strided", lambda: mx.as_strided(mx.ones(4), (-1,), (1,)))

# ---- reductions --------------------------------------------------------------

for op in ["sum", "prod", "max", "min", "mean", "all", "any", "var", "std", "logsumexp"]:
    f = lambda *a, op=op, **k: getattr(mx, op)(*a, **k)  # noqa: E731
    err(f"{op}_axis_out_of_range", IndexError, op, lambda f=f: f(a23(), axis=2))
    err(f"{op}_negative_axis_out_of_range", IndexError, op, lambda f=f: f(a23(), axis=-3))
    err(f"{op}_repeat_axes", ValueError, op, lambda f=f: f(a23(), axis=(0, 0)))
    err(f"{op}_axis_string", TypeError, op, lambda f=f: f(a23(), axis="0"))
    err(f"{op}_axis_float", TypeError, op, lambda f=f: f(a23(), axis=1.0))
    err(
        f"{op}_scalar_axis",
        IndexError,
        op,
        lambda f=f: f(mx.array(1.0), axis=0),
        mlx=ValueError if op == "logsumexp" else None,
    )
    ok(
        f"{op}_list",
        lambda f=f: f([[1.0, 2.0]], axis=()),
        lambda op=op: (
            f32([[1, 2]])
            if op not in ("all", "any", "var", "std")
            else {
                "all": np.array([[True, True]]),
                "any": np.array([[True, True]]),
                "var": f32([[0, 0]]),
                "std": f32([[0, 0]]),
            }[op]
        ),
        mlx=TypeError,
    )
    ok(
        f"{op}_empty_axes",
        lambda f=f, op=op: f(a23(), axis=()),
        lambda op=op: (
            n23()
            if op not in ("all", "any", "var", "std")
            else {
                "all": n23() != 0,
                "any": n23() != 0,
                "var": np.zeros((2, 3), np.float32),
                "std": np.zeros((2, 3), np.float32),
            }[op]
        ),
    )
ok("sum_empty", lambda: mx.sum(mx.zeros((0, 3)), axis=0), lambda: np.zeros(3, np.float32))
ok("prod_empty", lambda: mx.prod(mx.zeros((0,))), lambda: np.array(1, np.float32))
ok("all_empty", lambda: mx.all(mx.zeros((0,))), lambda: np.array(True))
ok("any_empty", lambda: mx.any(mx.zeros((0,))), lambda: np.array(False))
ok("mean_empty_is_nan", lambda: mx.isnan(mx.mean(mx.zeros((0,)))), lambda: np.array(True))
ok("logsumexp_empty", lambda: mx.logsumexp(mx.zeros((0,))), lambda: np.array(-np.inf, np.float32), mlx=ValueError)
ok("logsumexp_all_neg_inf", lambda: mx.logsumexp(mx.array([-np.inf, -np.inf])), lambda: np.array(-np.inf, np.float32))
ok("logsumexp_inf", lambda: mx.logsumexp(mx.array([np.inf, 1.0])), lambda: np.array(np.inf, np.float32))
err("max_empty", ValueError, "max", lambda: mx.max(mx.zeros((0,))))
err("min_empty_axis", ValueError, "min", lambda: mx.min(mx.zeros((2, 0)), axis=1))
ok("max_empty_other_axis", lambda: mx.max(mx.zeros((2, 0)), axis=0), lambda: np.zeros((0,), np.float32))
ok("var_ddof_equal_to_size", lambda: mx.var(mx.ones(2), ddof=2), lambda: np.array(np.nan, np.float32))
ok("var_ddof_past_size", lambda: mx.var(mx.ones(2), ddof=5), lambda: np.array(np.nan, np.float32))
for op in ["argmax", "argmin"]:
    f = lambda *a, op=op, **k: getattr(mx, op)(*a, **k)  # noqa: E731
    err(f"{op}_axis_out_of_range", IndexError, op, lambda f=f: f(a23(), axis=2))
    err(f"{op}_axis_tuple", TypeError, op, lambda f=f: f(a23(), axis=(0, 1)))
    err(f"{op}_empty", ValueError, op, lambda f=f: f(mx.zeros((0,))))
    ok(f"{op}_nan", lambda f=f: f(mx.array([1.0, np.nan, 3.0])), lambda: np.array(1, np.uint32))
for op in ["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"]:
    f = lambda *a, op=op, **k: getattr(mx, op)(*a, **k)  # noqa: E731
    err(f"{op}_axis_out_of_range", IndexError, op, lambda f=f: f(a23(), axis=2))
    err(f"{op}_negative_axis_out_of_range", IndexError, op, lambda f=f: f(a23(), axis=-3))
    err(f"{op}_axis_tuple", TypeError, op, lambda f=f: f(a23(), axis=(0,)))
    ok(f"{op}_empty", lambda f=f: f(mx.zeros((0,))), lambda: np.zeros((0,), np.float32))
    ok(f"{op}_scalar", lambda f=f: f(mx.array(2.0)), lambda: f32([2]))
for op in ["sort", "argsort"]:
    f = lambda *a, op=op, **k: getattr(mx, op)(*a, **k)  # noqa: E731
    err(f"{op}_axis_out_of_range", IndexError, op, lambda f=f: f(a23(), axis=2))
    err(f"{op}_scalar", IndexError, op, lambda f=f: f(mx.array(1.0)))
    err(f"{op}_axis_string", TypeError, op, lambda f=f: f(a23(), axis="x"))
ok("sort_nan_last", lambda: mx.sort(mx.array([np.nan, 1.0, -1.0])), lambda: f32([-1, 1, np.nan]))
ok("sort_empty", lambda: mx.sort(mx.zeros((0,))), lambda: np.zeros((0,), np.float32))
ok("sort_axis_none", lambda: mx.sort(mx.array([[3, 1], [2, 0]]), axis=None), lambda: i32([0, 1, 2, 3]))
for op in ["partition", "argpartition"]:
    f = lambda *a, op=op, **k: getattr(mx, op)(*a, **k)  # noqa: E731
    err(f"{op}_kth_out_of_range", ValueError, op, lambda f=f: f(mx.ones(3), 3))
    err(f"{op}_kth_negative_out_of_range", ValueError, op, lambda f=f: f(mx.ones(3), -4))
    err(f"{op}_axis_out_of_range", IndexError, op, lambda f=f: f(mx.ones(3), 1, axis=1))
err("topk_k_too_big", ValueError, "topk", lambda: mx.topk(mx.ones(3), 4))
ok("topk_k_zero", lambda: mx.topk(mx.ones(3), 0), lambda: np.zeros((0,), np.float32))
err("topk_negative", ValueError, "topk", lambda: mx.topk(mx.ones(3), -1))
err("topk_axis_out_of_range", IndexError, "topk", lambda: mx.topk(mx.ones(3), 1, axis=1))

# ---- indexing ----------------------------------------------------------------

err("index_too_many", ValueError, ("index", "slice", "getitem"), lambda: a23()[0, 0, 0])
err("index_out_of_range", IndexError, ("index", "slice", "getitem"), lambda: a23()[5], mlx=UNOWNED)
err("index_negative_out_of_range", IndexError, ("index", "slice", "getitem"), lambda: a23()[-3], mlx=UNOWNED)
err("index_scalar", ValueError, ("index", "slice", "getitem"), lambda: mx.array(1.0)[0])
err("index_string", ValueError, ("index", "getitem"), lambda: a23()["a"])
err("index_float", ValueError, ("index", "getitem"), lambda: a23()[1.5])
err("index_float_array", ValueError, ("index", "gather", "take"), lambda: a23()[mx.array([0.5])])
err("index_two_ellipsis", ValueError, ("index", "getitem", "ellipsis"), lambda: a23()[..., ...])
err("index_slice_step_zero", ValueError, ("index", "slice", "getitem"), lambda: a23()[::0], mlx=CRASH)
ok("index_slice_past_end", lambda: a23()[5:9], lambda: np.zeros((0, 3), np.float32))
ok("index_slice_reversed", lambda: a23()[1:0], lambda: np.zeros((0, 3), np.float32))
ok("index_negative_step", lambda: a23()[:, ::-2], lambda: n23()[:, ::-2])
ok("index_none", lambda: a23()[None, :, None].shape, lambda: (1, 2, 1, 3))
ok("index_ellipsis_only", lambda: a23()[...], lambda: n23())
ok("index_empty_array", lambda: a23()[mx.array([], mx.int32)], lambda: np.zeros((0, 3), np.float32))
ok("index_bool_mask", lambda: mx.arange(4)[mx.array([True, False, True, False])], lambda: i32([0, 2]), mlx=ValueError)
err(
    "index_bool_mask_wrong_size",
    IndexError,
    ("index", "mask", "getitem"),
    lambda: mx.arange(4)[mx.array([True, False])],
    mlx=ValueError,
)
err(
    "setitem_shape_mismatch",
    ValueError,
    ("setitem", "slice_update", "broadcast", "index"),
    lambda: a23().__setitem__(0, mx.ones(4)),
)
err("setitem_out_of_range", IndexError, ("setitem", "index", "slice"), lambda: a23().__setitem__(5, 1.0), mlx=UNOWNED)
err("setitem_string", ValueError, ("setitem", "index"), lambda: a23().__setitem__("a", 1.0))
err("take_axis_out_of_range", IndexError, "take", lambda: mx.take(a23(), mx.array([0]), axis=2))
err("take_float_indices", ValueError, "take", lambda: mx.take(a23(), mx.array([0.0]), axis=0))
err("take_scalar_source", IndexError, "take", lambda: mx.take(mx.array(1.0), mx.array([0]), axis=0))
ok("take_wraps_negative", lambda: mx.take(mx.arange(4), mx.array([-1])), lambda: i32([3]))
ok("take_int_index", lambda: mx.take(a23(), 1, axis=1), lambda: f32([1, 4]))
err("take_along_axis_ndim", ValueError, "take_along_axis", lambda: mx.take_along_axis(a23(), mx.array([0]), axis=0))
err(
    "take_along_axis_axis_out_of_range",
    IndexError,
    "take_along_axis",
    lambda: mx.take_along_axis(a23(), mx.zeros((1, 3), mx.int32), axis=2),
)
err(
    "take_along_axis_float",
    ValueError,
    "take_along_axis",
    lambda: mx.take_along_axis(a23(), mx.zeros((1, 3)), axis=0),
    mlx=UNOWNED,
)
err(
    "put_along_axis_ndim",
    ValueError,
    "put_along_axis",
    lambda: mx.put_along_axis(a23(), mx.array([0]), mx.array([1.0]), axis=0),
)
err(
    "put_along_axis_float",
    ValueError,
    "put_along_axis",
    lambda: mx.put_along_axis(a23(), mx.zeros((1, 3)), mx.ones((1, 3)), axis=0),
    mlx=OK,
)
err("at_add_shape", ValueError, ("add", "scatter", "broadcast", "at"), lambda: a23().at[0].add(mx.ones(5)))
err("at_string", ValueError, ("at", "index", "add"), lambda: a23().at["x"].add(1.0))
ok("at_add_repeated", lambda: mx.zeros(3).at[mx.array([0, 0, 2])].add(1.0), lambda: f32([2, 0, 1]))
ok("at_max", lambda: mx.zeros(3).at[mx.array([1, 1])].maximum(mx.array([5.0, 7.0])), lambda: f32([0, 7, 0]))
err(
    "slice_update_shape",
    ValueError,
    ("slice_update", "broadcast"),
    lambda: mx.slice_update(mx.zeros(4), mx.ones(5), mx.array([0]), axes=(0,)),
)
ok(
    "slice_update",
    lambda: mx.slice_update(mx.zeros(4), mx.ones(3), mx.array([0]), axes=(0,)),
    lambda: f32([1, 1, 1, 0]),
)
err("gather_axis_out_of_range", IndexError, ("take", "gather"), lambda: mx.take(mx.ones(3), mx.array([0]), axis=-2))


# Index expressions on a (2, 3, 4) array against NumPy's: each builds its index
# from a module m (mx or np).
def a234():
    return mx.arange(24).reshape(2, 3, 4)


def n234():
    return np.arange(24, dtype=np.int32).reshape(2, 3, 4)


for name, key in [
    ("int", lambda m: 0),
    ("negative_int", lambda m: -1),
    ("two_ints", lambda m: (1, 2)),
    ("ellipsis_int", lambda m: (..., 0)),
    ("none_int", lambda m: (None, 0)),
    ("slice_none_int", lambda m: (slice(None), None, 1)),
    ("step_2", lambda m: slice(None, None, 2)),
    ("step_minus_1", lambda m: slice(None, None, -1)),
    ("empty_slice", lambda m: slice(1, 0)),
    ("clipped_slice", lambda m: slice(-100, 100)),
    ("three_slices", lambda m: (slice(None), slice(None, None, -2), slice(1, None))),
    ("list", lambda m: [0, 1]),
    ("nested_list", lambda m: [[0], [1]]),
    ("negative_list", lambda m: [-1, 0]),
    ("ellipsis_none", lambda m: (..., None)),
    ("int_ellipsis_int", lambda m: (0, ..., 1)),
    ("two_lists", lambda m: ([0, 1], [1, 2])),
    ("lists_around_slice", lambda m: ([0, 1], slice(None), [1, 2])),
    ("slice_then_lists", lambda m: (slice(None), [0, 2], [1, 3])),
    ("array_and_int", lambda m: (m.array([0, 1]), 0)),
    ("arrays_around_ellipsis", lambda m: (m.array([[1]]), ..., m.array([2]))),
    ("none_alone", lambda m: None),
    ("empty_tuple", lambda m: ()),
    ("scalar_arrays", lambda m: (m.array(1), m.array(2))),
    ("empty_int_array", lambda m: m.array([], dtype=m.int32)),
    ("all_slices_none", lambda m: (slice(None),) * 3 + (None,)),
]:
    ok(f"index_{name}", lambda key=key: a234()[key(mx)], lambda key=key: n234()[key(np)])


# ---- matmul and products -----------------------------------------------------

err("matmul_mismatch", ValueError, "matmul", lambda: mx.ones((2, 3)) @ mx.ones((4, 5)))
err("matmul_scalar", ValueError, "matmul", lambda: mx.matmul(mx.array(1.0), mx.ones(2)))
err("matmul_batch_mismatch", ValueError, ("matmul", "broadcast"), lambda: mx.ones((2, 2, 3)) @ mx.ones((3, 3, 4)))
err("matmul_string", ValueError, "matmul", lambda: mx.matmul(mx.ones(2), "x"), mlx=TypeError)
ok("matmul_vectors", lambda: mx.ones(3) @ mx.ones(3), lambda: np.array(3, np.float32))
ok("matmul_empty_inner", lambda: mx.ones((2, 0)) @ mx.ones((0, 3)), lambda: np.zeros((2, 3), np.float32))
ok("matmul_empty_outer", lambda: mx.ones((0, 2)) @ mx.ones((2, 3)), lambda: np.zeros((0, 3), np.float32))
err("matmul_int", ValueError, "matmul", lambda: mx.array([[1, 2]]) @ mx.array([[3], [4]]))
err("addmm_mismatch", ValueError, "addmm", lambda: mx.addmm(mx.ones(2), mx.ones((2, 3)), mx.ones((2, 2))))
err(
    "addmm_c_incompatible",
    ValueError,
    ("addmm", "broadcast"),
    lambda: mx.addmm(mx.ones((3, 3)), mx.ones((2, 2)), mx.ones((2, 2))),
)
err("inner_mismatch", ValueError, "inner", lambda: mx.inner(mx.ones(2), mx.ones(3)))
ok("outer_scalars", lambda: mx.outer(mx.array(2.0), mx.array([1.0, 3.0])), lambda: f32([[2, 6]]))
err("tensordot_mismatch", ValueError, "tensordot", lambda: mx.tensordot(mx.ones((2, 3)), mx.ones((2, 3)), axes=1))
err("tensordot_negative", ValueError, "tensordot", lambda: mx.tensordot(mx.ones(2), mx.ones(2), axes=-1))
err(
    "tensordot_axes_length",
    ValueError,
    "tensordot",
    lambda: mx.tensordot(mx.ones((2, 3)), mx.ones((3, 2)), axes=([0, 1], [1])),
)
err("einsum_bad_subscripts", ValueError, "einsum", lambda: mx.einsum("ij,jk", mx.ones((2, 3))))
err("einsum_dim_mismatch", ValueError, "einsum", lambda: mx.einsum("ij,jk->ik", mx.ones((2, 3)), mx.ones((4, 2))))
err("einsum_bad_char", ValueError, "einsum", lambda: mx.einsum("i1->i", mx.ones((2, 3))))
err("einsum_output_not_in_input", ValueError, "einsum", lambda: mx.einsum("ij->k", mx.ones((2, 3))))
ok("einsum_trace", lambda: mx.einsum("ii", mx.eye(3)), lambda: np.array(3, np.float32))
err("kron_string", ValueError, "kron", lambda: mx.kron(mx.ones(2), "a"), mlx=TypeError)
err(
    "block_masked_mm_block_size",
    ValueError,
    "block_masked_mm",
    lambda: mx.block_masked_mm(mx.ones((4, 4)), mx.ones((4, 4)), block_size=3),
    mlx=OK,
)

# ---- linalg ------------------------------------------------------------------

for op, call in [
    ("inv", lambda a: mx.linalg.inv(a)),
    ("cholesky", lambda a: mx.linalg.cholesky(a)),
    ("qr", lambda a: mx.linalg.qr(a)),
    ("svd", lambda a: mx.linalg.svd(a)),
    ("eigh", lambda a: mx.linalg.eigh(a)),
    ("eigvalsh", lambda a: mx.linalg.eigvalsh(a)),
    ("eig", lambda a: mx.linalg.eig(a)),
    ("eigvals", lambda a: mx.linalg.eigvals(a)),
    ("pinv", lambda a: mx.linalg.pinv(a)),
    ("lu", lambda a: mx.linalg.lu(a)),
    ("lu_factor", lambda a: mx.linalg.lu_factor(a)),
    ("tri_inv", lambda a: mx.linalg.tri_inv(a)),
    ("cholesky_inv", lambda a: mx.linalg.cholesky_inv(a)),
]:
    err(f"linalg_{op}_1d", ValueError, op, lambda call=call: call(mx.ones(3)))
    err(f"linalg_{op}_int", ValueError, op, lambda call=call: call(mx.eye(2, dtype=mx.int32)))
    ok(f"linalg_{op}_list", lambda call=call: call([[2.0, 0.0], [0.0, 2.0]]) is not None, lambda: True, mlx=TypeError)
    if op not in ("qr", "svd", "pinv", "lu", "lu_factor"):
        err(f"linalg_{op}_not_square", ValueError, op, lambda call=call: call(mx.ones((2, 3))))
err("linalg_solve_mismatch", ValueError, "solve", lambda: mx.linalg.solve(mx.eye(2), mx.ones(3)))
err("linalg_solve_not_square", ValueError, "solve", lambda: mx.linalg.solve(mx.ones((2, 3)), mx.ones(2)))
err(
    "linalg_solve_triangular_mismatch",
    ValueError,
    "solve_triangular",
    lambda: mx.linalg.solve_triangular(mx.eye(2), mx.ones(3)),
)
err("linalg_norm_bad_ord", ValueError, "norm", lambda: mx.linalg.norm(mx.ones((2, 2)), ord="bad"))
err("linalg_norm_ord_3_matrix", ValueError, "norm", lambda: mx.linalg.norm(mx.ones((2, 2)), ord=3))
err("linalg_norm_fro_vector", ValueError, "norm", lambda: mx.linalg.norm(mx.ones(2), ord="fro"))
err("linalg_norm_axis_out_of_range", IndexError, "norm", lambda: mx.linalg.norm(mx.ones(2), axis=1))
err("linalg_norm_three_axes", ValueError, "norm", lambda: mx.linalg.norm(mx.ones((2, 2, 2)), axis=(0, 1, 2)))
ok("linalg_norm_empty", lambda: mx.linalg.norm(mx.zeros((0,))), lambda: np.array(0, np.float32))
ok("linalg_norm_inf", lambda: mx.linalg.norm(mx.array([1.0, -3.0]), ord=float("inf")), lambda: np.array(3, np.float32))
ok("linalg_norm_zero_ord", lambda: mx.linalg.norm(mx.array([1.0, 0.0, 2.0]), ord=0), lambda: np.array(2, np.float32))
err("linalg_cross_wrong_size", ValueError, "cross", lambda: mx.linalg.cross(mx.ones(4), mx.ones(4)))
err("linalg_cross_axis", IndexError, "cross", lambda: mx.linalg.cross(mx.ones(3), mx.ones(3), axis=1))
ok("linalg_cross", lambda: mx.linalg.cross(mx.array([1.0, 0, 0]), mx.array([0.0, 1, 0])), lambda: f32([0, 0, 1]))
ok("linalg_inv_empty_batch", lambda: mx.linalg.inv(mx.zeros((0, 2, 2))).shape, lambda: (0, 2, 2))

# ---- fft ---------------------------------------------------------------------

for op in ["fft", "ifft", "rfft", "irfft"]:
    f = lambda *a, op=op, **k: getattr(mx.fft, op)(*a, **k)  # noqa: E731
    err(f"fft_{op}_axis_out_of_range", IndexError, op, lambda f=f: f(mx.ones(4), axis=1))
    err(f"fft_{op}_n_zero", ValueError, op, lambda f=f: f(mx.ones(4), n=0))
    err(f"fft_{op}_n_negative", ValueError, op, lambda f=f: f(mx.ones(4), n=-2))
    err(f"fft_{op}_scalar", IndexError, op, lambda f=f: f(mx.array(1.0)))
    err(f"fft_{op}_n_float", TypeError, op, lambda f=f: f(mx.ones(4), n=2.5))
for op in ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn"]:
    f = lambda *a, op=op, **k: getattr(mx.fft, op)(*a, **k)  # noqa: E731
    op = (op, op.replace("2", "n"))
    err(f"fft_{op[0]}_repeat_axes", ValueError, op, lambda f=f: f(mx.ones((4, 4)), axes=(0, 0)))
    err(f"fft_{op[0]}_axes_out_of_range", IndexError, op, lambda f=f: f(mx.ones((4, 4)), axes=(0, 2)))
    err(f"fft_{op[0]}_s_length", ValueError, op, lambda f=f: f(mx.ones((4, 4)), s=(4,), axes=(0, 1)))
    if "2" in op[0]:
        err(f"fft_{op[0]}_1d", IndexError, op, lambda f=f: f(mx.ones(4)))
    else:
        err(f"fft_{op[0]}_scalar", ValueError, op, lambda f=f: f(mx.array(1.0)))
ok("fft_rfft_complex_input_dtype", lambda: mx.fft.rfft(mx.ones(4)).dtype == mx.complex64, lambda: True)
ok("fft_pads", lambda: mx.fft.fft(mx.ones(2), n=4), lambda: np.fft.fft(np.ones(2), n=4).astype(np.complex64))
ok("fft_crops", lambda: mx.fft.fft(mx.arange(4.0), n=2), lambda: np.fft.fft(np.arange(4.0), n=2).astype(np.complex64))
err("fft_fftshift_axes", IndexError, "fftshift", lambda: mx.fft.fftshift(mx.ones(4), axes=(1,)))

# ---- random ------------------------------------------------------------------

for op, call in [
    ("uniform", lambda s: mx.random.uniform(shape=s)),
    ("normal", lambda s: mx.random.normal(shape=s)),
    ("randint", lambda s: mx.random.randint(0, 5, shape=s)),
    ("bernoulli", lambda s: mx.random.bernoulli(0.5, shape=s)),
    ("truncated_normal", lambda s: mx.random.truncated_normal(-1.0, 1.0, shape=s)),
    ("gumbel", lambda s: mx.random.gumbel(shape=s)),
    ("laplace", lambda s: mx.random.laplace(shape=s)),
]:
    err(f"random_{op}_negative_shape", ValueError, op, lambda call=call: call((-1,)))
    err(f"random_{op}_float_shape", TypeError, op, lambda call=call: call((1.5,)))
    ok(f"random_{op}_empty", lambda call=call: call((0, 2)).shape, lambda: (0, 2))
err("random_uniform_int_dtype", ValueError, "uniform", lambda: mx.random.uniform(shape=(2,), dtype=mx.int32))
err(
    "random_uniform_bounds_shape",
    ValueError,
    ("uniform", "broadcast"),
    lambda: mx.random.uniform(mx.zeros(3), mx.ones(3), shape=(2,)),
)
err("random_normal_int_dtype", ValueError, "normal", lambda: mx.random.normal(shape=(2,), dtype=mx.int32))
err("random_randint_float_dtype", ValueError, "randint", lambda: mx.random.randint(0, 5, shape=(2,), dtype=mx.float32))
err(
    "random_bernoulli_p_shape",
    ValueError,
    ("bernoulli", "broadcast"),
    lambda: mx.random.bernoulli(mx.ones(3) * 0.5, shape=(2,)),
)
err("random_key_negative", ValueError, "key", lambda: mx.random.key(-1), mlx=TypeError)
err("random_key_float", TypeError, "key", lambda: mx.random.key(1.5))
err("random_seed_string", TypeError, "seed", lambda: mx.random.seed("a"))
ok("random_split_zero", lambda: mx.random.split(mx.random.key(0), 0).shape, lambda: (0, 2))
err("random_split_bad_key", ValueError, ("split", "key"), lambda: mx.random.split(mx.ones(3), 2))
err(
    "random_bad_key_shape",
    ValueError,
    ("uniform", "key", "bits"),
    lambda: mx.random.uniform(shape=(2,), key=mx.array([1, 2, 3], mx.uint32)),
)
err("random_categorical_axis", IndexError, "categorical", lambda: mx.random.categorical(mx.zeros(3), axis=1))
err(
    "random_categorical_shape_and_samples",
    ValueError,
    "categorical",
    lambda: mx.random.categorical(mx.zeros(3), shape=(2,), num_samples=2),
)
err(
    "random_categorical_shape_mismatch",
    ValueError,
    ("categorical", "broadcast"),
    lambda: mx.random.categorical(mx.zeros((2, 3)), shape=(4,)),
)
err(
    "random_permutation_axis",
    IndexError,
    ("permutation", "take", "argsort"),
    lambda: mx.random.permutation(mx.ones(3), axis=2),
)
ok("random_permutation_zero", lambda: mx.random.permutation(0).shape, lambda: (0,))
err("random_permutation_negative", ValueError, ("permutation", "arange", "shape"), lambda: mx.random.permutation(-1))
err(
    "random_multivariate_normal_shape",
    ValueError,
    "multivariate_normal",
    lambda: mx.random.multivariate_normal(mx.zeros(2), mx.eye(3)),
)
err(
    "random_multivariate_normal_1d_cov",
    ValueError,
    "multivariate_normal",
    lambda: mx.random.multivariate_normal(mx.zeros(2), mx.ones(2)),
)
ok(
    "random_randint_empty_range",
    lambda: mx.random.randint(5, 5, shape=(3,), key=mx.random.key(0)),
    lambda: i32([5, 5, 5]),
)

# ---- convolution -------------------------------------------------------------

x1, w1 = (lambda: mx.ones((1, 8, 2))), (lambda: mx.ones((3, 3, 2)))
x2, w2 = (lambda: mx.ones((1, 6, 6, 2))), (lambda: mx.ones((3, 3, 3, 2)))
for op, call, x, w in [
    ("conv1d", lambda x, w, **k: mx.conv1d(x, w, **k), x1, w1),
    ("conv2d", lambda x, w, **k: mx.conv2d(x, w, **k), x2, w2),
    ("conv_transpose1d", lambda x, w, **k: mx.conv_transpose1d(x, w, **k), x1, w1),
    ("conv_transpose2d", lambda x, w, **k: mx.conv_transpose2d(x, w, **k), x2, w2),
]:
    err(f"{op}_stride_zero", ValueError, (op, "conv"), lambda c=call, x=x, w=w: c(x(), w(), stride=0))
    err(f"{op}_stride_negative", ValueError, (op, "conv"), lambda c=call, x=x, w=w: c(x(), w(), stride=-1))
    err(f"{op}_dilation_zero", ValueError, (op, "conv"), lambda c=call, x=x, w=w: c(x(), w(), dilation=0))
    err(f"{op}_padding_negative", ValueError, (op, "conv"), lambda c=call, x=x, w=w: c(x(), w(), padding=-1), mlx=OK)
    err(f"{op}_groups_zero", ValueError, (op, "conv"), lambda c=call, x=x, w=w: c(x(), w(), groups=0), mlx=CRASH)
    err(f"{op}_groups_not_dividing", ValueError, (op, "conv"), lambda c=call, x=x, w=w: c(x(), w(), groups=3))
    err(
        f"{op}_channel_mismatch",
        ValueError,
        (op, "conv"),
        lambda c=call, x=x, w=w: c(mx.concatenate([x(), x()], axis=-1), w()),
    )
    # MLX's conv_transpose2d reads past a SmallVector here.
    odd = IndexError if op == "conv_transpose2d" else None
    err(f"{op}_wrong_ndim", ValueError, (op, "conv"), lambda c=call, w=w: c(mx.ones((8, 2)), w()), mlx=odd)
    err(f"{op}_weight_ndim", ValueError, (op, "conv"), lambda c=call, x=x: c(x(), mx.ones((3, 2))), mlx=odd)
    err(
        f"{op}_int_input",
        ValueError,
        (op, "conv"),
        lambda c=call, x=x, w=w: c(x().astype(mx.int32), w().astype(mx.int32)),
    )
    big = lambda c=call, x=x: c(x(), mx.ones((3,) + (9,) * (x().ndim - 2) + (2,)))  # noqa: E731
    if op.startswith("conv_transpose"):
        ok(
            f"{op}_kernel_bigger_than_input",
            lambda big=big: big().shape,
            lambda x=x: (1,) + (x().shape[1] + 8,) * (x().ndim - 2) + (3,),
        )
    else:
        err(f"{op}_kernel_too_big", ValueError, (op, "conv"), big)
err(
    "conv_transpose1d_output_padding_too_big",
    ValueError,
    ("conv_transpose1d", "conv"),
    lambda: mx.conv_transpose1d(x1(), w1(), stride=2, output_padding=2),
    mlx=OK,
)
err(
    "conv_general_bad_stride_length",
    ValueError,
    ("conv_general", "conv"),
    lambda: mx.conv_general(x2(), w2(), stride=(1, 1, 1)),
)
err(
    "conv3d_wrong_ndim",
    ValueError,
    ("conv3d", "conv"),
    lambda: mx.conv3d(mx.ones((1, 4, 4, 2)), mx.ones((1, 1, 1, 1, 2))),
)
ok("conv1d_empty_batch", lambda: mx.conv1d(mx.ones((0, 8, 2)), w1()).shape, lambda: (0, 6, 3))
ok("conv1d_values", lambda: mx.conv1d(mx.ones((1, 4, 1)), mx.ones((1, 2, 1))), lambda: f32([[[2], [2], [2]]]))

# ---- files -------------------------------------------------------------------

err("load_missing", RuntimeError, ("load", "missing.npy"), lambda: mx.load(path("missing.npy")))
err("load_unknown_extension", ValueError, "load", lambda: mx.load(path("x.unknown")))
err("load_empty_npy", ValueError, ("load", "empty.npy"), lambda: mx.load(path("empty.npy")), mlx=RuntimeError)
err("load_truncated_npy", ValueError, ("load", "junk.npy"), lambda: mx.load(path("junk.npy")), mlx=IndexError)
err(
    "load_corrupt_safetensors",
    ValueError,
    ("load", "junk.safetensors"),
    lambda: mx.load(path("junk.safetensors")),
    mlx=RuntimeError,
)
err(
    "load_huge_header_safetensors",
    ValueError,
    ("load", "big.safetensors"),
    lambda: mx.load(path("big.safetensors")),
    mlx=RuntimeError,
)
err("load_corrupt_npz", ValueError, ("load", "junk.npz"), lambda: mx.load(path("junk.npz")))
err("load_corrupt_gguf", ValueError, ("load", "junk.gguf"), lambda: mx.load(path("junk.gguf")), mlx=RuntimeError)
err("load_directory", RuntimeError, ("load", "dir.npy"), lambda: mx.load(path("dir.npy")))
err("load_bad_format", ValueError, "load", lambda: mx.load(path("empty.npy"), format="xyz"))
err("load_int_path", TypeError, "load", lambda: mx.load(5), mlx=ValueError)
err("save_non_array", ValueError, "save", lambda: mx.save(path("s.npy"), "text"), mlx=TypeError)
err("save_to_directory", RuntimeError, ("save", "dir.npy"), lambda: mx.save(path("dir.npy"), mx.ones(2)))
err("save_missing_folder", RuntimeError, ("save", "nofolder"), lambda: mx.save(path("nofolder/a.npy"), mx.ones(2)))
err("savez_non_array", ValueError, "savez", lambda: mx.savez(path("s.npz"), a="x"), mlx=RuntimeError)
err(
    "save_safetensors_not_dict",
    TypeError,
    "save_safetensors",
    lambda: mx.save_safetensors(path("s.safetensors"), mx.ones(2)),
)
ok(
    "save_safetensors_python_scalar",
    lambda: (mx.save_safetensors(path("s.safetensors"), {"a": 1}), mx.load(path("s.safetensors"))["a"])[1],
    lambda: np.array(1, np.int32),
    mlx=RuntimeError,
)
err(
    "save_safetensors_bad_metadata",
    ValueError,
    "save_safetensors",
    lambda: mx.save_safetensors(path("s.safetensors"), {"a": mx.ones(2)}, metadata={"k": 1}),
)
err(
    "save_gguf_bad_metadata",
    ValueError,
    "save_gguf",
    lambda: mx.save_gguf(path("s.gguf"), {"a": mx.ones(2)}, {"k": object()}),
    mlx=RuntimeError,
)
ok(
    "save_load_empty",
    lambda: (mx.save(path("e.npy"), mx.zeros((0, 2))), mx.load(path("e.npy")))[1],
    lambda: np.zeros((0, 2), np.float32),
)
ok(
    "save_load_scalar_safetensors",
    lambda: (mx.save_safetensors(path("sc.safetensors"), {"a": mx.array(3.0)}), mx.load(path("sc.safetensors"))["a"])[
        1
    ],
    lambda: np.array(3, np.float32),
)

# ---- nn layers, losses, optimizers --------------------------------------------

err("nn_linear_wrong_input", ValueError, ("Linear", "matmul", "addmm"), lambda: nn.Linear(3, 4)(mx.ones((2, 5))))
err("nn_linear_negative", ValueError, ("Linear", "uniform", "full", "shape"), lambda: nn.Linear(-1, 4))
err("nn_linear_float_dims", ValueError, ("Linear", "uniform", "shape"), lambda: nn.Linear(2.5, 4), mlx=TypeError)
err("nn_conv2d_wrong_input", ValueError, ("Conv2d", "conv"), lambda: nn.Conv2d(2, 3, 3)(mx.ones((1, 6, 6, 5))))
err("nn_conv2d_wrong_ndim", ValueError, ("Conv2d", "conv"), lambda: nn.Conv2d(2, 3, 3)(mx.ones((6, 6, 2))))
err("nn_conv1d_stride_zero", ValueError, ("Conv1d", "conv"), lambda: nn.Conv1d(2, 3, 3, stride=0)(mx.ones((1, 6, 2))))
err(
    "nn_embedding_float_indices",
    ValueError,
    ("Embedding", "take", "gather", "index"),
    lambda: nn.Embedding(4, 2)(mx.array([0.5])),
)
err(
    "nn_layer_norm_dims", ValueError, ("LayerNorm", "layer_norm", "broadcast"), lambda: nn.LayerNorm(4)(mx.ones((2, 3)))
)
err("nn_rms_norm_dims", ValueError, ("RMSNorm", "rms_norm", "broadcast"), lambda: nn.RMSNorm(4)(mx.ones((2, 3))))
err(
    "nn_group_norm_groups",
    ValueError,
    ("GroupNorm", "group", "reshape"),
    lambda: nn.GroupNorm(3, 4)(mx.ones((1, 2, 4))),
)
err(
    "nn_batch_norm_dims", ValueError, ("BatchNorm", "broadcast", "batch_norm"), lambda: nn.BatchNorm(4)(mx.ones((2, 3)))
)
err(
    "nn_multihead_indivisible", ValueError, ("MultiHeadAttention", "dims", "heads"), lambda: nn.MultiHeadAttention(6, 4)
)
err("nn_dropout_p_one", ValueError, ("Dropout", "p"), lambda: nn.Dropout(p=1.0))
err("nn_dropout_p_negative", ValueError, ("Dropout", "p"), lambda: nn.Dropout(p=-0.1))
err("nn_rope_odd", ValueError, ("RoPE", "rope"), lambda: nn.RoPE(3)(mx.ones((1, 2, 3))))
err("nn_maxpool_kernel_zero", ValueError, ("MaxPool", "pool", "kernel"), lambda: nn.MaxPool2d(0)(mx.ones((1, 4, 4, 1))))
err(
    "nn_maxpool_wrong_ndim",
    ValueError,
    ("MaxPool", "pool", "ndim", "dimension"),
    lambda: nn.MaxPool2d(2)(mx.ones((4, 4))),
)
err(
    "nn_upsample_bad_mode",
    ValueError,
    ("Upsample", "mode"),
    lambda: nn.Upsample(2, mode="bogus")(mx.ones((1, 2, 2, 1))),
)
err(
    "nn_sequential_bad_input",
    ValueError,
    ("Linear", "matmul", "addmm"),
    lambda: nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(4, 1))(mx.ones((1, 2))),
)
err(
    "nn_load_weights_missing",
    ValueError,
    ("load_weights", "Missing", "missing"),
    lambda: nn.Linear(2, 2).load_weights([("weight", mx.ones((2, 2)))]),
)
err(
    "nn_load_weights_shape",
    ValueError,
    ("load_weights", "shape"),
    lambda: nn.Linear(2, 2).load_weights([("weight", mx.ones((3, 2))), ("bias", mx.ones(2))]),
)
err(
    "nn_load_weights_unknown",
    ValueError,
    ("load_weights", "Unrecognized", "unrecognized", "unknown"),
    lambda: nn.Linear(2, 2).load_weights([("weight", mx.ones((2, 2))), ("bias", mx.ones(2)), ("x", mx.ones(1))]),
)
for loss in [
    "cross_entropy",
    "binary_cross_entropy",
    "mse_loss",
    "l1_loss",
    "nll_loss",
    "kl_div_loss",
    "smooth_l1_loss",
    "huber_loss",
    "log_cosh_loss",
]:
    err(
        f"nn_losses_{loss}_bad_reduction",
        ValueError,
        (loss, "reduction"),
        lambda loss=loss: getattr(nn.losses, loss)(
            mx.zeros((2, 3)),
            (mx.zeros((2, 3)) if loss not in ("cross_entropy", "nll_loss") else mx.zeros(2, mx.int32)),
            reduction="bad",
        ),
    )
err("nn_losses_mse_shape", ValueError, ("mse_loss", "shape"), lambda: nn.losses.mse_loss(mx.ones(3), mx.ones(2)))
err("nn_losses_l1_shape", ValueError, ("l1_loss", "shape"), lambda: nn.losses.l1_loss(mx.ones(3), mx.ones(2)))
err(
    "nn_losses_cross_entropy_targets",
    ValueError,
    ("cross_entropy", "shape", "take_along_axis"),
    lambda: nn.losses.cross_entropy(mx.zeros((2, 3)), mx.zeros(3, mx.int32)),
)
err(
    "nn_losses_smooth_l1_shape",
    ValueError,
    ("smooth_l1_loss", "shape"),
    lambda: nn.losses.smooth_l1_loss(mx.ones(3), mx.ones(2)),
)
err(
    "nn_losses_cosine_shape",
    ValueError,
    ("cosine_similarity_loss", "broadcast", "multiply"),
    lambda: nn.losses.cosine_similarity_loss(mx.ones((2, 3)), mx.ones((2, 4))),
)
err("nn_init_he_1d", ValueError, ("he_normal", "fan", "init"), lambda: nn.init.he_normal()(mx.zeros(3)))
err("nn_init_glorot_1d", ValueError, ("glorot_uniform", "fan", "init"), lambda: nn.init.glorot_uniform()(mx.zeros(3)))
ok(
    "optim_update_partial_tree",
    lambda: optim.SGD(0.1).update(nn.Linear(2, 2), {"weight": mx.ones((2, 2))}),
    lambda: None,
)
for name, layer, x in [
    ("Linear_scalar", lambda: nn.Linear(2, 3), lambda: mx.array(1.0)),
    ("Bilinear_mismatch", lambda: nn.Bilinear(2, 3, 4), lambda: (mx.ones((1, 2)), mx.ones((1, 2)))),
    ("Conv1d_2d_input", lambda: nn.Conv1d(2, 3, 3), lambda: mx.ones((4, 2))),
    ("Conv3d_4d_input", lambda: nn.Conv3d(2, 3, 1), lambda: mx.ones((1, 4, 4, 2))),
    ("ConvTranspose2d_channels", lambda: nn.ConvTranspose2d(2, 3, 3), lambda: mx.ones((1, 5, 5, 4))),
    ("Embedding_float_indices", lambda: nn.Embedding(4, 2), lambda: mx.array([1.5])),
    ("LayerNorm_wrong_dims", lambda: nn.LayerNorm(3), lambda: mx.ones((2, 5))),
    ("GroupNorm_channels", lambda: nn.GroupNorm(2, 4), lambda: mx.ones((1, 3, 6))),
    ("InstanceNorm_channels", lambda: nn.InstanceNorm(4, affine=True), lambda: mx.ones((1, 3, 3))),
    ("BatchNorm_channels", lambda: nn.BatchNorm(4), lambda: mx.ones((2, 3, 5))),
    ("MultiHeadAttention_dims", lambda: nn.MultiHeadAttention(8, 2), lambda: (mx.ones((1, 3, 6)),) * 3),
    ("AvgPool1d_wrong_ndim", lambda: nn.AvgPool1d(2), lambda: mx.ones((4, 2))),
    ("MaxPool1d_kernel_too_big", lambda: nn.MaxPool1d(5), lambda: mx.ones((1, 4, 2))),
    ("RNN_wrong_features", lambda: nn.RNN(3, 4), lambda: mx.ones((2, 5, 6))),
    ("GRU_wrong_features", lambda: nn.GRU(3, 4), lambda: mx.ones((2, 5, 6))),
    ("LSTM_wrong_features", lambda: nn.LSTM(3, 4), lambda: mx.ones((2, 5, 6))),
    ("TransformerEncoder_dims", lambda: nn.TransformerEncoder(1, 8, 2), lambda: (mx.ones((1, 3, 6)), None)),
]:
    op = name.split("_")[0]
    call = lambda layer=layer, x=x: layer()(*(x() if isinstance(x(), tuple) else (x(),)))  # noqa: E731
    ops = (op, "matmul", "addmm", "conv", "broadcast", "reshape", "take", "index", "layer_norm")
    err(f"nn_{name}", ValueError, ops, call, mlx=OK if name == "MaxPool1d_kernel_too_big" else None)
for name, make in [
    ("SGD_nesterov_without_momentum", lambda: optim.SGD(0.1, nesterov=True)),
    ("Adam_string_lr", lambda: optim.Adam("fast")),
]:
    err(
        f"optim_{name}",
        ValueError,
        (name.split("_")[0], "lr", "learning_rate"),
        lambda make=make: make().update({"w": mx.ones(2)}, {"w": mx.ones(2)}),
    )
err(
    "optim_update_shape_mismatch",
    ValueError,
    ("SGD", "update", "broadcast", "subtract", "multiply"),
    lambda: optim.SGD(0.1).update({"w": mx.ones(2)}, {"w": mx.ones(3)}),
)

ok("nn_linear_empty_batch", lambda: nn.Linear(2, 3)(mx.ones((0, 2))).shape, lambda: (0, 3))
ok("nn_relu_empty", lambda: nn.relu(mx.zeros((0,))), lambda: np.zeros((0,), np.float32))
ok(
    "nn_softmax_all_neg_inf_row",
    lambda: mx.isnan(mx.softmax(mx.array([-np.inf, -np.inf]))).all(),
    lambda: np.array(True),
)

# ---- transforms --------------------------------------------------------------

err("grad_non_scalar", ValueError, ("grad", "scalar"), lambda: mx.grad(lambda x: x * 2)(mx.ones(2)))
err("grad_not_callable", TypeError, "grad", lambda: mx.grad(3)(mx.ones(2)))
err(
    "grad_argnums_out_of_range",
    ValueError,
    ("grad", "argnums"),
    lambda: mx.grad(lambda x: x.sum(), argnums=2)(mx.ones(2)),
)
err("grad_returns_none", ValueError, ("grad", "value_and_grad"), lambda: mx.grad(lambda x: None)(mx.ones(2)))
# Derivatives of integer results are zero (docs/differences.md); MLX's are not.
ok("grad_int_input_is_zero", lambda: mx.grad(lambda x: x.sum())(mx.array([1, 2])), lambda: i32([0, 0]), mlx=OK)
err(
    "vjp_cotangent_count",
    ValueError,
    "vjp",
    lambda: mx.vjp(lambda x: x * 2, [mx.ones(2)], [mx.ones(2), mx.ones(2)]),
    mlx=OK,
)
err(
    "vjp_cotangent_shape",
    ValueError,
    ("vjp", "shape", "broadcast"),
    lambda: mx.vjp(lambda x: x * 2, [mx.ones(2)], [mx.ones(3)]),
)
err("jvp_tangent_count", ValueError, "jvp", lambda: mx.jvp(lambda x: x * 2, [mx.ones(2)], []))
err(
    "jvp_tangent_shape",
    ValueError,
    ("jvp", "shape", "broadcast"),
    lambda: mx.jvp(lambda x: x * 2, [mx.ones(2)], [mx.ones(3)]),
)
err("vmap_axis_out_of_range", IndexError, "vmap", lambda: mx.vmap(lambda x: x * 2, in_axes=1)(mx.ones(3)))
err("vmap_size_mismatch", ValueError, "vmap", lambda: mx.vmap(lambda x, y: x + y)(mx.ones(3), mx.ones(4)))
err("vmap_in_axes_length", ValueError, "vmap", lambda: mx.vmap(lambda x: x, in_axes=(0, 0))(mx.ones(3)))
err("vmap_out_axes_out_of_range", IndexError, "vmap", lambda: mx.vmap(lambda x: x, out_axes=2)(mx.ones(3)))
err("vmap_no_mapped_input", ValueError, "vmap", lambda: mx.vmap(lambda x: x, in_axes=None)(mx.ones(3)), mlx=TypeError)
err("compile_not_callable", TypeError, "compile", lambda: mx.compile(3)(mx.ones(2)))
ok("compile_returns_string", lambda: mx.compile(lambda x: "s")(mx.ones(2)), lambda: "s")
ok("compile_argument_string", lambda: mx.compile(lambda x: x)("s"), lambda: "s")
err("checkpoint_non_array", ValueError, "checkpoint", lambda: mx.checkpoint(lambda x: x)("s"), mlx=CRASH)
ok("eval_string", lambda: mx.eval("s"), lambda: None)
ok("eval_nested_none", lambda: mx.eval([None, {"a": (mx.ones(1), 3)}]), lambda: None)


def _contains_itself(container):
    container.append(container) if isinstance(container, list) else container.update(me=container)
    return container


err("eval_list_contains_itself", ValueError, "eval", lambda: mx.eval(_contains_itself([mx.ones(1)])), mlx=CRASH)
err("eval_dict_contains_itself", ValueError, "eval", lambda: mx.eval(_contains_itself({})), mlx=CRASH)
err("async_eval_list_contains_itself", ValueError, "async_eval", lambda: mx.async_eval(_contains_itself([])), mlx=CRASH)
err("array_list_contains_itself", ValueError, "array", lambda: mx.array(_contains_itself([])), mlx=CRASH)
err("custom_function_vjp_shape", ValueError, ("custom_function", "vjp", "shape"), lambda: _custom_bad_vjp(), mlx=OK)


def _custom_bad_vjp():
    @mx.custom_function
    def f(x):
        return x * 2

    @f.vjp
    def f_vjp(primals, cotangent, output):
        return mx.ones((3, 3))

    return mx.grad(lambda x: f(x).sum())(mx.ones(3))


# ---- fast ops and quantization -----------------------------------------------

q = lambda: mx.random.normal((1, 2, 4, 8), key=mx.random.key(0))  # noqa: E731
err("fast_rms_norm_weight_shape", ValueError, "rms_norm", lambda: mx.fast.rms_norm(mx.ones((2, 4)), mx.ones(3), 1e-5))
err("fast_rms_norm_scalar", ValueError, "rms_norm", lambda: mx.fast.rms_norm(mx.array(1.0), None, 1e-5))
err(
    "fast_layer_norm_weight_shape",
    ValueError,
    "layer_norm",
    lambda: mx.fast.layer_norm(mx.ones((2, 4)), mx.ones(3), None, 1e-5),
)
err(
    "fast_layer_norm_bias_shape",
    ValueError,
    "layer_norm",
    lambda: mx.fast.layer_norm(mx.ones((2, 4)), None, mx.ones(5), 1e-5),
)
err(
    "fast_rope_dims_too_big",
    ValueError,
    "rope",
    lambda: mx.fast.rope(mx.ones((1, 2, 4)), 8, traditional=False, base=10000.0, scale=1.0, offset=0),
)
err(
    "fast_rope_odd_dims",
    ValueError,
    "rope",
    lambda: mx.fast.rope(mx.ones((1, 2, 4)), 3, traditional=False, base=10000.0, scale=1.0, offset=0),
)
err(
    "fast_sdpa_head_dim_mismatch",
    ValueError,
    "scaled_dot_product_attention",
    lambda: mx.fast.scaled_dot_product_attention(q(), mx.ones((1, 2, 4, 6)), mx.ones((1, 2, 4, 8)), scale=1.0),
)
err(
    "fast_sdpa_heads_not_dividing",
    ValueError,
    "scaled_dot_product_attention",
    lambda: mx.fast.scaled_dot_product_attention(q(), mx.ones((1, 3, 4, 8)), mx.ones((1, 3, 4, 8)), scale=1.0),
)
err(
    "fast_sdpa_bad_mask_string",
    ValueError,
    "scaled_dot_product_attention",
    lambda: mx.fast.scaled_dot_product_attention(q(), q(), q(), scale=1.0, mask="bogus"),
)
err(
    "fast_sdpa_3d",
    ValueError,
    "scaled_dot_product_attention",
    lambda: mx.fast.scaled_dot_product_attention(mx.ones((2, 4, 8)), mx.ones((2, 4, 8)), mx.ones((2, 4, 8)), scale=1.0),
)
ok(
    "fast_rms_norm_values",
    lambda: mx.fast.rms_norm(mx.array([[3.0, 4.0]]), None, 0.0),
    lambda: f32([[3, 4]]) / np.float32(np.sqrt(12.5)),
)
for bits in (1, 7, 9):
    err(
        f"quantize_bits_{bits}",
        ValueError,
        "quantize",
        lambda bits=bits: mx.quantize(mx.ones((4, 64)), 64, bits),
        mlx=OK if bits == 1 else None,
    )
for gs in (0, 48, 7):
    err(
        f"quantize_group_size_{gs}",
        ValueError,
        "quantize",
        lambda gs=gs: mx.quantize(mx.ones((4, 64)), gs, 4),
        mlx=CRASH if gs == 0 else None,
    )
err("quantize_columns_not_multiple", ValueError, "quantize", lambda: mx.quantize(mx.ones((4, 96)), 64, 4))
err("quantize_1d", ValueError, "quantize", lambda: mx.quantize(mx.ones(64), 64, 4))
err("quantize_int", ValueError, "quantize", lambda: mx.quantize(mx.ones((4, 64), mx.int32), 64, 4))
err("quantize_bad_mode", ValueError, "quantize", lambda: mx.quantize(mx.ones((4, 64)), 64, 4, mode="bogus"))
err(
    "dequantize_scales_shape",
    ValueError,
    "dequantize",
    lambda: mx.dequantize(mx.zeros((4, 8), mx.uint32), mx.ones((4, 2)), mx.ones((4, 2)), 64, 4),
)
err(
    "quantized_matmul_shape",
    ValueError,
    "quantized_matmul",
    lambda: mx.quantized_matmul(mx.ones((2, 32)), *mx.quantize(mx.ones((8, 64)), 64, 4), transpose=True),
)
ok(
    "quantize_round_trip_ones",
    lambda: mx.dequantize(*mx.quantize(mx.ones((2, 64)), 64, 4), 64, 4),
    lambda: np.ones((2, 64), np.float32),
)


# ---- dtypes through unary ops and reductions -----------------------------------

# What each op gives for an int32 [1, 2], a bool [True, False], a complex64
# [1+1j, 2], a uint8 [1, 2], a float16 [1, 2], a float32 of shape (0, 3) and a
# float32 scalar: "dtype(shape)" or the exception kind; UNARY_MLX lists where
# MLX does otherwise.
UNARY = {
    "abs": "int32(2) bool(2) float32(2) uint8(2) float16(2) float32(0,3) float32()",
    "arccos": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "arccosh": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "arcsin": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "arcsinh": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "arctan": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "arctanh": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "ceil": "int32(2) bool(2) ValueError uint8(2) float16(2) float32(0,3) float32()",
    "conjugate": "int32(2) bool(2) complex64(2) uint8(2) float16(2) float32(0,3) float32()",
    "cos": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "cosh": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "degrees": "float32(2) float32(2) ValueError float32(2) float16(2) float32(0,3) float32()",
    "erf": "float32(2) float32(2) ValueError float32(2) float16(2) float32(0,3) float32()",
    "erfinv": "float32(2) float32(2) ValueError float32(2) float16(2) float32(0,3) float32()",
    "exp": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "expm1": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "floor": "int32(2) bool(2) ValueError uint8(2) float16(2) float32(0,3) float32()",
    "imag": "int32(2) bool(2) float32(2) uint8(2) float16(2) float32(0,3) float32()",
    "isfinite": "bool(2) bool(2) bool(2) bool(2) bool(2) bool(0,3) bool()",
    "isinf": "bool(2) bool(2) bool(2) bool(2) bool(2) bool(0,3) bool()",
    "isnan": "bool(2) bool(2) bool(2) bool(2) bool(2) bool(0,3) bool()",
    "isneginf": "bool(2) bool(2) bool(2) bool(2) bool(2) bool(0,3) bool()",
    "isposinf": "bool(2) bool(2) bool(2) bool(2) bool(2) bool(0,3) bool()",
    "log": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "log10": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "log1p": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "log2": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "logical_not": "bool(2) bool(2) bool(2) bool(2) bool(2) bool(0,3) bool()",
    "negative": "int32(2) ValueError complex64(2) uint8(2) float16(2) float32(0,3) float32()",
    "radians": "float32(2) float32(2) ValueError float32(2) float16(2) float32(0,3) float32()",
    "real": "int32(2) bool(2) float32(2) uint8(2) float16(2) float32(0,3) float32()",
    "reciprocal": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "round": "int32(2) bool(2) complex64(2) uint8(2) float16(2) float32(0,3) float32()",
    "rsqrt": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "sigmoid": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "sign": "int32(2) bool(2) complex64(2) uint8(2) float16(2) float32(0,3) float32()",
    "sin": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "sinh": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "sqrt": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "square": "int32(2) bool(2) complex64(2) uint8(2) float16(2) float32(0,3) float32()",
    "stop_gradient": "int32(2) bool(2) complex64(2) uint8(2) float16(2) float32(0,3) float32()",
    "tan": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "tanh": "float32(2) float32(2) complex64(2) float32(2) float16(2) float32(0,3) float32()",
    "bitwise_invert": "int32(2) bool(2) ValueError uint8(2) ValueError ValueError ValueError",
    "softmax": "float32(2) float32(2) ValueError float32(2) float16(2) float32(0,3) float32()",
    "sort": "int32(2) bool(2) ValueError uint8(2) float16(2) float32(0,3) IndexError",
    "argsort": "uint32(2) uint32(2) ValueError uint32(2) uint32(2) uint32(0,3) IndexError",
    "cumsum": "int32(2) int32(2) complex64(2) uint8(2) float16(2) float32(0) float32(1)",
    "cumprod": "int32(2) bool(2) complex64(2) uint8(2) float16(2) float32(0) float32(1)",
    "cummax": "int32(2) bool(2) ValueError uint8(2) float16(2) float32(0) float32(1)",
    "logsumexp": "float32() float32() ValueError float32() float16() float32() float32()",
    "sum": "int32() int32() complex64() uint32() float16() float32() float32()",
    "prod": "int32() int32() complex64() uint32() float16() float32() float32()",
    "mean": "float32() float32() complex64() float32() float16() float32() float32()",
    "var": "float32() float32() float32() float32() float16() float32() float32()",
    "max": "int32() bool() complex64() uint8() float16() ValueError float32()",
    "argmax": "uint32() uint32() uint32() uint32() uint32() ValueError uint32()",
    "all": "bool() bool() bool() bool() bool() bool() bool()",
    "any": "bool() bool() bool() bool() bool() bool() bool()",
    "transpose": "int32(2) bool(2) complex64(2) uint8(2) float16(2) float32(3,0) float32()",
    "flatten": "int32(2) bool(2) complex64(2) uint8(2) float16(2) float32(0) float32(1)",
    "squeeze": "int32(2) bool(2) complex64(2) uint8(2) float16(2) float32(0,3) float32()",
    "zeros_like": "int32(2) bool(2) complex64(2) uint8(2) float16(2) float32(0,3) float32()",
    "ones_like": "int32(2) bool(2) complex64(2) uint8(2) float16(2) float32(0,3) float32()",
}
UNARY_INPUTS = {
    "int32": lambda: mx.array([1, 2], mx.int32),
    "bool": lambda: mx.array([True, False]),
    "complex64": lambda: mx.array([1 + 1j, 2]),
    "uint8": lambda: mx.array([1, 2], mx.uint8),
    "float16": lambda: mx.array([1, 2], mx.float16),
    "empty": lambda: mx.zeros((0, 3)),
    "scalar": lambda: mx.array(0.5),
}
# MLX takes complex input to the sorts, cummax, degrees/radians, softmax and
# logsumexp, refuses it in expm1 and sigmoid, and refuses logsumexp of an empty
# array (Tessera: -inf).
UNARY_MLX = {
    "degrees/complex64": OK,
    "expm1/complex64": ValueError,
    "radians/complex64": OK,
    "sigmoid/complex64": ValueError,
    "softmax/complex64": OK,
    "sort/complex64": OK,
    "argsort/complex64": OK,
    "cummax/complex64": OK,
    "logsumexp/complex64": OK,
    "logsumexp/empty": ValueError,
}


def dtype_and_shape(x):
    return f"{str(x.dtype).split('.')[-1].rstrip('_')}({','.join(map(str, x.shape))})"


for op, outcomes in UNARY.items():
    for (name, make), outcome in zip(UNARY_INPUTS.items(), outcomes.split()):
        call = lambda op=op, make=make: dtype_and_shape(getattr(mx, op)(make()))  # noqa: E731
        mlx_does = UNARY_MLX.get(f"{op}/{name}")
        if outcome.endswith(")"):
            ok(f"dtype_{op}_of_{name}", call, lambda outcome=outcome: outcome, mlx=mlx_does)
        else:
            err(f"dtype_{op}_of_{name}", getattr(builtins, outcome), op, call, mlx=mlx_does)


# What each binary op gives for the pairs of BINARY_INPUTS (promotion, weak Python
# scalars, empty with 0-d): "dtype(shape)" or the exception kind; BINARY_MLX
# lists where MLX does otherwise.
BINARY = {
    "add": "float16(2) bool(2) int16(2) int64(2) complex64(2) float32(2) float32(2) uint8(2) float16(2) float32(0,2)",
    "subtract": "float16(2) ValueError int16(2) int64(2) complex64(2) float32(2) float32(2) uint8(2) float16(2) float32(0,2)",
    "multiply": "float16(2) bool(2) int16(2) int64(2) complex64(2) float32(2) float32(2) uint8(2) float16(2) float32(0,2)",
    "divide": "float16(2) float32(2) float32(2) float32(2) complex64(2) float32(2) float32(2) float32(2) float16(2) float32(0,2)",
    "floor_divide": "float16(2) bool(2) int16(2) int64(2) ValueError float32(2) float32(2) uint8(2) float16(2) float32(0,2)",
    "remainder": "float16(2) bool(2) int16(2) int64(2) ValueError float32(2) float32(2) uint8(2) float16(2) float32(0,2)",
    "power": "float16(2) bool(2) int16(2) int64(2) complex64(2) float32(2) float32(2) uint8(2) float16(2) float32(0,2)",
    "maximum": "float16(2) bool(2) int16(2) int64(2) complex64(2) float32(2) float32(2) uint8(2) float16(2) float32(0,2)",
    "minimum": "float16(2) bool(2) int16(2) int64(2) complex64(2) float32(2) float32(2) uint8(2) float16(2) float32(0,2)",
    "arctan2": "float16(2) float32(2) float32(2) float32(2) ValueError float32(2) float32(2) float32(2) float16(2) float32(0,2)",
    "logaddexp": "float16(2) float32(2) float32(2) float32(2) complex64(2) float32(2) float32(2) float32(2) float16(2) float32(0,2)",
    "equal": "bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(0,2)",
    "less": "bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(0,2)",
    "greater_equal": "bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(0,2)",
    "logical_and": "bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(0,2)",
    "logical_or": "bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(2) bool(0,2)",
    "bitwise_and": "ValueError bool(2) int16(2) int64(2) ValueError ValueError ValueError uint8(2) ValueError ValueError",
    "left_shift": "ValueError uint8(2) int16(2) int64(2) ValueError ValueError ValueError uint8(2) ValueError ValueError",
    "matmul": "float16() ValueError ValueError ValueError complex64() float32() ValueError ValueError ValueError ValueError",
    "inner": "float16() ValueError ValueError ValueError complex64() float32() float32(2) int32(2) float16(2) float32(0,2)",
    "outer": "float16(2,2) bool(2,2) int16(2,2) int64(2,2) complex64(2,2) float32(2,2) float32(2,1) int32(2,1) float16(2,1) float32(0,1)",
}
BINARY_INPUTS = {
    "int32_float16": (lambda: mx.array([1, 2], mx.int32), lambda: mx.array([1, 2], mx.float16)),
    "bool_bool": (lambda: mx.array([True, False]), lambda: mx.array([True, True])),
    "uint8_int8": (lambda: mx.array([1, 2], mx.uint8), lambda: mx.array([1, 2], mx.int8)),
    "uint32_int32": (lambda: mx.array([1, 2], mx.uint32), lambda: mx.array([1, 2], mx.int32)),
    "complex64_float32": (lambda: mx.array([1 + 1j, 2]), lambda: mx.array([1.0, 2.0])),
    "bfloat16_float16": (lambda: mx.array([1, 2], mx.bfloat16), lambda: mx.array([1, 2], mx.float16)),
    "int8_pyfloat": (lambda: mx.array([1, 2], mx.int8), lambda: 2.5),
    "uint8_pyint": (lambda: mx.array([1, 2], mx.uint8), lambda: 3),
    "float16_pyint": (lambda: mx.array([1, 2], mx.float16), lambda: 3),
    "empty_scalar": (lambda: mx.zeros((0, 2)), lambda: mx.array(1.0)),
}
# MLX subtracts bools and floor-divides complex numbers, raises RuntimeError for
# bitwise ops on floats, and refuses Python scalars in matmul (TypeError), inner
# and outer (Tessera converts them).
BINARY_MLX = {
    "subtract/bool_bool": OK,
    "floor_divide/complex64_float32": OK,
    "bitwise_and/int32_float16": RuntimeError,
    "bitwise_and/complex64_float32": RuntimeError,
    "bitwise_and/bfloat16_float16": RuntimeError,
    "bitwise_and/int8_pyfloat": RuntimeError,
    "bitwise_and/float16_pyint": RuntimeError,
    "bitwise_and/empty_scalar": RuntimeError,
    "left_shift/int32_float16": RuntimeError,
    "left_shift/complex64_float32": RuntimeError,
    "left_shift/bfloat16_float16": RuntimeError,
    "left_shift/int8_pyfloat": RuntimeError,
    "left_shift/float16_pyint": RuntimeError,
    "left_shift/empty_scalar": RuntimeError,
    "matmul/int8_pyfloat": TypeError,
    "matmul/uint8_pyint": TypeError,
    "matmul/float16_pyint": TypeError,
    "inner/int8_pyfloat": TypeError,
    "inner/uint8_pyint": TypeError,
    "inner/float16_pyint": TypeError,
    "outer/int8_pyfloat": TypeError,
    "outer/uint8_pyint": TypeError,
    "outer/float16_pyint": TypeError,
}

for op, outcomes in BINARY.items():
    for (name, (make_a, make_b)), outcome in zip(BINARY_INPUTS.items(), outcomes.split()):
        call = lambda op=op, a=make_a, b=make_b: dtype_and_shape(getattr(mx, op)(a(), b()))  # noqa: E731
        mlx_does = BINARY_MLX.get(f"{op}/{name}")
        if outcome.endswith(")"):
            ok(f"dtype_{op}_of_{name}", call, lambda outcome=outcome: outcome, mlx=mlx_does)
        else:
            err(f"dtype_{op}_of_{name}", getattr(builtins, outcome), op, call, mlx=mlx_does)


# ---- keywords of the wrong type -------------------------------------------------

for name, op, call in [
    ("sum_keepdims_string", "sum", lambda: mx.sum(a23(), keepdims="yes")),
    ("mean_keepdims_none", "mean", lambda: mx.mean(a23(), keepdims=None)),
    ("ones_dtype_int", "ones", lambda: mx.ones(2, dtype=3)),
    ("arange_step_string", "arange", lambda: mx.arange(0, 5, "a")),
    ("arange_dtype_string", "arange", lambda: mx.arange(5, dtype="int32")),
    ("linspace_dtype_string", "linspace", lambda: mx.linspace(0, 1, 3, dtype="float32")),
    ("random_normal_key_string", "normal", lambda: mx.random.normal(shape=(2,), key="k")),
    ("random_uniform_dtype_string", "uniform", lambda: mx.random.uniform(shape=(2,), dtype="float32")),
    ("random_randint_shape_string", "randint", lambda: mx.random.randint(0, 5, shape="3")),
    ("softmax_axis_string", "softmax", lambda: mx.softmax(a23(), axis="1")),
    ("argmax_keepdims_string", "argmax", lambda: mx.argmax(a23(), keepdims="no")),
    ("var_ddof_float", "var", lambda: mx.var(a23(), ddof=1.5)),
    ("cumsum_reverse_string", "cumsum", lambda: mx.cumsum(a23(), reverse="x")),
    ("sort_axis_list", "sort", lambda: mx.sort(a23(), axis=[0])),
    ("topk_k_float", "topk", lambda: mx.topk(mx.ones(3), 1.5)),
    ("take_axis_string", "take", lambda: mx.take(a23(), mx.array([0]), axis="0")),
    ("pad_width_string", "pad", lambda: mx.pad(a23(), "1")),
    ("repeat_repeats_float", "repeat", lambda: mx.repeat(a23(), 1.5)),
    ("tile_reps_string", "tile", lambda: mx.tile(a23(), "2")),
    ("roll_shift_float", "roll", lambda: mx.roll(a23(), 1.5)),
    ("split_sections_float", "split", lambda: mx.split(a23(), 1.5)),
    ("squeeze_axis_string", "squeeze", lambda: mx.squeeze(a23(), axis="0")),
    ("expand_dims_axis_float", "expand_dims", lambda: mx.expand_dims(a23(), 0.5)),
    ("transpose_axes_string", "transpose", lambda: mx.transpose(a23(), "01")),
    ("swapaxes_axis_none", "swapaxes", lambda: mx.swapaxes(a23(), None, 0)),
    ("concatenate_axis_string", "concatenate", lambda: mx.concatenate([a23()], axis="0")),
    ("conv1d_stride_string", "conv1d", lambda: mx.conv1d(x1(), w1(), stride="1")),
    ("conv2d_padding_float", "conv2d", lambda: mx.conv2d(x2(), w2(), padding=1.5)),
    ("fft_norm_int", "fft", lambda: mx.fft.fft(mx.ones(4), norm=1)),
    ("norm_ord_list", "norm", lambda: mx.linalg.norm(mx.ones(3), ord=[1])),
    ("quantize_bits_float", "quantize", lambda: mx.quantize(mx.ones((4, 64)), 64, 4.5)),
    ("astype_dtype_int", "astype", lambda: a23().astype(3)),
    ("round_decimals_string", "round", lambda: mx.round(a23(), "1")),
    ("where_condition_none", "where", lambda: mx.where(None, 1.0, 2.0)),
    ("einsum_subscripts_int", "einsum", lambda: mx.einsum(3, a23())),
    ("save_file_none", "save", lambda: mx.save(None, a23())),
    ("grad_argnums_string", "grad", lambda: mx.grad(lambda x: x.sum(), argnums="0")(mx.ones(2))),
]:
    err(name, TypeError, op, call)
for name, op, call in [
    ("pad_constant_string", "pad", lambda: mx.pad(a23(), 1, constant_values="x")),
    ("clip_a_min_string", "clip", lambda: mx.clip(a23(), "0", 1.0)),
    ("fft_norm_bad", "fft", lambda: mx.fft.fft(mx.ones(4), norm="bad")),
    ("grad_argnums_negative", "grad", lambda: mx.grad(lambda x: x.sum(), argnums=-1)(mx.ones(2))),
]:
    err(name, ValueError, op, call)


# ---- memory and streams -------------------------------------------------------


def _under_memory_limit(limit, call):
    old = mx.set_memory_limit(limit)
    try:
        return call()
    finally:
        mx.set_memory_limit(old)


def _limited_device():
    """The device whose memory set_memory_limit bounds: the GPU's when there is
    one (docs/differences.md), else the host's."""
    cuda = getattr(mx, "cuda", None)
    return mx.gpu if cuda is not None and cuda.is_available() else mx.cpu


# MLX's CPU build ignores the limit, and crashes on an allocation of 4 TiB.
err(
    "memory_limit_exceeded",
    RuntimeError,
    "malloc",
    lambda: _under_memory_limit(
        1 << 16, lambda: mx.arange(10**6, dtype=mx.float32, stream=_limited_device()).sum().item()
    ),
    mlx=OK,
)
err("allocation_of_4_tib", RuntimeError, "malloc", lambda: mx.ones((2**30, 2**10)).sum().item(), mlx=CRASH)
ok("memory_limit_restored", lambda: _under_memory_limit(1 << 30, lambda: mx.ones((10**6,)).sum().item()), lambda: 1e6)

err("set_memory_limit_negative", ValueError, "set_memory_limit", lambda: mx.set_memory_limit(-1), mlx=TypeError)
err("set_cache_limit_string", TypeError, "set_cache_limit", lambda: mx.set_cache_limit("1"))
err("stream_bad_device", TypeError, ("stream", "device"), lambda: mx.ones(2, stream="cpu"))
err("new_stream_string", TypeError, "new_stream", lambda: mx.new_stream("cpu"))
err("set_default_device_string", TypeError, "set_default_device", lambda: mx.set_default_device("x"))


def same_value(got, want):
    """Whether a case's result equals its NumPy reference (dtype and values)."""
    if isinstance(want, np.ndarray):
        got = np.asarray(got)
        return (
            got.dtype == want.dtype
            and got.shape == want.shape
            and np.array_equal(got, want, equal_nan=want.dtype.kind in "fc")
        )
    return got == want


def check_on_mlx(first):
    """Runs the cases from index `first` on MLX, a line per case that differs."""
    import sys

    import mlx.core
    import mlx.nn
    import mlx.optimizers

    bind(mlx.core, mlx.nn, mlx.optimizers)
    mlx.core.set_default_device(mlx.core.cpu)
    for i, c in enumerate(CASES[first:], first):
        print(f"@{i}", flush=True)
        expect = c.mlx or c.kind or OK
        try:
            got = c.call()
        except Exception as e:  # noqa: BLE001
            kinds = expect if isinstance(expect, tuple) else (expect,)
            if type(e) not in kinds:
                print(f"{c.name}: MLX raises {type(e).__name__}: {str(e)[:150]}, the table says {expect}")
            continue
        if expect is not OK and expect is not UNOWNED:
            print(f"{c.name}: MLX succeeds, the table says {expect}")
        elif c.ref is not None and c.mlx is None:
            got = np.array(got) if isinstance(got, mlx.core.array) else got
            if not same_value(got, c.ref()):
                print(f"{c.name}: MLX gives {got!r}, the table expects {c.ref()!r}")
    sys.stdout.flush()


def main():
    """Checks the table against MLX, in a child process that starts again after
    each case that crashes MLX."""
    import subprocess
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--from":
        check_on_mlx(int(sys.argv[2]))
        return
    first, differ = 0, 0
    while first < len(CASES):
        run = subprocess.run([sys.executable, __file__, "--from", str(first)], capture_output=True, text=True)
        last = first
        for line in run.stdout.splitlines():
            if line.startswith("@"):
                last = int(line[1:])
            else:
                print(line)
                differ += 1
        if run.returncode == 0:
            break
        if CASES[last].mlx is not CRASH and CASES[last].mlx is not UNOWNED:
            print(f"{CASES[last].name}: MLX crashes (exit status {run.returncode})")
            differ += 1
        first = last + 1
    print(f"{differ} of {len(CASES)} cases differ from MLX")


if __name__ == "__main__":
    main()
