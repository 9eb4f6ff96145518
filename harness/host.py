"""The CUDA host side of a kernel launch, without a GPU: stand-ins of the CUDA runtime and driver
(harness/launch_stubs.c) built, loaded and primed, and every launch the host code makes turned into an
emu.CapturedLaunch.

Two ways of use:
- one recorded launch (harness/capture.py, the calibration runners): prime_stubs with the kernel's PTX and
  resources, call the host function, then recorded_launch reads what the stand-ins saw;
- every launch, as it is made (harness/runner.py, any submission file): StandIns installs callbacks, so each kernel
  the host code registered is resolved to its code (KernelCode: its PTX, from the compiler that built it, and its
  cubin) when the host code first names it, and each launch is handed to a sink the moment it is made, its parameter
  bytes as launched. Device memory is host memory there: cudaMalloc returns host memory, cudaMemcpy copies bytes, and
  cuTensorMapEncodeTiled is answered by emu.tma.driver_encode_tiled (the driver's encoder, calibrated on an H200):
  what the driver documents it refuses comes back as the driver's CUDA_ERROR_INVALID_VALUE (the file's failure,
  `refusals`), what the emulator cannot decode as CUDA_ERROR_NOT_SUPPORTED (its own limit, `limits`).

Built artifacts live under cache_root() ($EMU_LAUNCH_CACHE, default <tmp>/emu_launch_cache). Needs a C compiler
(`cc`, or $CC).
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from emu.cubin import device_elves, has_function
from emu.device import B200_DEVICE_ATTRS, B200_LIMITS
from emu.launch import CapturedLaunch, entry_params
from emu.ptx import static_shared_bytes
from emu.tma import CUDA_ERROR_INVALID_VALUE, driver_encode_tiled

HERE = Path(__file__).resolve().parent
STUBS_C = HERE / "launch_stubs.c"
# CUfunction_attribute ids (cuda.h) the stand-ins answer; 1 (static shared memory) and 4 (registers) come from the
# kernel's cubin.
KERNEL_ATTRS = {0: B200_LIMITS["threads_per_block"], 1: 0, 2: 0, 3: 0, 4: 0, 5: 100, 6: 100, 8: 0}
CLUSTER_DIM_ATTR = 4  # cudaLaunchAttributeClusterDimension
STUB_LIMITS = ("threads_per_block", "block_x", "block_y", "block_z", "grid_x", "grid_y", "grid_z", "smem_default",
               "smem_optin", "regs_per_block", "reg_unit", "cluster_portable", "cluster_nonportable")
CUDA_ERROR_INVALID_DEVICE_FUNCTION = 98
CUDA_ERROR_UNKNOWN = 999


class LaunchError(RuntimeError):
    """The launch a B200 would refuse, or DSL output that says "Error:": the kernel never runs."""


def cache_root() -> Path:
    return Path(os.environ.get("EMU_LAUNCH_CACHE") or Path(tempfile.gettempdir()) / "emu_launch_cache")


def c_compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise RuntimeError("harness.host needs a C compiler (cc/gcc/clang, or $CC): e.g. apt-get install gcc")
    return cc


def _link(out: Path, inputs: list, extra=()) -> Path:
    """cc -shared the stand-ins with `inputs` into `out` (built once: a concurrent builder's copy wins)."""
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
        cmd = [c_compiler(), "-shared", "-fPIC", "-O1", "-Wl,-Bsymbolic", "-Wl,-z,defs", *extra, "-o", str(tmp),
               str(STUBS_C), *map(str, inputs), "-ldl"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"linking the CUDA stand-ins failed: {' '.join(cmd)}\n{p.stderr[-3000:]}")
        os.replace(tmp, out)
    return out


def stubs_id() -> str:
    return hashlib.sha256(STUBS_C.read_bytes()).hexdigest()[:12]


def build_library(art: Path) -> Path:
    """The exported host object <art>/kernel.o linked with the stand-ins."""
    return _link(art / f"host-{stubs_id()}.so", [art / "kernel.o"])


CUDA_STANDIN_SONAME = "libemu_cuda.so"
# Libraries a CUDA extension links (-l<name>) that the stand-ins take the place of: every one names libemu_cuda.so; a
# call of a function none of them defines fails at load, naming it (harness/runner.py).
CUDA_STANDIN_LIBRARIES = ("cudart", "cuda", "cublas", "cublasLt")


def cuda_standin_dir() -> Path:
    """A folder holding the stand-ins alone as libemu_cuda.so, with lib<name>.so of CUDA_STANDIN_LIBRARIES naming the
    same file: a CUDA extension linked with -L<folder> -lcudart -lcuda needs libemu_cuda.so at load time (its
    SONAME)."""
    d = cache_root() / f"cuda_standins-{stubs_id()}"
    _link(d / CUDA_STANDIN_SONAME, [], [f"-Wl,-soname,{CUDA_STANDIN_SONAME}"])
    for alias in (f"lib{name}.so" for name in CUDA_STANDIN_LIBRARIES):
        if not (d / alias).exists():
            tmp = d / f"{alias}.{os.getpid()}.tmp"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(CUDA_STANDIN_SONAME)
            os.replace(tmp, d / alias)
    return d


# ----------------------------------------------------------------------------- reading and priming the stand-ins
def dsl_errors(text: str) -> list[str]:
    """The lines of DSL output that report an error ("Error: ..."): the DSL prints some limits it knows are broken
    (e.g. "launch shared memory exceeds current GPU arch sm_100a allowed") and carries on."""
    return [line.strip() for line in text.splitlines() if "Error:" in line]


@contextlib.contextmanager
def host_output(lib):
    """Capture what the host code prints (C stdio on file descriptors 1 and 2) while the block runs; the captured text
    is in the yielded list's first element afterwards."""
    out = [""]
    with tempfile.TemporaryFile() as tmp:
        saved = [os.dup(1), os.dup(2)]
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            os.dup2(tmp.fileno(), 1)
            os.dup2(tmp.fileno(), 2)
            yield out
        finally:
            lib.emu_flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            tmp.seek(0)
            out[0] = tmp.read().decode(errors="replace")


def read_log(lib) -> list[str]:
    n = ctypes.c_int.in_dll(lib, "emu_log_len").value
    buf = (ctypes.c_char * 160 * 256).in_dll(lib, "emu_log")
    return [bytes(buf[i]).split(b"\0", 1)[0].decode() for i in range(n)]


def _c_string(lib, name: str) -> str:
    return ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, name))).decode(errors="replace")


