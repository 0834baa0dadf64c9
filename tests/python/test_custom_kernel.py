"""mx.fast.cuda_kernel and mx.fast.precompiled_cuda_kernel: the generated source,
the argument checks and the CPU's refusal on every machine; on a CUDA GPU, the
results against NumPy (MLX's docstring example, strides of a transposed input,
template arguments, two outputs, init_value, dynamic shared memory, a
precompiled PTX kernel with scalars)."""
import numpy as np
import pytest

import tessera.core as mx

GPU = mx.cuda.is_available()
needs_gpu = pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")

EXP_SOURCE = """
    auto elem = cooperative_groups::this_grid().thread_rank();
    T tmp = inp[elem];
    out[elem] = exp(tmp);
"""


def exp_kernel():
    return mx.fast.cuda_kernel(name="myexp", input_names=["inp"], output_names=["out"],
                               source=EXP_SOURCE)


def generated_source(capfd, kernel, **kwargs):
    """The source that verbose=True prints, made on the CPU stream (which then refuses)."""
    capfd.readouterr()
    with pytest.raises(ValueError, match=r"\[cuda_kernel\].*runs on the GPU only"):
        kernel(verbose=True, stream=mx.cpu, **kwargs)
    out = capfd.readouterr().out
    head, _, rest = out.partition("```\n")
    source, _, _ = rest.rpartition("\n```")
    return head, source


# --- the generated source ------------------------------------------------------------------


def test_cuda_kernel_source_has_the_signature_and_template_arguments(capfd):
    kernel = mx.fast.cuda_kernel(
        name="scale", input_names=["a", "b"], output_names=["out", "aux"],
        source="out[0] = a[a_strides[0] * a_shape[1]] + b[0] + a_ndim; aux[0] = B;",
        header="__device__ int helper() { return 1; }")
    head, source = generated_source(
        capfd, kernel, inputs=[mx.zeros((2, 3)), mx.zeros((3,), dtype=mx.int32)],
        output_shapes=[(2, 3), (1,)], output_dtypes=[mx.float16, mx.bool_],
        grid=(6, 1, 1), threadgroup=(32, 1, 1),
        template=[("T", mx.bfloat16), ("N", 4), ("B", True), ("M", -2)])
    assert head == "Generated source code for `custom_kernel_scale_bfloat16_4_t_n2`:\n"
    assert source.startswith("#include <cooperative_groups.h>\n")
    assert "#define inf cuda::std::numeric_limits<float>::infinity()" in source
    assert "using Shape = cuda::std::array<int32_t, MAX_NDIM>;" in source
    assert "using Strides = cuda::std::array<int64_t, MAX_NDIM>;" in source
    # The user's header comes before the kernel's namespace.
    assert source.index("__device__ int helper()") < source.index("namespace cg = ")
    expected = """namespace tessera::cu {

namespace cg = cooperative_groups;

extern "C" __global__ void custom_kernel_scale_bfloat16_4_t_n2(
    const float* a,
    const __grid_constant__ Shape a_shape,
    const __grid_constant__ Strides a_strides,
    const __grid_constant__ int a_ndim,
    const int32_t* b,
    __half* out,
    bool* aux) {
  using T = __nv_bfloat16;
  constexpr int N = 4;
  constexpr bool B = true;
  constexpr int M = -2;

out[0] = a[a_strides[0] * a_shape[1]] + b[0] + a_ndim; aux[0] = B;
}

}  // namespace tessera::cu
"""
    assert source.endswith(expected)
    assert "cuda/std/complex" not in source


def test_cuda_kernel_source_takes_only_the_shape_parts_it_mentions(capfd):
    kernel = mx.fast.cuda_kernel(name="k", input_names=["x"], output_names=["y"],
                                 source="y[0] = x[0] * x_ndim;")
    _, source = generated_source(capfd, kernel, inputs=[mx.zeros((2, 2))],
                                 output_shapes=[(1,)], output_dtypes=[mx.float32],
                                 grid=(1, 1, 1), threadgroup=(1, 1, 1))
    assert "const __grid_constant__ int x_ndim" in source
    assert "x_shape" not in source and "x_strides" not in source
    assert 'extern "C" __global__ void custom_kernel_k(\n    const float* x,\n' in source


