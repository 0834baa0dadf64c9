"""Convolutions of tessera.core, channels last: input ``(N, *spatial, C_in)``,
weight ``(C_out, *kernel, C_in / groups)``. They are composed of existing ops:
the windows of the (padded, dilated) input are a strided view, and one matrix
product per group multiplies them with the weight. So they run on every device
and under every transform, through the rules of those ops."""

import contextlib
import math
import operator
from itertools import accumulate

_mx = None  # tessera.core, set by install()


def _stream(stream):
    return _mx.stream(stream) if stream is not None else contextlib.nullcontext()


def _tuple(op, name, value, n):
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    if len(value) != n or not all(isinstance(v, int) for v in value):
        raise ValueError(f"[{op}] {name} must be an int or {n} ints, got {value}")
    return value


def _arrays(*values):
    return tuple(v if isinstance(v, _mx.array) else _mx.array(v) for v in values)


def _check(op, x, w, n, groups):
    if x.ndim != n + 2 or w.ndim != n + 2:
        raise ValueError(f"[{op}] expected an input and a weight of {n + 2} dimensions "
                         f"(N, *spatial, C), got shapes {x.shape} and {w.shape}")
    if groups < 1 or x.shape[-1] % groups or w.shape[0] % groups:
        raise ValueError(f"[{op}] groups={groups} must divide the input channels "
                         f"({x.shape[-1]}) and the output channels ({w.shape[0]})")
    if x.shape[-1] != w.shape[-1] * groups:
        raise ValueError(f"[{op}] the input has {x.shape[-1]} channels but the weight "
                         f"{w.shape} expects {w.shape[-1] * groups} ({groups} groups)")