def image_size(data: int) -> int:
    """Size of the module image at `data` (what cudaLibraryLoadData or __cudaRegisterFatBinary is handed): a
    fatbinary (header: u32 magic 0xBA55ED50, u16 version, u16 header size, u64 payload size) or an ELF64 cubin (its
    section headers or farthest section)."""
    hdr = ctypes.string_at(data, 64)
    if int.from_bytes(hdr[:4], "little") == 0xBA55ED50:
        return int.from_bytes(hdr[6:8], "little") + int.from_bytes(hdr[8:16], "little")
    if hdr[:4] != b"\x7fELF" or hdr[4] != 2:
        raise RuntimeError(f"a module image that is neither a fatbinary nor an ELF64 cubin (magic {hdr[:8].hex()})")
    shoff = int.from_bytes(hdr[0x28:0x30], "little")
    shentsize = int.from_bytes(hdr[0x3A:0x3C], "little")
    shnum = int.from_bytes(hdr[0x3C:0x3E], "little")
    end = shoff + shentsize * shnum
    for i in range(shnum):
        sh = ctypes.string_at(data + shoff + i * shentsize, shentsize)
        if int.from_bytes(sh[4:8], "little") == 8:  # SHT_NOBITS
            continue
        end = max(end, int.from_bytes(sh[0x18:0x20], "little") + int.from_bytes(sh[0x20:0x28], "little"))
    return end