@pytest.mark.parametrize("dtype, name, ctype", [
    (mx.bool_, "bool", "bool"), (mx.uint8, "uint8", "uint8_t"),
    (mx.uint16, "uint16", "uint16_t"), (mx.uint32, "uint32", "uint32_t"),
    (mx.uint64, "uint64", "uint64_t"), (mx.int8, "int8", "int8_t"),
    (mx.int16, "int16", "int16_t"), (mx.int32, "int32", "int32_t"),
    (mx.int64, "int64", "int64_t"), (mx.float16, "float16", "__half"),
    (mx.bfloat16, "bfloat16", "__nv_bfloat16"), (mx.float32, "float32", "float"),
    (mx.float64, "float64", "double"), (mx.complex64, "complex64", "cuda::std::complex<float>")])
def test_cuda_kernel_source_maps_each_dtype_to_its_cuda_type(capfd, dtype, name, ctype):
    kernel = mx.fast.cuda_kernel(name="copy", input_names=["x"], output_names=["y"],
                                 source="y[0] = x[0];")
    head, source = generated_source(capfd, kernel, inputs=[mx.zeros((2,), dtype=dtype)],
                                    output_shapes=[(2,)], output_dtypes=[dtype],
                                    grid=(2, 1, 1), threadgroup=(2, 1, 1),
                                    template=[("T", dtype)])
    assert f"    const {ctype}* x,\n    {ctype}* y) {{\n  using T = {ctype};\n" in source
    assert head.endswith(f"custom_kernel_copy_{name}`:\n")
    assert ("#include <cuda/std/complex>" in source) == (dtype == mx.complex64)


def test_cuda_kernel_symbol_keeps_only_identifier_characters(capfd):
    kernel = mx.fast.cuda_kernel(name="my-kernel.v2", input_names=["x"], output_names=["y"],
                                 source="y[0] = x[0];")
    head, source = generated_source(capfd, kernel, inputs=[mx.zeros((1,))],
                                    output_shapes=[(1,)], output_dtypes=[mx.float32],
                                    grid=(1, 1, 1), threadgroup=(1, 1, 1),
                                    template=[("F", False)])
    assert head == "Generated source code for `custom_kernel_my_kernel_v2_f`:\n"
    assert "void custom_kernel_my_kernel_v2_f(" in source


# --- argument checks ---------------------------------------------------------------------


def call(kernel, **overrides):
    kwargs = dict(inputs=[mx.ones((4,))], output_shapes=[(4,)], output_dtypes=[mx.float32],
                  grid=(4, 1, 1), threadgroup=(4, 1, 1), stream=mx.cpu)
    kwargs.update(overrides)
    return kernel(**kwargs)


def test_cuda_kernel_checks_the_number_of_inputs_shapes_and_dtypes():
    kernel = mx.fast.cuda_kernel(name="add", input_names=["x", "y"], output_names=["out"],
                                 source="out[0] = x[0] + y[0];")
    with pytest.raises(ValueError, match=r"\[cuda_kernel\] the kernel 'add' expected 2 inputs "
                                         r"\(x, y\), got 3"):
        call(kernel, inputs=[mx.ones(4)] * 3)
    with pytest.raises(ValueError, match=r"expected 1 output shape \(out\), got 2"):
        call(kernel, inputs=[mx.ones(4)] * 2, output_shapes=[(4,), (4,)])
    with pytest.raises(ValueError, match=r"expected 1 output dtype \(out\), got 0"):
        call(kernel, inputs=[mx.ones(4)] * 2, output_dtypes=[])
    with pytest.raises(ValueError, match=r"\[cuda_kernel\] negative dimensions"):
        call(kernel, inputs=[mx.ones(4)] * 2, output_shapes=[(2, -1)])


def test_cuda_kernel_checks_template_arguments():
    kernel = exp_kernel()
    with pytest.raises(ValueError, match=r"\[cuda_kernel\] template argument 'T' must be a "
                                         r"Dtype, an int or a bool, got float"):
        call(kernel, template=[("T", 1.5)])
    with pytest.raises(ValueError, match=r"got str"):
        call(kernel, template=[("T", "float")])
    with pytest.raises(ValueError, match=r"template argument name '2T' is not a C\+\+ identifier"):
        call(kernel, template=[("2T", 1)])
    with pytest.raises(ValueError, match=r"\[cuda_kernel\].*template argument"):
        call(kernel, template=[("N", 2**40)])


