"""What the runner (harness/runner.py) changes in its own process so that a leaderboard file written for a B200 runs
on a CPU, unmodified, with every kernel launch its host code makes run in the emulator.

Each change is a bridge with a name and a reason; the runner prints the ones a file used (Bridges.used). None edits
the file. Three kinds:
- where the launches go: a compiled CuTe DSL function is called through its exported host code (harness/dsl_export:
  JitCompiledFunction.run_compiled_program for the plain C ABI, the TVM-FFI classes' __call__), and a
  torch.utils.cpp_extension.load_inline extension is built for the emulator (harness/cuda_build) and loaded against
  the CUDA stand-ins (harness/host). Both hand each launch to the runner as it is made.
- the device: the file's tensors live in host memory (the emulator reads and writes global memory at the host address
  the host code passes), so torch is made to present them as CUDA tensors of device 0, a B200 (TORCH_AS_CUDA:
  tensor.device / .is_cuda, device= arguments, .cuda() / .to("cuda"), torch.cuda's queries, DLPack's device), and the
  DSL's HardwareInfo answers with the B200's counts instead of asking a driver.
- the CuTe DSL version: a file written for the leaderboard's DSL (4.3) compiles with the installed one (4.8.1) where a
  name or a behaviour moved between them (DSL_MOVED below).
"""
from __future__ import annotations

import ctypes
import enum
import functools
import math
import mmap
import os
import sys
import traceback
from collections import Counter
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from emu.device import SM_COUNT

# name -> why the bridge exists (printed with the file's result when it is used)
BRIDGES = {
    "torch-as-cuda": "the file's tensors are host memory the emulator addresses as global memory: torch presents them "
                     "as CUDA tensors of device 0, a B200 (device, is_cuda, device= arguments, .cuda(), torch.cuda's "
                     "queries, DLPack's device)",
    "dsl-export": "a compiled CuTe DSL function is called through its export_to_c host code, linked with the CUDA "
                  "stand-ins (the DSL's own JIT call needs a driver)",
    "load-inline": "torch's load_inline builds the extension with the nvcc wheel against the CUDA stand-ins, keeping "
                   "its PTX (harness/cuda_build.py); torch's CUDA libraries are not linked",
    "dsl-hardware-info": "cutlass.utils.HardwareInfo answers with the B200's counts (it asks the driver otherwise)",
    "lazy-device-memory": "a device tensor of torch.zeros / torch.empty larger than LAZY_BYTES (a B200 has 192 GB, "
                          "this machine far less) is anonymous memory committed only where touched, zeros until "
                          "written; the emulator's global memory holds the views of it the file uses, not all of it",
    "dsl-4.3-int-tuple": "DSL 4.3 passed a tuple of Python ints to cute.compile as dynamic Int32 values; 4.8 bakes them "
                         "in as constants: the runner hands cute.compile Int32 values",
    "dsl-4.3-mark-compact-shape-dynamic": "DSL 4.3's Tensor.mark_compact_shape_dynamic on a compile-time tensor did "
                                          "nothing; 4.8's raises NotImplementedError: a no-op again",
    "dsl-4.3-proxy-kind": "DSL 4.3 exported cute.arch.ProxyKind / SharedSpace and fence_proxy took them; 4.8 takes "
                          "strings: the enums are provided and passed as their strings",
}


class Bridges:
    """The bridges installed in this process and the ones the file used (name -> first detail)."""

    def __init__(self):
        self.used: dict[str, str] = {}

    def use(self, name: str, detail: str = "") -> None:
        if name not in BRIDGES:
            raise KeyError(name)
        self.used.setdefault(name, detail)

    def lines(self) -> list[str]:
        return [f"bridge {name}: {BRIDGES[name]}{f' ({detail})' if detail else ''}" for name, detail in self.used.items()]


def where_in(path: Path, exc: BaseException | None = None) -> str:
    """file:line of the innermost frame of `path` in exc's traceback (or in the current stack): where the file was
    when it did what the runner reports."""
    frames = traceback.extract_tb(exc.__traceback__) if exc is not None else traceback.extract_stack()
    own = [f for f in frames if Path(f.filename).resolve() == Path(path).resolve()]
    return f"{Path(path).name}:{own[-1].lineno}" if own else ""


