"""Tessera: lazy arrays and machine learning on CPUs and NVIDIA GPUs, with MLX's interface.

    import tessera.core as mx
    a = mx.ones((2, 3))
    b = (a @ a.T + 1).sum()
    print(b.item())
"""

import os
import sys


def _find_pip_libraries():
    """NVIDIA's libraries as pip installs them (the nvidia-* packages that PyTorch
    and JAX bring, not on the loader's path), each named in the variable its
    loader reads: NCCL for the NCCL backend (Note [Communicators] in
    distributed/comm.h), cuDNN for fused attention (Note [cuDNN] in
    backend/cuda/cudnn.cpp)."""
    for variable, folder, name in (("TESSERA_NCCL_LIBRARY", "nccl", "libnccl.so.2"),
                                   ("TESSERA_CUDNN_LIBRARY", "cudnn", "libcudnn.so.9")):
        if variable in os.environ:
            continue
        for root in sys.path:
            path = os.path.join(root or ".", "nvidia", folder, "lib", name)
            if os.path.isfile(path):
                os.environ[variable] = path
                break


def _gpu_of_local_rank():
    """A process of an NCCL job (tessera.launch --backend nccl) takes the GPU of
    its rank on its host: the one GPU the process then sees (the GPU backend
    drives the first it sees), chosen before CUDA starts."""
    if os.environ.get("TESSERA_DISTRIBUTED_BACKEND") != "nccl":
        return
    local = os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("MPI_LOCALRANKID"))
    if local is None:
        return
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = visible.split(",") if visible else None
    if gpus is None:
        os.environ["CUDA_VISIBLE_DEVICES"] = local
    elif int(local) < len(gpus):
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus[int(local)]


_find_pip_libraries()
_gpu_of_local_rank()

from . import core  # noqa: E402
from . import _transforms

# The native submodules importable by name too (import tessera.core.linalg).
for _name in ("cuda", "distributed", "fast", "fft", "linalg", "metal", "random"):
    sys.modules[f"{__name__}.core.{_name}"] = getattr(core, _name)

_transforms.install(core)


def _install_reprlib_fix():
    """reprlib (pytest's assertion messages, the debugger) takes any class named
    ``array`` for the standard library's array.array and calls bool() on it, which
    raises for an array of several elements: show Tessera's arrays as instances."""
    import array as _stdarray
    import reprlib

    standard = reprlib.Repr.repr_array

    def repr_array(self, x, level):
        if isinstance(x, _stdarray.array):
            return standard(self, x, level)
        return self.repr_instance(x, level)

    reprlib.Repr.repr_array = repr_array


_install_reprlib_fix()

__version__ = core.__version__


def _dtype_from_name(name):
    """Unpickles a Dtype (Dtype.__reduce__ names this function)."""
    return getattr(core, "bool_" if name == "bool" else name)