def test_cuda_kernel_checks_names_grid_and_shared_memory():
    with pytest.raises(ValueError, match=r"\[cuda_kernel\] the kernel 'k' needs at least one "
                                         r"output"):
        mx.fast.cuda_kernel(name="k", input_names=["x"], output_names=[], source="")
    with pytest.raises(ValueError, match=r"input name 'x y' is not a C\+\+ identifier"):
        mx.fast.cuda_kernel(name="k", input_names=["x y"], output_names=["o"], source="")
    with pytest.raises(ValueError, match=r"output name '1o' is not a C\+\+ identifier"):
        mx.fast.cuda_kernel(name="k", input_names=["x"], output_names=["1o"], source="")
    with pytest.raises(ValueError, match=r"shared_memory must be at least 0, got -1"):
        mx.fast.cuda_kernel(name="k", input_names=["x"], output_names=["o"], source="",
                            shared_memory=-1)
    kernel = exp_kernel()
    with pytest.raises(ValueError, match=r"threadgroup \(0, 1, 1\) must be positive"):
        call(kernel, threadgroup=(0, 1, 1))
    with pytest.raises(ValueError, match=r"grid \(-4, 1, 1\) has a negative size"):
        call(kernel, grid=(-4, 1, 1))
    with pytest.raises(ValueError, match=r"threadgroup \(64, 32, 1\) has 2048 threads, more "
                                         r"than a CUDA block's 1024"):
        call(kernel, grid=(64, 32, 1), threadgroup=(64, 32, 1))
    with pytest.raises(TypeError):
        kernel([mx.ones(4)])  # the kernel takes keywords only
    with pytest.raises(TypeError):
        mx.fast.cuda_kernel("k", ["a"], ["b"])  # source is required


def test_cuda_kernel_refuses_shapes_longer_than_max_ndim():
    kernel = mx.fast.cuda_kernel(name="k", input_names=["x"], output_names=["y"],
                                 source="y[0] = x_shape[0];")
    with pytest.raises(ValueError, match=r"input 'x' has 11 dimensions, more than the 10"):
        call(kernel, inputs=[mx.zeros((1,) * 11)])
    with pytest.raises(ValueError, match=r"runs on the GPU only"):
        call(kernel, inputs=[mx.zeros((1,) * 10)])


def test_cuda_kernel_runs_on_the_gpu_only():
    kernel = exp_kernel()
    with pytest.raises(ValueError, match=r"\[cuda_kernel\] the kernel 'myexp' runs on the GPU "
                                         r"only, and its stream is on the cpu"):
        call(kernel, stream=mx.cpu)
    with mx.stream(mx.cpu):
        with pytest.raises(ValueError, match=r"\[cuda_kernel\].*GPU only"):
            call(kernel, stream=None)
    if not GPU:
        with pytest.raises(ValueError, match=r"there is no CUDA GPU here"):
            call(kernel, stream=None)


def test_precompiled_cuda_kernel_checks_and_runs_on_the_gpu_only():
    args = dict(name="scale_shift", compiled_source=SCALE_SHIFT_PTX.encode(),
                inputs=[mx.ones(4)], output_shapes=[(4,)], output_dtypes=[mx.float32],
                scalars=[2.0, 4, True], grid=(4, 1, 1), threadgroup=(4, 1, 1), stream=mx.cpu)
    with pytest.raises(ValueError, match=r"\[precompiled_cuda_kernel\] the kernel 'scale_shift' "
                                         r"runs on the GPU only"):
        mx.fast.precompiled_cuda_kernel(**args)
    with pytest.raises(ValueError, match=r"\[precompiled_cuda_kernel\] scalar 1 must be a bool, "
                                         r"an int or a float, got str"):
        mx.fast.precompiled_cuda_kernel(**{**args, "scalars": [1, "a"]})
    with pytest.raises(ValueError, match=r"got 1 output shapes and 2 output dtypes"):
        mx.fast.precompiled_cuda_kernel(**{**args, "output_dtypes": [mx.float32] * 2})
    with pytest.raises(ValueError, match=r"compiled_source of 'scale_shift' is empty"):
        mx.fast.precompiled_cuda_kernel(**{**args, "compiled_source": b""})
    with pytest.raises(ValueError, match=r"shared_memory must be at least 0"):
        mx.fast.precompiled_cuda_kernel(**{**args, "shared_memory": -8})
    with pytest.raises(TypeError):
        mx.fast.precompiled_cuda_kernel(**{**args, "compiled_source": SCALE_SHIFT_PTX})  # str
    with pytest.raises(TypeError):
        mx.fast.precompiled_cuda_kernel("scale_shift", SCALE_SHIFT_PTX.encode())  # keywords only