# ----------------------------------------------------------------------------- the device
CUDA0 = torch.device("cuda", 0)
LAZY_BYTES = 4 << 30  # device allocations from this size up are lazily committed (lazy-device-memory)
LAZY_FACTORIES = ("zeros", "empty")  # their memory is zero until written, which fresh anonymous pages are
_TENSOR_GETTERS = {"device": CUDA0, "is_cuda": True, "is_cpu": False}
MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)  # Linux's value where the mmap module does not name it
LAZY_STORAGES: set = set()  # data pointers of the storages lazy-device-memory made (harness.runner.host_regions)
_K_DL_CUDA = 2


def _cpu(device):
    """A device argument with CUDA replaced by the CPU (the runner's tensors live there)."""
    if isinstance(device, int) or (isinstance(device, (str, torch.device)) and torch.device(device).type == "cuda"):
        return torch.device("cpu")
    return device


class TorchAsCuda(TorchFunctionMode):
    """torch inside the runner's calls of the file: tensors say they are on cuda:0, devices given as CUDA become the
    CPU, and DLPack exports say kDLCUDA (the module docstring's "the device")."""

    def __init__(self, bridges: Bridges):
        super().__init__()
        self.bridges = bridges

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        owner = getattr(func, "__self__", None)  # a property's getter is its descriptor's bound __get__
        if (getattr(func, "__name__", "") == "__get__" and getattr(owner, "__objclass__", None) is torch._C.TensorBase
                and owner.__name__ in _TENSOR_GETTERS):
            self.bridges.use("torch-as-cuda", "tensor." + owner.__name__)
            return _TENSOR_GETTERS[owner.__name__]
        if "device" in kwargs and _cpu(kwargs["device"]) is not kwargs["device"]:
            self.bridges.use("torch-as-cuda", f"device={kwargs['device']!r}")
            kwargs["device"] = _cpu(kwargs["device"])
            lazy = self.lazy_tensor(func, args, kwargs)
            if lazy is not None:
                return lazy
        if func in (torch.Tensor.cuda,):
            return args[0]
        if func in (torch.Tensor.to,):
            args = tuple(_cpu(a) if isinstance(a, (str, torch.device)) else a for a in args)
        if func is torch.Tensor.__dlpack_device__:
            return (_K_DL_CUDA, 0)
        out = func(*args, **kwargs)
        if func is torch.Tensor.__dlpack__:
            _dlpack_on_cuda(out)
        return out


    def lazy_tensor(self, func, args, kwargs):
        """torch.zeros / torch.empty of a device tensor of LAZY_BYTES or more: anonymous memory committed only where
        touched (lazy-device-memory), or None for any other call."""
        if getattr(func, "__name__", "") not in LAZY_FACTORIES or not args:
            return None
        size = tuple(args[0]) if isinstance(args[0], (tuple, list, torch.Size)) else tuple(args)
        if not all(isinstance(x, int) for x in size) or set(kwargs) - {"device", "dtype", "requires_grad"}:
            return None
        dtype = kwargs.get("dtype") or torch.get_default_dtype()
        nbytes = math.prod(size) * torch.empty(0, dtype=dtype).element_size()
        if nbytes < LAZY_BYTES:
            return None
        self.bridges.use("lazy-device-memory", f"torch.{func.__name__}{size} of {dtype}: {nbytes / 1e9:.1f} GB")
        memory = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE)
        tensor = torch.frombuffer(memory, dtype=dtype).view(size)  # the tensor keeps the mapping alive
        LAZY_STORAGES.add(tensor.untyped_storage().data_ptr())
        return tensor


def _dlpack_on_cuda(capsule) -> None:
    """Rewrite the device of a DLPack capsule torch made (a DLManagedTensor, or the versioned struct whose DLTensor
    follows {version, manager_ctx, deleter, flags}) to CUDA device 0."""
    get, name = ctypes.pythonapi.PyCapsule_GetPointer, ctypes.pythonapi.PyCapsule_GetName
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    kind = name(capsule)
    base = get(capsule, kind)
    offset = 32 if kind == b"dltensor_versioned" else 0
    ctypes.c_int32.from_address(base + offset + 8).value = _K_DL_CUDA  # DLTensor.device.device_type
    ctypes.c_int32.from_address(base + offset + 12).value = 0


class DeviceWork(TorchDispatchMode):
    """The torch operations a call of the file runs on its tensors (aten level, so those its C++ host code runs too):
    on a B200 each is a kernel of its own, which the runner neither emulates as one nor times. Views and bare
    allocations launch nothing and are not counted. `ops`: aten operator -> calls."""

    def __init__(self):
        super().__init__()
        self.ops: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        if not func.is_view and not name.startswith(("aten.empty", "aten._local_scalar_dense", "aten.lift_fresh")):
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))