def sliding_windows(x, window, strides, dilation):
    """View of ``x (N, *spatial, C)`` as ``(N, *out_spatial, *window, C)``."""
    x = _mx.contiguous(x)
    shape = tuple(x.shape)
    elem = list(reversed(list(accumulate(reversed(shape + (1,)), operator.mul))))[1:]
    out = []
    for size, k, s, d in zip(shape[1:-1], window, strides, dilation):
        span = (k - 1) * d + 1
        if span > size:
            raise ValueError(f"[sliding_windows] the window (span {span}) is larger than the "
                             f"input size {size}")
        out.append((size - span) // s + 1)
    final_shape = (shape[0],) + tuple(out) + tuple(window) + (shape[-1],)
    final_strides = (elem[:1] + [e * s for e, s in zip(elem[1:-1], strides)]
                     + [e * d for e, d in zip(elem[1:-1], dilation)] + elem[-1:])
    return _mx.as_strided(x, final_shape, final_strides)


def _dilate(x, axis, factor):
    """``factor - 1`` zeros between the elements of x along `axis`."""
    if factor == 1 or x.shape[axis] == 0:
        return x
    size = x.shape[axis]
    x = _mx.expand_dims(x, axis + 1)
    widths = [(0, 0)] * x.ndim
    widths[axis + 1] = (0, factor - 1)
    x = _mx.pad(x, widths)
    x = _mx.reshape(x, x.shape[:axis] + (size * factor,) + x.shape[axis + 2:])
    return x[(slice(None),) * axis + (slice(0, (size - 1) * factor + 1),)]


def _pad(x, axis, low, high):
    """Pads (or, for negative widths, crops) x along `axis`."""
    if low < 0 or high < 0:
        x = x[(slice(None),) * axis + (slice(max(0, -low), x.shape[axis] - max(0, -high)),)]
    if low > 0 or high > 0:
        widths = [(0, 0)] * x.ndim
        widths[axis] = (max(0, low), max(0, high))
        x = _mx.pad(x, widths)
    return x


def _conv(op, x, w, stride, low, high, kernel_dilation, input_dilation, groups, flip):
    n = w.ndim - 2
    for axis in range(n):
        x = _dilate(x, axis + 1, input_dilation[axis])
        x = _pad(x, axis + 1, low[axis], high[axis])
    if flip:
        w = w[(slice(None),) + (slice(None, None, -1),) * n]
    kernel = tuple(w.shape[1:-1])
    for axis in range(n):
        span = (kernel[axis] - 1) * kernel_dilation[axis] + 1
        if span > x.shape[axis + 1]:
            raise ValueError(f"[{op}] the kernel (span {span} along spatial axis {axis}) is "
                             f"larger than the padded input ({x.shape[axis + 1]})")
    windows = sliding_windows(x, kernel, stride, kernel_dilation)  # (N, *out, *kernel, C_in)
    out_spatial = tuple(windows.shape[1:1 + n])
    rows = x.shape[0] * math.prod(out_spatial)
    cg_in, cg_out = x.shape[-1] // groups, w.shape[0] // groups
    outputs = []
    for g in range(groups):
        win = windows[..., g * cg_in:(g + 1) * cg_in] if groups > 1 else windows
        wg = w[g * cg_out:(g + 1) * cg_out] if groups > 1 else w
        outputs.append(_mx.reshape(win, (rows, -1)) @ _mx.reshape(wg, (wg.shape[0], -1)).T)
    y = outputs[0] if groups == 1 else _mx.concatenate(outputs, axis=-1)
    return _mx.reshape(y, (x.shape[0],) + out_spatial + (w.shape[0],))


def conv_general(input, weight, /, stride=1, padding=0, kernel_dilation=1, input_dilation=1,
                 groups=1, flip=False, *, stream=None):
    """Convolution over any number of spatial dims. `padding` is an int, one int
    per spatial dim, or a pair (low list, high list); `input_dilation` inserts
    zeros between input elements; `flip` flips the kernel (a true convolution
    rather than a cross-correlation)."""
    op = "conv_general"
    x, w = _arrays(input, weight)
    n = w.ndim - 2
    _check(op, x, w, n, groups)
    if (isinstance(padding, (tuple, list)) and len(padding) == 2
            and all(isinstance(p, (tuple, list)) for p in padding)):
        low, high = _tuple(op, "padding", padding[0], n), _tuple(op, "padding", padding[1], n)
    else:
        low = high = _tuple(op, "padding", padding, n)
    with _stream(stream):
        return _conv(op, x, w, _tuple(op, "stride", stride, n), low, high,
                     _tuple(op, "kernel_dilation", kernel_dilation, n),
                     _tuple(op, "input_dilation", input_dilation, n), groups, flip)


def _conv_nd(op, n, input, weight, stride, padding, dilation, groups, stream):
    input, weight = _arrays(input, weight)
    _check(op, input, weight, n, groups)
    pad = _tuple(op, "padding", padding, n)
    with _stream(stream):
        return _conv(op, input, weight, _tuple(op, "stride", stride, n), pad, pad,
                     _tuple(op, "dilation", dilation, n), (1,) * n, groups, False)


def conv1d(input, weight, /, stride=1, padding=0, dilation=1, groups=1, *, stream=None):
    """1-D convolution (cross-correlation) of ``(N, L, C_in)`` with ``(C_out, K, C_in/groups)``."""
    return _conv_nd("conv1d", 1, input, weight, stride, padding, dilation, groups, stream)


def conv2d(input, weight, /, stride=1, padding=0, dilation=1, groups=1, *, stream=None):
    """2-D convolution of ``(N, H, W, C_in)`` with ``(C_out, KH, KW, C_in/groups)``."""
    return _conv_nd("conv2d", 2, input, weight, stride, padding, dilation, groups, stream)


def conv3d(input, weight, /, stride=1, padding=0, dilation=1, groups=1, *, stream=None):
    """3-D convolution of ``(N, D, H, W, C_in)`` with ``(C_out, KD, KH, KW, C_in)``."""
    if groups != 1:
        raise ValueError(f"[conv3d] only groups=1 is supported, got groups={groups}")
    return _conv_nd("conv3d", 3, input, weight, stride, padding, dilation, groups, stream)


def _conv_transpose_nd(op, n, input, weight, stride, padding, dilation, output_padding,
                       groups, stream):
    """``y[i*s + j*d - p] += x[i] · w[j]``: a convolution of the input with
    ``s - 1`` zeros between its elements, padded by ``d(k-1) - p`` (plus
    `output_padding` at the end), with the kernel flipped."""
    input, weight = _arrays(input, weight)
    _check(op, input, weight, n, groups)
    stride = _tuple(op, "stride", stride, n)
    padding = _tuple(op, "padding", padding, n)
    dilation = _tuple(op, "dilation", dilation, n)
    output_padding = _tuple(op, "output_padding", output_padding, n)
    kernel = tuple(weight.shape[1:-1])
    low = tuple(d * (k - 1) - p for d, k, p in zip(dilation, kernel, padding))
    high = tuple(lo + q for lo, q in zip(low, output_padding))
    with _stream(stream):
        return _conv(op, input, weight, (1,) * n, low, high, dilation, stride, groups, True)


def conv_transpose1d(input, weight, /, stride=1, padding=0, dilation=1, output_padding=0,
                     groups=1, *, stream=None):
    """Transposed 1-D convolution (the gradient of conv1d); weight ``(C_out, K, C_in/groups)``."""
    return _conv_transpose_nd("conv_transpose1d", 1, input, weight, stride, padding, dilation,
                              output_padding, groups, stream)


def conv_transpose2d(input, weight, /, stride=1, padding=0, dilation=1, output_padding=0,
                     groups=1, *, stream=None):
    """Transposed 2-D convolution; weight ``(C_out, KH, KW, C_in/groups)``."""
    return _conv_transpose_nd("conv_transpose2d", 2, input, weight, stride, padding, dilation,
                              output_padding, groups, stream)


def conv_transpose3d(input, weight, /, stride=1, padding=0, dilation=1, output_padding=0,
                     groups=1, *, stream=None):
    """Transposed 3-D convolution; weight ``(C_out, KD, KH, KW, C_in)``."""
    if groups != 1:
        raise ValueError(f"[conv_transpose3d] only groups=1 is supported, got groups={groups}")
    return _conv_transpose_nd("conv_transpose3d", 3, input, weight, stride, padding, dilation,
                              output_padding, groups, stream)


def convolve(a, v, /, mode="full", *, stream=None):
    """1-D convolution of two signals (the kernel flipped, the longer one taken
    as the signal), as numpy.convolve: modes 'full', 'valid' and 'same'."""
    a, v = _arrays(a, v)
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(f"[convolve] inputs must be 1-D, got shapes {a.shape} and {v.shape}")
    if a.size == 0 or v.size == 0:
        raise ValueError("[convolve] inputs cannot be empty")
    if mode not in ("full", "valid", "same"):
        raise ValueError(f"[convolve] mode must be 'full', 'valid' or 'same', got {mode!r}")
    if v.size > a.size:
        a, v = v, a
    k = v.size
    if mode == "full":
        low = high = k - 1
    elif mode == "same":
        # numpy's 'same': the full result from (k - 1) // 2 on, as long as a.
        low, high = k - 1 - (k - 1) // 2, (k - 1) // 2
    else:
        low = high = 0
    # Integers are summed in float64: exact while the sums stay below 2^53.
    dtype = _mx.result_type(a, v)
    if not _mx.issubdtype(dtype, _mx.inexact):
        dtype = _mx.float64
    x = _mx.reshape(a.astype(dtype), (1, a.size, 1))
    w = _mx.reshape(v.astype(dtype), (1, k, 1))
    with _stream(stream):
        y = _conv("convolve", x, w, (1,), (low,), (high,), (1,), (1,), 1, True)
    y = _mx.reshape(y, (-1,))
    out = _mx.result_type(a, v)
    return y if y.dtype == out else y.astype(out)


def install(module):
    global _mx
    _mx = module
    for name in ("conv_general", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                 "conv_transpose2d", "conv_transpose3d", "convolve"):
        setattr(module, name, globals()[name])