def kernel_cubin(image: bytes, kernel_name: str) -> bytes:
    """The cubin of a module image that holds kernel_name's code (b"" when none does: e.g. a compressed entry)."""
    return next((elf for elf in device_elves(image) if has_function(elf, kernel_name)), b"")


def prime_device(lib) -> None:
    """What the stand-ins answer and enforce for any kernel: the B200's device attributes and launch limits."""
    dev = (ctypes.c_int * 256).in_dll(lib, "emu_device_attr_values")
    for i in range(256):
        dev[i] = B200_DEVICE_ATTRS.get(i, -1)
    for key in STUB_LIMITS:
        (ctypes.c_long if key == "grid_x" else ctypes.c_int).in_dll(lib, f"emu_limit_{key}").value = B200_LIMITS[key]


def prime_kernel(lib, ptx: str, resources: dict) -> None:
    """What the stand-ins check one kernel's launch against: parameter sizes from the PTX, its registers and static
    shared memory (`resources`, from its cubin) and .reqntid."""
    _, params = entry_params(ptx)
    ctypes.c_int.in_dll(lib, "emu_num_params").value = len(params)
    sizes = (ctypes.c_int * 64).in_dll(lib, "emu_param_sizes")
    for i, (_, size, _, _) in enumerate(params):
        sizes[i] = size
    kattrs = {**KERNEL_ATTRS, 1: resources["static_smem"] or 0, 4: resources["registers"] or 0}
    kat = (ctypes.c_int * 64).in_dll(lib, "emu_kernel_attr_values")
    for i in range(64):
        kat[i] = kattrs.get(i, -1)
    static = resources["static_smem"]
    ctypes.c_int.in_dll(lib, "emu_kernel_static_smem").value = -1 if static is None else static
    ctypes.c_int.in_dll(lib, "emu_kernel_registers").value = resources["registers"] or -1
    for directive in ("reqntid", "reqnctapercluster"):  # the block and the compile-time cluster shape, 0: none
        dims = (ctypes.c_uint * 3).in_dll(lib, f"emu_kernel_{directive}")
        m = re.search(rf"\.{directive}\s+(\d+)\s*,\s*(\d+)\s*,\s*(\d+)", ptx)
        for i, v in enumerate(m.groups() if m else (0, 0, 0)):
            dims[i] = int(v)


def prime_stubs(lib, ptx: str, resources: dict) -> None:
    """Prime the stand-ins for one host call that launches the kernel of `ptx`: its records cleared, the device and
    the kernel primed."""
    lib.emu_reset()
    prime_device(lib)
    prime_kernel(lib, ptx, resources)
    lib.resources = resources


class _Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


def _launch_fields(lib, params: list) -> dict:
    """The launch the stand-ins recorded last: grid, block, cluster, dynamic shared memory, launch attributes, the
    parameter bytes split by `params` (entry_params)."""
    grid = _Dim3.in_dll(lib, "emu_grid")
    block = _Dim3.in_dll(lib, "emu_block")
    nattr = ctypes.c_uint.in_dll(lib, "emu_num_attrs").value
    attr_raw = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "emu_attrs")), 72 * nattr)
    attrs = [(int.from_bytes(attr_raw[72 * i:72 * i + 4], "little"), attr_raw[72 * i + 8:72 * i + 72]) for i in range(nattr)]
    raw = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "emu_param_bytes")), sum(p[1] for p in params))
    blobs, off = [], 0
    for _, size, _, _ in params:
        blobs.append(raw[off:off + size])
        off += size
    cluster = _Dim3.in_dll(lib, "emu_cluster")  # as the stand-ins' launch check settled it (attribute or compile time)
    return {"grid": (grid.x, grid.y, grid.z), "block": (block.x, block.y, block.z),
            "cluster": (cluster.x, cluster.y, cluster.z),
            "dynamic_smem": ctypes.c_size_t.in_dll(lib, "emu_dynamic_smem").value, "attrs": attrs, "blobs": blobs}