class B200Properties:
    """torch.cuda.get_device_properties of the emulated device (the B200's counts: emu.device)."""

    name = "NVIDIA B200 (emulated)"
    major, minor = 10, 0
    multi_processor_count = SM_COUNT
    total_memory = 192 * 1024**3
    warp_size = 32


class _Event:
    """torch.cuda.Event: launches run when they are made, so events order nothing and time nothing."""

    def __init__(self, *args, **kwargs):
        pass

    def record(self, *args, **kwargs):
        pass

    def synchronize(self):
        pass

    def wait(self, *args, **kwargs):
        pass

    def elapsed_time(self, other):
        raise RuntimeError("torch.cuda.Event timing in the emulator: use tools/emulate.py --timing for a timed figure")


class _Queue:
    """torch.cuda's current / default queue: handle 0, the legacy default queue the stand-ins receive."""

    cuda_stream = 0  # the attribute name torch gives the handle
    device = CUDA0

    def synchronize(self):
        pass

    def wait_stream(self, other):
        pass


def torch_cuda_answers() -> dict:
    """The torch.cuda functions the runner answers (name -> replacement): a B200 is device 0."""
    return {
        "is_available": lambda: True, "device_count": lambda: 1, "current_device": lambda: 0,
        "set_device": lambda device: None, "synchronize": lambda device=None: None,
        "get_device_capability": lambda device=None: (10, 0),
        "get_device_name": lambda device=None: B200Properties.name,
        "get_device_properties": lambda device=None: B200Properties(), "Event": _Event,
        "current_stream": lambda device=None: _Queue(), "default_stream": lambda device=None: _Queue(),
        "empty_cache": lambda: None,
    }


class DeviceBridge:
    """Enter: torch presents the CPU as cuda:0 (TorchAsCuda and torch.cuda's answers); exit: torch as it was. Entered
    around the file's import and each of its calls, not around the runner's own reference computation."""

    def __init__(self, bridges: Bridges):
        self.bridges = bridges
        self.mode = TorchAsCuda(bridges)
        self.saved = {}

    def __enter__(self):
        for name, fn in torch_cuda_answers().items():
            self.saved[name] = getattr(torch.cuda, name, None)
            setattr(torch.cuda, name, _counted(self.bridges, name, fn))
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        self.mode.__exit__(*exc)
        for name, fn in self.saved.items():
            setattr(torch.cuda, name, fn)
        return False


