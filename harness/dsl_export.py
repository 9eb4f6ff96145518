"""A compiled CuTe DSL host function called through the object file its `export_to_c` writes, linked with the CUDA
stand-ins (harness/host.py): the two calling conventions an export has, and a compiled function of a running file
made callable that way.

- The plain C ABI (a function compiled without --enable-tvm-ffi): `export_to_c(folder, prefix)` writes <prefix>.h
  and <prefix>.o. The header defines the convention: `_mlir_<p>_cuda_init(void **)` takes {cudaLibrary_t **,
  cudaError_t *}, `_mlir_<p>_cuda_load_to_device(void **)` takes {cudaLibrary_t **, int32 *device, cudaError_t *},
  and the entry `_mlir_<p>__mlir_ciface_<name>(void **args, int32 num_args)` takes a pointer to each argument (the
  same pointers the DSL's own JIT call packs: ExecutionArgs.generate_execution_args), then the queue handle if the
  function takes one (the default queue) and an int32 return slot.
- TVM-FFI (compiled with --enable-tvm-ffi): `export_to_c(object, function_name)` exports `__tvm_ffi_<name>`, a
  TVMFFISafeCallType (self, const TVMFFIAny *args, int32 num_args, TVMFFIAny *result) -> int; a tensor argument is a
  kTVMFFIDLTensorPtr to a DLTensor (dlpack.h).
ExportedFunction wraps one compiled function of a file the runner (harness/runner.py) imports: exported and linked
once, then each call made with the file's own arguments, its launches handed to the runner as they are made.
"""
from __future__ import annotations

import ctypes
import re
from pathlib import Path

from emu.ptx import select_entry

from .compile_worker import C_ABI_PREFIX, EXPORT_NAME
from .host import StandIns, build_library, code_from_image


# ----------------------------------------------------------------------------- the plain C ABI
def c_abi_entry(header: str, prefix: str) -> tuple[str, list[str]]:
    """(entry symbol, the names of its argument slots in order) from an export's header."""
    m_entry = re.search(r"void\s+(_mlir_%s__mlir_ciface_\w+)\(void \*\*args, int32_t num_args\)" % prefix, header)
    m_args = re.search(r"void \*args\[(\d+)\] = \{\s*(.*?)\s*\};", header, re.S)
    if not m_entry or not m_args:
        raise RuntimeError(f"cannot find the host entry / argument list in the {prefix}.h export_to_c wrote")
    return m_entry.group(1), [a.strip().lstrip("&") for a in m_args.group(2).split(",") if a.strip()]


def init_library(lib, prefix: str) -> None:
    """cuda_init, then cuda_load_to_device on device 0 (what the DSL's module load does first)."""
    storage = ctypes.c_void_p(0)
    library_ptr = ctypes.c_void_p(ctypes.addressof(storage))
    ret, device_id = ctypes.c_int32(0), ctypes.c_int32(0)
    for fn_name, packed in ((f"_mlir_{prefix}_cuda_init", (library_ptr, ret)),
                            (f"_mlir_{prefix}_cuda_load_to_device", (library_ptr, device_id, ret))):
        fn = getattr(lib, fn_name)
        fn.restype, fn.argtypes = None, [ctypes.c_void_p]
        arr = (ctypes.c_void_p * len(packed))(*[ctypes.addressof(x) for x in packed])
        fn(ctypes.addressof(arr))
        if ret.value:
            raise RuntimeError(f"{fn_name} returned cudaError {ret.value}")


def call_c_abi(lib, entry: str, pointers: list, slots: int) -> int:
    """Call the entry with `pointers` (an address per argument), a null queue where the entry has one more slot, and
    the return slot; the entry's int32 result."""
    extra = slots - len(pointers)
    if extra not in (1, 2):
        raise RuntimeError(f"the export's entry has {slots} argument slots for {len(pointers)} arguments")
    queue, ret = ctypes.c_void_p(0), ctypes.c_int32(0)
    values = [int(p) for p in pointers] + [ctypes.addressof(queue)] * (extra - 1) + [ctypes.addressof(ret)]
    arr = (ctypes.c_void_p * slots)(*values)
    fn = getattr(lib, entry)
    fn.restype, fn.argtypes = None, [ctypes.c_void_p, ctypes.c_int32]
    fn(ctypes.addressof(arr), slots)
    return ret.value


# ----------------------------------------------------------------------------- TVM-FFI
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):  # dlpack.h
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class TVMFFIAny(ctypes.Structure):  # tvm/ffi/c_api.h: {int32 type_index; uint32 pad; 8-byte value}
    _fields_ = [("type_index", ctypes.c_int32), ("zero_padding", ctypes.c_uint32), ("v_int64", ctypes.c_int64)]


# tvm/ffi/c_api.h TVMFFITypeIndex; dlpack.h DLDeviceType
K_TVMFFI_NONE, K_TVMFFI_INT, K_TVMFFI_BOOL, K_TVMFFI_FLOAT, K_TVMFFI_OPAQUE_PTR, K_TVMFFI_DLTENSOR_PTR = 0, 1, 2, 3, 4, 7
K_DL_CUDA = 2