def recorded_launch(lib, kernel_name: str, params: list, status: int, what: str, printed: str = "") -> dict:
    """What the stand-ins saw after the host code ran once: exactly one launch of the PTX's .entry. A launch the
    B200 would refuse, or host output with a DSL "Error:" line, raises LaunchError."""
    log = read_log(lib)
    err, refusal = _c_string(lib, "emu_error"), _c_string(lib, "emu_refusal")
    if refusal:
        raise LaunchError(f"a B200 refuses this launch: {refusal} ({what} returned {status}; runtime calls: {log})")
    if dsl_errors(printed):
        raise LaunchError(f"the DSL's host code reported an error at launch: {' | '.join(dsl_errors(printed))}")
    if status != 0:
        raise RuntimeError(f"{what} returned {status}: {err or '(no error message)'}; runtime calls: {log}")
    launches = ctypes.c_int.in_dll(lib, "emu_launches").value
    if launches != 1:
        raise RuntimeError(f"expected one cudaLaunchKernelEx, saw {launches}; runtime calls: {log}")
    lib_data = ctypes.c_void_p.in_dll(lib, "emu_library_data").value
    cubin = ctypes.string_at(lib_data, image_size(lib_data)) if lib_data else b""
    recorded_name = _c_string(lib, "emu_kernel_name")
    if recorded_name != kernel_name:
        raise RuntimeError(f"launched kernel {recorded_name!r} is not the PTX's .entry {kernel_name!r}")
    return {"kernel_name": recorded_name, "params": params, "cubin": cubin, "log": log, **_launch_fields(lib, params),
            **lib.resources}


# ----------------------------------------------------------------------------- every launch, as it is made
@dataclass
class KernelCode:
    """A kernel as the emulator runs it: its PTX (a module reduced to this one .entry: emu.ptx.select_entry), the
    module image the host code registered (a fatbinary or cubin: emu.timing.sass disassembles it), the resources its
    cubin asks for, and what built it."""

    ptx: str
    image: bytes
    registers: int | None
    static_smem: int | None
    built_by: str


class _KernelEntry(ctypes.Structure):  # launch_stubs.c emu_kernel_entry
    _fields_ = [("handle", ctypes.c_void_p), ("name", ctypes.c_char * 1024), ("image", ctypes.c_void_p),
                ("module_path", ctypes.c_char * 1024), ("max_dynamic_smem_attr", ctypes.c_int),
                ("nonportable_cluster_attr", ctypes.c_int)]


class _Alloc(ctypes.Structure):  # launch_stubs.c emu_alloc
    _fields_ = [("base", ctypes.c_void_p), ("size", ctypes.c_size_t)]


RESOLVE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)
ON_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
ENCODE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p,
                          ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint),
                          ctypes.POINTER(ctypes.c_uint), ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int)