def test_metal_kernel_raises_naming_cuda_kernel():
    kernel = mx.fast.metal_kernel(name="myexp", input_names=["inp"], output_names=["out"],
                                  source="out[0] = inp[0];")
    with pytest.raises(RuntimeError, match=r"\[metal_kernel\].*Metal is not available.*"
                                           r"cuda_kernel"):
        kernel(inputs=[mx.ones(4)], grid=(4, 1, 1), threadgroup=(4, 1, 1),
               output_shapes=[(4,)], output_dtypes=[mx.float32])


# --- on the GPU ------------------------------------------------------------------------------

# extern "C" scale_shift(const float* x, float* y, float a, int n, bool negate):
# y[i] = ±(a * x[i] + n) for i < n, written by hand for PTX ISA 7.0.
SCALE_SHIFT_PTX = """
.version 7.0
.target sm_75
.address_size 64

.visible .entry scale_shift(
	.param .u64 x,
	.param .u64 y,
	.param .f32 a,
	.param .u32 n,
	.param .u8 negate
)
{
	.reg .pred %p<3>;
	.reg .b16 %h<2>;
	.reg .f32 %f<7>;
	.reg .b32 %r<5>;
	.reg .b64 %rd<7>;

	ld.param.u64 %rd1, [x];
	ld.param.u64 %rd2, [y];
	ld.param.f32 %f1, [a];
	ld.param.u32 %r1, [n];
	ld.param.u8 %h1, [negate];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mad.lo.s32 %r2, %r2, %r3, %r4;
	setp.ge.s32 %p1, %r2, %r1;
	@%p1 bra DONE;
	cvta.to.global.u64 %rd3, %rd1;
	cvta.to.global.u64 %rd4, %rd2;
	mul.wide.s32 %rd5, %r2, 4;
	add.s64 %rd3, %rd3, %rd5;
	add.s64 %rd4, %rd4, %rd5;
	ld.global.f32 %f2, [%rd3];
	cvt.rn.f32.s32 %f3, %r1;
	fma.rn.f32 %f4, %f2, %f1, %f3;
	neg.f32 %f5, %f4;
	setp.eq.s16 %p2, %h1, 0;
	selp.f32 %f6, %f4, %f5, %p2;
	st.global.f32 [%rd4], %f6;
DONE:
	ret;
}
"""


@needs_gpu
@pytest.mark.parametrize("dtype", [mx.float16, mx.float32])
def test_cuda_kernel_docstring_exp_example(dtype):
    a = mx.random.normal(shape=(16, 16)).astype(dtype)
    outputs = exp_kernel()(inputs=[a], template=[("T", mx.float32)], grid=(a.size, 1, 1),
                           threadgroup=(256, 1, 1), output_shapes=[a.shape],
                           output_dtypes=[a.dtype], stream=mx.gpu)
    assert len(outputs) == 1
    b = outputs[0]
    assert b.shape == (16, 16) and b.dtype == dtype
    tol = 2e-3 if dtype == mx.float16 else 1e-6
    assert mx.allclose(b, mx.exp(a), rtol=tol, atol=tol).item()
    np.testing.assert_allclose(np.array(b.astype(mx.float32)),
                               np.exp(np.array(a.astype(mx.float32))), rtol=tol, atol=tol)


STRIDED_SOURCE = """
    uint32_t elem = blockIdx.x * blockDim.x + threadIdx.x;
    int size = 1;
    for (int d = 0; d < inp_ndim; ++d) size *= inp_shape[d];
    if (elem >= size) return;
    int64_t loc = 0;
    uint32_t rest = elem;
    for (int d = inp_ndim - 1; d >= 0; --d) {
      loc += (rest % inp_shape[d]) * inp_strides[d];
      rest /= inp_shape[d];
    }
    out[elem] = 2 * inp[loc];
"""