def dltensor(address: int, dtype: tuple, shape, strides, keep: list) -> DLTensor:
    """A DLTensor on CUDA device 0 at `address` (dtype: (code, bits, lanes)); its arrays appended to `keep`."""
    sh = (ctypes.c_int64 * len(shape))(*shape)
    st = (ctypes.c_int64 * len(strides))(*strides)
    t = DLTensor(ctypes.c_void_p(int(address)), DLDevice(K_DL_CUDA, 0), len(shape), DLDataType(*dtype), sh, st, 0)
    keep += [sh, st, t]
    return t


def call_tvm_ffi(lib, name: str, args: list[TVMFFIAny]) -> int:
    """Call __tvm_ffi_<name> with `args`; its return code (0: success)."""
    arr = (TVMFFIAny * max(len(args), 1))(*args)
    result = TVMFFIAny(K_TVMFFI_NONE, 0, 0)
    fn = getattr(lib, "__tvm_ffi_" + name)
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p]
    return fn(None, ctypes.addressof(arr), len(args), ctypes.addressof(result))


def torch_dtype_code(t) -> tuple:
    """(code, bits, lanes) torch's own DLPack export gives the tensor's dtype."""
    import torch.utils.dlpack

    capsule = torch.utils.dlpack.to_dlpack(t.detach()[(0,) * t.dim()] if t.numel() else t.detach())
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    dt = DLTensor.from_address(get(capsule, b"dltensor")).dtype
    return dt.code, dt.bits, dt.lanes


def tvm_ffi_arg(value, keep: list) -> TVMFFIAny:
    """A Python argument as TVM-FFI passes it: a torch tensor as a DLTensor on the CUDA device at its data pointer (the
    runner's tensors are host memory the emulator addresses as global memory), bool, int, float, None, and a CuTe DSL
    pointer as an opaque pointer. Anything else raises TypeError naming its type."""
    import torch

    if isinstance(value, torch.Tensor):
        t = dltensor(value.data_ptr(), torch_dtype_code(value), tuple(value.shape), tuple(value.stride()), keep)
        return TVMFFIAny(K_TVMFFI_DLTENSOR_PTR, 0, ctypes.addressof(t))
    if value is None:
        return TVMFFIAny(K_TVMFFI_NONE, 0, 0)
    if isinstance(value, bool):
        return TVMFFIAny(K_TVMFFI_BOOL, 0, int(value))
    if isinstance(value, int):
        return TVMFFIAny(K_TVMFFI_INT, 0, value)
    if isinstance(value, float):
        return TVMFFIAny(K_TVMFFI_FLOAT, 0, int.from_bytes(ctypes.c_double(value), "little"))
    if hasattr(value, "toint"):  # cute.runtime's pointer (make_ptr)
        return TVMFFIAny(K_TVMFFI_OPAQUE_PTR, 0, int(value.toint()))
    raise TypeError(f"a {type(value).__module__}.{type(value).__name__} argument to a TVM-FFI function: the emulator "
                    f"passes torch tensors, ints, floats, bools, None and DSL pointers")


# ----------------------------------------------------------------------------- a running file's compiled function
class ExportedFunction:
    """One compiled function of the running file, exported into `folder`, linked with the stand-ins and called with
    the file's arguments: each launch goes to `sink(CapturedLaunch)` as the host code makes it."""

    def __init__(self, compiled, folder: Path, sink, dsl_version: str):
        from cutlass.cutlass_dsl.tvm_ffi_provider import TVMFFIJitCompiledFunctionBase

        ptx = compiled.__ptx__
        if not ptx:
            raise RuntimeError("the compiled function kept no PTX (the runner sets CUTE_DSL_KEEP=ptx,cubin)")
        folder.mkdir(parents=True, exist_ok=True)
        self.tvm_ffi = isinstance(compiled, TVMFFIJitCompiledFunctionBase)
        if self.tvm_ffi:
            compiled.export_to_c(str(folder / "kernel.o"), EXPORT_NAME)
        else:
            compiled.export_to_c(str(folder), C_ABI_PREFIX)
            (folder / f"{C_ABI_PREFIX}.o").replace(folder / "kernel.o")
            self.entry, names = c_abi_entry((folder / f"{C_ABI_PREFIX}.h").read_text(), C_ABI_PREFIX)
            self.slots = len(names)
        self.lib = ctypes.CDLL(str(build_library(folder)))
        built_by = f"CuTe DSL {dsl_version}"
        self.standins = StandIns(self.lib, lambda name, image, _path: code_from_image(
            select_entry(ptx, name), name, image, built_by), sink)
        if not self.tvm_ffi:
            try:
                init_library(self.lib, C_ABI_PREFIX)
            except RuntimeError as e:  # what failed inside the stand-ins' callbacks says why
                raise RuntimeError("; ".join([str(e)] + self.standins.errors)) from None

    def call_c_abi(self, exe_args: list) -> int:
        """A call with the argument pointers the DSL packed for its own JIT call (exe_args)."""
        pointers = [a.value if isinstance(a, ctypes.c_void_p) else int(a) for a in exe_args]
        return call_c_abi(self.lib, self.entry, pointers, self.slots)

    def call_tvm_ffi(self, args: tuple) -> int:
        keep = []
        return call_tvm_ffi(self.lib, EXPORT_NAME, [tvm_ffi_arg(a, keep) for a in args])