class StandIns:
    """A loaded stand-in library whose launches run as they are made.

    find_code(name, image, module_path) -> KernelCode for a kernel the host code registered (image: the module image's
    bytes; module_path: the shared object whose host code registered it). sink(CapturedLaunch) takes each launch
    once its checks passed; what it raises is kept (`errors`) and the launch returns cudaErrorUnknown to the host
    code. Every tensor map cuTensorMapEncodeTiled refused by the driver's documented rules is in `refusals`, every
    one the emulator cannot encode (a B200 would) in `limits`."""

    def __init__(self, lib, find_code, sink):
        self.lib, self.find_code, self.sink = lib, find_code, sink
        self.codes: dict[int, KernelCode] = {}
        self.errors: list[str] = []
        self.refusals: list[str] = []
        self.limits: list[str] = []
        self.launches = 0
        prime_device(lib)
        lib.emu_reset()
        # the callbacks must outlive every call into the library
        self._callbacks = (RESOLVE(self._resolve), ON_LAUNCH(self._on_launch), ENCODE(self._encode))
        for name, cb in zip(("emu_resolve", "emu_on_launch", "emu_encode_tiled"), self._callbacks):
            ctypes.c_void_p.in_dll(lib, name).value = ctypes.cast(cb, ctypes.c_void_p).value

    def kernel(self, index: int) -> _KernelEntry:
        return (_KernelEntry * 512).in_dll(self.lib, "emu_kernels")[index]

    def code(self, index: int) -> KernelCode:
        code = self.codes.get(index)
        if code is None:
            entry = self.kernel(index)
            image = ctypes.string_at(entry.image, image_size(entry.image)) if entry.image else b""
            code = self.codes[index] = self.find_code(entry.name.decode(), image, entry.module_path.decode())
        return code

    def allocations(self) -> list[tuple[int, int]]:
        """(base, bytes) of every cudaMalloc the host code made and did not free."""
        n = ctypes.c_int.in_dll(self.lib, "emu_num_allocs").value
        allocs = (_Alloc * 4096).in_dll(self.lib, "emu_allocs")
        return [(allocs[i].base, allocs[i].size) for i in range(n)]

    def last_refusal(self) -> str:
        return _c_string(self.lib, "emu_refusal")

    def _fail(self, code: int, why: str) -> int:
        self.errors.append(why)
        return code

    def _resolve(self, index: int) -> int:
        try:
            code = self.code(index)
            prime_kernel(self.lib, code.ptx, {"registers": code.registers, "static_smem": code.static_smem})
            return 0
        except Exception as e:  # noqa: BLE001 (a callback must not raise through C: the host code sees an error)
            return self._fail(CUDA_ERROR_INVALID_DEVICE_FUNCTION,
                              f"kernel {self.kernel(index).name.decode()}: {type(e).__name__}: {e}")

    def _on_launch(self, index: int, _args) -> int:
        try:
            code = self.code(index)
            name, params = entry_params(code.ptx)
            rec = _launch_fields(self.lib, params)
            self.launches += 1
            self.sink(CapturedLaunch(
                ptx=code.ptx, kernel_name=name, grid=rec["grid"], block=rec["block"], cluster=rec["cluster"],
                dynamic_smem=rec["dynamic_smem"], params=rec["blobs"], dsl_version=code.built_by,
                param_names=[p[0] for p in params], param_decls=[p[3] for p in params], cubin=code.image,
                launch_attrs=rec["attrs"], runtime_log=read_log(self.lib), registers=code.registers,
                static_smem=code.static_smem))
            return 0
        except Exception as e:  # noqa: BLE001
            return self._fail(CUDA_ERROR_UNKNOWN, f"launch {self.launches}: {type(e).__name__}: {e}")

    def _encode(self, tmap, dtype, rank, address, dims, strides, box, elem_strides, interleave, swizzle, l2, oob) -> int:
        try:
            rank = int(rank)
            rc, raw, why = driver_encode_tiled(dtype, rank, address or 0, dims[:rank], strides[:max(rank - 1, 0)],
                                               box[:rank], elem_strides[:rank], interleave, swizzle, l2, oob,
                                               map_address=tmap or 0)
            if rc == CUDA_ERROR_INVALID_VALUE:
                self.refusals.append(f"cuTensorMapEncodeTiled returned CUDA_ERROR_INVALID_VALUE (\"invalid argument\") "
                                     f"for a tensor map of {address or 0:#x}: {why}")
            elif rc:
                self.limits.append(f"cuTensorMapEncodeTiled for a tensor map of {address or 0:#x}: {why}")
            else:
                ctypes.memmove(tmap, raw, len(raw))
            return rc
        except Exception as e:  # noqa: BLE001
            return self._fail(CUDA_ERROR_UNKNOWN, f"cuTensorMapEncodeTiled: {type(e).__name__}: {e}")


def code_from_image(ptx: str, name: str, image: bytes, built_by: str) -> KernelCode:
    """KernelCode of kernel `name`: its one-entry PTX (the caller's), the module image, the resources its cubin in the
    image asks for (registers; static shared memory as the driver charges it: emu.ptx.static_shared_bytes)."""
    from emu.cubin import cubin_resources

    elf = kernel_cubin(image, name)
    registers = cubin_resources(elf, name)["registers"] if elf else None
    return KernelCode(ptx, image, registers, static_shared_bytes(ptx), built_by)