def _counted(bridges: Bridges, name: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        bridges.use("torch-as-cuda", f"torch.cuda.{name}")
        return fn(*args, **kwargs)
    return wrapper


# ----------------------------------------------------------------------------- the CuTe DSL
def install_dsl(bridges: Bridges, exported) -> None:
    """The CuTe DSL bridges: launches through exported host code (`exported(compiled) -> ExportedFunction`, the
    runner's per-function cache), the B200's HardwareInfo, and DSL_MOVED. Imports the DSL (CUTE_DSL_ARCH and the
    dump settings must be in the environment already)."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.base_dsl.jit_executor import JitCompiledFunction
    from cutlass.cutlass_dsl.tvm_ffi_provider import TVMFFIJitCompiledFunction, TVMFFIJitCompiledFunctionWithKwargs

    def run_compiled_program(self, exe_args):
        bridges.use("dsl-export", "plain C ABI")
        return exported(self).call_c_abi(exe_args)

    def tvm_ffi_call(self, *args, **kwargs):
        bridges.use("dsl-export", "TVM-FFI")
        if kwargs:
            raise TypeError("keyword arguments to a TVM-FFI compiled function: the emulator passes positional ones")
        return exported(self).call_tvm_ffi(args)

    JitCompiledFunction.run_compiled_program = run_compiled_program
    for cls in (TVMFFIJitCompiledFunction, TVMFFIJitCompiledFunctionWithKwargs):
        cls.__call__ = tvm_ffi_call
    _install_hardware_info(bridges)
    _install_dsl_moved(bridges, cutlass, cute)


def _install_hardware_info(bridges: Bridges) -> None:
    import cutlass.utils as utils

    def init(self, device_id: int = 0):
        bridges.use("dsl-hardware-info")
        self.device_id = device_id

    def max_active_clusters(self, cluster_size: int = 1):
        bridges.use("dsl-hardware-info", f"get_max_active_clusters({cluster_size})")
        return SM_COUNT // cluster_size

    utils.HardwareInfo.__init__ = init
    utils.HardwareInfo.get_max_active_clusters = max_active_clusters
    utils.HardwareInfo.get_device_multiprocessor_count = lambda self: SM_COUNT


def _install_dsl_moved(bridges: Bridges, cutlass, cute) -> None:
    """DSL_MOVED: the 4.3 -> 4.8 differences a leaderboard-era file meets (BRIDGES names each)."""
    import cutlass.cute.arch as arch
    import cutlass.cute.typing as cute_typing
    from cutlass._mlir.dialects import nvvm

    original_compile = cute.compile

    def compile_with_dynamic_int_tuples(fn, *args, **kwargs):
        def as_int32(a):
            if isinstance(a, tuple) and a and all(type(x) is int for x in a):
                bridges.use("dsl-4.3-int-tuple", f"cute.compile argument {a}")
                return tuple(cutlass.Int32(x) for x in a)
            return a
        return original_compile(fn, *map(as_int32, args), **kwargs)

    cute.compile = compile_with_dynamic_int_tuples

    original_mark = cute_typing.Tensor.mark_compact_shape_dynamic

    def mark_compact_shape_dynamic(self, *args, **kwargs):
        try:
            return original_mark(self, *args, **kwargs)
        except NotImplementedError:
            bridges.use("dsl-4.3-mark-compact-shape-dynamic")
            return None

    cute_typing.Tensor.mark_compact_shape_dynamic = mark_compact_shape_dynamic

    if not hasattr(arch, "ProxyKind"):
        def moved(name):
            if name in ("ProxyKind", "SharedSpace"):
                bridges.use("dsl-4.3-proxy-kind", f"cute.arch.{name}")
                return getattr(nvvm, name)
            raise AttributeError(f"module 'cutlass.cute.arch' has no attribute {name!r}")

        arch.__getattr__ = moved
        original_fence = arch.fence_proxy

        def fence_proxy(kind, *args, space=None, **kwargs):
            if isinstance(kind, enum.Enum) or isinstance(space, enum.Enum):
                bridges.use("dsl-4.3-proxy-kind", "fence_proxy with enum arguments")
            return original_fence(str(kind) if isinstance(kind, enum.Enum) else kind, *args,
                                  space=str(space) if isinstance(space, enum.Enum) else space, **kwargs)

        arch.fence_proxy = fence_proxy
        cute.arch.fence_proxy = fence_proxy


def dsl_environment(dump_dir: Path) -> None:
    """What the DSL must find in the environment before it is imported: the B200 as target, the PTX and cubin kept
    (the emulator runs the PTX), no file cache (as on the leaderboard)."""
    dump_dir.mkdir(parents=True, exist_ok=True)  # the DSL writes there only into a folder that exists
    os.environ["CUTE_DSL_ARCH"] = "sm_100a"
    os.environ["CUTE_DSL_KEEP"] = "ptx,cubin"
    os.environ["CUTE_DSL_DUMP_DIR"] = str(dump_dir)
    os.environ["CUTE_DSL_DISABLE_FILE_CACHING"] = "1"


# ----------------------------------------------------------------------------- load_inline
def install_load_inline(bridges: Bridges, loaded) -> None:
    """torch.utils.cpp_extension's build step replaced: the extension is built for the emulator
    (harness/cuda_build.build_extension) and loaded; `loaded(extension)` is told of each (the runner maps its kernels
    to their PTX)."""
    import importlib.util

    import torch.utils.cpp_extension as ext

    from .cuda_build import UnsupportedHostCall, build_extension, missing_symbol

    def jit_compile(name, sources, extra_cflags, extra_cuda_cflags, extra_sycl_cflags, extra_ldflags,
                    extra_include_paths, build_directory, verbose, with_cuda, with_sycl, is_python_module,
                    is_standalone, keep_intermediates=True):
        bridges.use("load-inline", name)
        if is_standalone:
            raise NotImplementedError("a standalone executable (is_standalone=True) cannot run in the emulator")
        built = build_extension(name, sources, extra_cflags, extra_cuda_cflags, extra_ldflags, extra_include_paths,
                                with_cuda, is_standalone)
        loaded(built)
        try:  # the loader's own words (torch.ops.load_library hides them): a symbol the stand-ins do not provide
            ctypes.CDLL(str(built.library))
        except OSError as e:
            symbol = missing_symbol(str(e))
            if symbol is None:
                raise
            raise UnsupportedHostCall(f"the host code calls {symbol}, which the emulator's CUDA stand-ins do not "
                                      f"provide", "", str(e)) from None
        if not is_python_module:
            torch.ops.load_library(str(built.library))
            return str(built.library)
        spec = importlib.util.spec_from_file_location(name, built.library)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules.setdefault(name, module)
        return module

    ext._jit_compile = jit_compile