@needs_gpu
@pytest.mark.parametrize("ensure_row_contiguous", [False, True])
def test_cuda_kernel_reads_a_transposed_input_through_its_strides(ensure_row_contiguous):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    xt = mx.transpose(mx.array(x), (2, 0, 1))  # (4, 2, 3), not row-contiguous
    kernel = mx.fast.cuda_kernel(name="strided_double", input_names=["inp"],
                                 output_names=["out"], source=STRIDED_SOURCE,
                                 ensure_row_contiguous=ensure_row_contiguous)
    (out,) = kernel(inputs=[xt], output_shapes=[xt.shape], output_dtypes=[mx.float32],
                    grid=(xt.size, 1, 1), threadgroup=(32, 1, 1), stream=mx.gpu)
    assert out.shape == (4, 2, 3)
    np.testing.assert_array_equal(np.array(out), 2 * x.transpose(2, 0, 1))
    # A broadcast input (stride 0) too.
    b = mx.broadcast_to(mx.array(np.arange(3, dtype=np.float32)), (2, 3))
    (out,) = kernel(inputs=[b], output_shapes=[(2, 3)], output_dtypes=[mx.float32],
                    grid=(6, 1, 1), threadgroup=(32, 1, 1), stream=mx.gpu)
    np.testing.assert_array_equal(np.array(out), 2 * np.broadcast_to(np.arange(3), (2, 3)))


@needs_gpu
def test_cuda_kernel_template_int_bool_and_dtype_arguments():
    kernel = mx.fast.cuda_kernel(
        name="affine", input_names=["x"], output_names=["y"],
        source="""
            uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < SIZE) y[i] = static_cast<T>(NEGATE ? -x[i] * SCALE : x[i] * SCALE);
        """)
    x = np.arange(10, dtype=np.int32)
    for negate in (False, True):
        for dtype in (mx.int32, mx.float32):
            (y,) = kernel(inputs=[mx.array(x)], output_shapes=[(10,)], output_dtypes=[dtype],
                          grid=(10, 1, 1), threadgroup=(4, 1, 1), stream=mx.gpu,
                          template=[("T", dtype), ("SIZE", 10), ("SCALE", 3),
                                    ("NEGATE", negate)])
            assert y.dtype == dtype
            np.testing.assert_array_equal(np.array(y), (-3 if negate else 3) * x)


@needs_gpu
def test_cuda_kernel_two_outputs_and_a_2d_grid():
    kernel = mx.fast.cuda_kernel(
        name="sum_and_product", input_names=["a", "b"], output_names=["s", "p"],
        source="""
            uint32_t col = blockIdx.x * blockDim.x + threadIdx.x;
            uint32_t row = blockIdx.y * blockDim.y + threadIdx.y;
            if (row >= a_shape[0] || col >= a_shape[1]) return;
            uint32_t i = row * a_shape[1] + col;
            s[i] = a[i] + b[i];
            p[i] = a[i] * b[i];
        """)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((5, 7)).astype(np.float32)
    s, p = kernel(inputs=[mx.array(a), mx.array(b)], output_shapes=[a.shape, a.shape],
                  output_dtypes=[mx.float32, mx.float32], grid=(7, 5, 1),
                  threadgroup=(4, 4, 1), stream=mx.gpu)
    np.testing.assert_allclose(np.array(s), a + b, rtol=1e-6)
    np.testing.assert_allclose(np.array(p), a * b, rtol=1e-6)


@needs_gpu
def test_cuda_kernel_init_value_fills_the_outputs_first():
    kernel = mx.fast.cuda_kernel(
        name="accumulate", input_names=["x"], output_names=["y", "count"],
        source="""
            uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < x_shape[0]) y[i] += x[i];
            if (i < x_shape[0]) atomicAdd(&count[0], 1);
        """)
    x = np.arange(6, dtype=np.float32)
    y, count = kernel(inputs=[mx.array(x)], output_shapes=[(6,), (1,)],
                      output_dtypes=[mx.float32, mx.int32], grid=(6, 1, 1),
                      threadgroup=(32, 1, 1), init_value=10, stream=mx.gpu)
    np.testing.assert_array_equal(np.array(y), x + 10)
    assert count.item() == 16


@needs_gpu
@pytest.mark.parametrize("extra_bytes", [0, 60 * 1024])  # the second needs the raised limit
def test_cuda_kernel_dynamic_shared_memory_block_sum(extra_bytes):
    kernel = mx.fast.cuda_kernel(
        name="block_sum", input_names=["x"], output_names=["sums"],
        source="""
            extern __shared__ float partial[];
            uint32_t t = threadIdx.x;
            uint32_t i = blockIdx.x * blockDim.x + t;
            partial[t] = i < x_shape[0] ? x[i] : 0.0f;
            __syncthreads();
            for (uint32_t width = blockDim.x / 2; width > 0; width /= 2) {
              if (t < width) partial[t] += partial[t + width];
              __syncthreads();
            }
            if (t == 0) sums[blockIdx.x] = partial[0];
        """,
        shared_memory=256 * 4 + extra_bytes)
    x = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    blocks = -(-x.size // 256)
    (sums,) = kernel(inputs=[mx.array(x)], output_shapes=[(blocks,)],
                     output_dtypes=[mx.float32], grid=(blocks * 256, 1, 1),
                     threadgroup=(256, 1, 1), stream=mx.gpu)
    padded = np.concatenate([x, np.zeros(blocks * 256 - x.size)])
    np.testing.assert_allclose(np.array(sums), padded.reshape(blocks, 256).sum(axis=1),
                               rtol=1e-4, atol=1e-4)


@needs_gpu
def test_cuda_kernel_empty_grid_and_compile_errors():
    kernel = exp_kernel()
    (out,) = kernel(inputs=[mx.zeros((0,))], template=[("T", mx.float32)], grid=(0, 1, 1),
                    threadgroup=(256, 1, 1), output_shapes=[(0,)], output_dtypes=[mx.float32],
                    stream=mx.gpu)
    assert out.shape == (0,) and np.array(out).size == 0
    broken = mx.fast.cuda_kernel(name="broken", input_names=["x"], output_names=["y"],
                                 source="y[0] = undefined_name;")
    (y,) = broken(inputs=[mx.ones(1)], output_shapes=[(1,)], output_dtypes=[mx.float32],
                  grid=(1, 1, 1), threadgroup=(1, 1, 1), stream=mx.gpu)
    with pytest.raises(RuntimeError, match=r"(?s)\[cuda_kernel\] the kernel "
                                           r"'custom_kernel_broken'.*undefined_name"):
        mx.eval(y)


@needs_gpu
def test_cuda_kernel_has_no_derivative():
    kernel = exp_kernel()

    def f(a):
        return kernel(inputs=[a], template=[("T", mx.float32)], grid=(a.size, 1, 1),
                      threadgroup=(32, 1, 1), output_shapes=[a.shape], output_dtypes=[a.dtype],
                      stream=mx.gpu)[0].sum()

    with pytest.raises(RuntimeError, match=r"\[CustomKernel\] has no vjp"):
        mx.grad(f)(mx.ones(8))


@needs_gpu
def test_precompiled_cuda_kernel_runs_ptx_with_scalars():
    x = np.arange(37, dtype=np.float32)
    for negate in (False, True):
        (y,) = mx.fast.precompiled_cuda_kernel(
            name="scale_shift", compiled_source=SCALE_SHIFT_PTX.encode(),
            inputs=[mx.array(x)], output_shapes=[(37,)], output_dtypes=[mx.float32],
            scalars=[2.5, 37, negate], grid=(37, 1, 1), threadgroup=(16, 1, 1),
            stream=mx.gpu)
        want = 2.5 * x + 37
        np.testing.assert_allclose(np.array(y), -want if negate else want, rtol=1e-6)
    # Only the first n elements are written: init_value fills the rest.
    (y,) = mx.fast.precompiled_cuda_kernel(
        name="scale_shift", compiled_source=SCALE_SHIFT_PTX.encode(), inputs=[mx.array(x)],
        output_shapes=[(37,)], output_dtypes=[mx.float32], scalars=[1.0, 5, False],
        grid=(37, 1, 1), threadgroup=(32, 1, 1), init_value=-1.0, stream=mx.gpu)
    np.testing.assert_allclose(np.array(y), np.concatenate([x[:5] + 5, -np.ones(32)]))
    (y,) = mx.fast.precompiled_cuda_kernel(
        name="no_such_kernel", compiled_source=SCALE_SHIFT_PTX.encode(), inputs=[mx.array(x)],
        output_shapes=[(37,)], output_dtypes=[mx.float32], scalars=[], grid=(37, 1, 1),
        threadgroup=(32, 1, 1), stream=mx.gpu)
    with pytest.raises(RuntimeError, match=r"\[precompiled_cuda_kernel\] the kernel "
                                           r"'no_such_kernel' could not be built"):
        mx.eval(y)
