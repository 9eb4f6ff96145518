"""A CUDA extension built for the emulator the way torch.utils.cpp_extension.load_inline builds it for a GPU.

A leaderboard file written in CUDA hands its sources to load_inline, which writes main.cpp (its C++ sources and the
generated bindings) and cuda.cu, then builds them with nvcc and the host compiler into a module. harness/bridges.py
replaces only that last step, torch's _jit_compile, by build_extension here:
- the flags are torch's own: its _prepare_ldflags and _write_ninja_file_to_build_library are called and the flags they
  would write into build.ninja are taken (the ninja file itself is not written, so ninja is not needed);
- nvcc is the pinned wheel's (nvidia-cuda-nvcc, with nvidia-cuda-cccl's headers), CUDA_HOME its root; every .cu is
  compiled with `--keep`, so the PTX nvcc made on the way to the file's own -gencode target is kept: the emulator runs
  that PTX (it is the same compile as the cubin, flags and all);
- CUDA library headers torch's ATen/cuda headers include (cuBLAS, cuSPARSE, cuSOLVER) come from harness/cuda_shims
  where no real ones are found (their README says what is declared and why);
- the link takes the CUDA runtime and driver from the emulator's stand-ins (harness/host.py cuda_standin_dir:
  every library of CUDA_STANDIN_LIBRARIES names libemu_cuda.so) and leaves out torch's CUDA libraries, which a
  CPU build of torch does not have (-lc10_cuda -ltorch_cuda).
Builds are cached by content (sources, flags, compiler, stand-ins) under harness.host.cache_root()/cuda_ext, so a
second run of the same file imports the module it built before. A symbol the stand-ins do not provide fails at
import: UnsupportedHostCall names it and where the file calls it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .host import cache_root, cuda_standin_dir, stubs_id

SHIMS = Path(__file__).resolve().parent / "cuda_shims"  # library headers torch's ATen/cuda headers include (README)
TORCH_CUDA_LIBRARIES = ("-lc10_cuda", "-ltorch_cuda")  # not in a CPU build of torch: the stand-ins cover what they do


class UnsupportedHostCall(RuntimeError):
    """The file's host code needs something the emulator's host side does not provide (a runtime function, a
    library): `construct` names it, `where` is file:line where the file uses it (or "")."""

    def __init__(self, construct: str, where: str, detail: str = ""):
        self.construct, self.where, self.detail = construct, where, detail
        super().__init__(f"{construct}{f' at {where}' if where else ''}{f': {detail}' if detail else ''}")


# ----------------------------------------------------------------------------- the compiler
def nvcc_path() -> Path:
    """nvcc of the pinned wheel (nvidia-cuda-nvcc), or $NVCC."""
    if os.environ.get("NVCC"):
        return Path(os.environ["NVCC"])
    import nvidia  # the pip wheels' namespace package (cu13)

    for base in nvidia.__path__:
        p = Path(base) / "cu13" / "bin" / "nvcc"
        if p.exists():
            return p
    raise FileNotFoundError("no nvcc: install the CUDA 13 nvcc wheel (nvidia-cuda-nvcc) or set $NVCC")


def include_dirs(nvcc: Path) -> list[Path]:
    """The wheel's include dir (cuda.h, cudaTypedefs.h, cuda_fp16.h) and a CCCL dir holding <nv/target>
    (nvidia-cuda-cccl installs it into the same include dir; a CUDA toolkit's include/cccl otherwise)."""
    import glob

    inc = nvcc.parent.parent / "include"
    dirs = [inc]
    if not (inc / "nv" / "target").exists():
        cands = [inc / "cccl"] + [Path(p) for p in sorted(glob.glob(str(nvcc.parent.parent.parent / "*cccl*" / "include")))]
        cands += [Path(p) for p in sorted(glob.glob("/usr/local/cuda*/include/cccl"))]
        cands += [Path(p) for p in sorted(glob.glob("/usr/local/cuda*/include"))]
        found = next((c for c in cands if (c / "nv" / "target").exists()), None)
        if found is None:
            raise FileNotFoundError("no <nv/target> (CCCL) header found: install nvidia-cuda-cccl or a CUDA toolkit")
        dirs.append(found)
    return dirs


def compiler_missing() -> str:
    """'' when nvcc and its headers are here, else why not (tests skip with it)."""
    try:
        include_dirs(nvcc_path())
    except Exception as e:  # noqa: BLE001 (any reason the compiler is unusable is a reason to skip)
        return f"no CUDA compiler for sm_100a: {e}"
    return ""


def nvcc_version(nvcc: Path) -> str:
    out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release [\d.]+, V([\d.]+)", out)
    return m.group(1) if m else out.strip().splitlines()[-1] if out.strip() else "unknown"


# ----------------------------------------------------------------------------- torch's flags
def torch_flags(name: str, sources: list[str], extra_cflags, extra_cuda_cflags, extra_ldflags, extra_include_paths,
                with_cuda: bool, is_standalone: bool) -> dict:
    """The flags torch.utils.cpp_extension would write into build.ninja for this extension (its own functions, with
    CUDA_HOME the nvcc wheel's root): {"cflags", "cuda_cflags", "ldflags", "objects", "target"}."""
    import torch.utils.cpp_extension as ext

    seen = {}

    def capture(**kw):
        seen.update(kw)

    saved = ext.CUDA_HOME, ext._write_ninja_file
    ext.CUDA_HOME = str(nvcc_path().parent.parent)
    ext._write_ninja_file = capture
    try:
        ldflags = ext._prepare_ldflags(list(extra_ldflags or []), with_cuda, False, False, is_standalone)
        ext._write_ninja_file_to_build_library(
            path="", name=name, sources=sources, extra_cflags=list(extra_cflags or []),
            extra_cuda_cflags=list(extra_cuda_cflags or []), extra_sycl_cflags=[], extra_ldflags=ldflags,
            extra_include_paths=list(extra_include_paths or []), with_cuda=with_cuda, with_sycl=False,
            is_standalone=is_standalone)
    finally:
        ext.CUDA_HOME, ext._write_ninja_file = saved
    return {"cflags": seen["cflags"], "cuda_cflags": seen["cuda_cflags"] or [], "ldflags": seen["ldflags"],
            "objects": seen["objects"], "target": seen["library_target"]}


def emulator_ldflags(ldflags: list[str]) -> list[str]:
    """torch's link flags with the stand-ins in place of the CUDA libraries (module docstring)."""
    home = str(nvcc_path().parent.parent)
    kept = [f for f in ldflags if f not in TORCH_CUDA_LIBRARIES and not (f.startswith("-L") and f[2:].startswith(home))]
    return kept + [f"-L{cuda_standin_dir()}", "-lcudart"]


# ----------------------------------------------------------------------------- the build
@dataclass
class Extension:
    """A built extension: the shared object, the PTX of every .cu (the emulator's code for its kernels), the build
    folder and what was run."""

    name: str
    library: Path
    folder: Path
    ptx: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    compiler: str = ""

    def kernel_ptx(self, kernel_name: str) -> str | None:
        """The PTX module holding `.entry kernel_name`, or None."""
        pattern = re.compile(r"\.entry\s+" + re.escape(kernel_name) + r"\s*\(")
        return next((p for p in self.ptx if pattern.search(p)), None)


def _run(cmd: str, cwd: Path, log: list) -> None:
    p = subprocess.run(cmd, shell=True, cwd=str(cwd), capture_output=True, text=True)
    log.append(f"$ {cmd}\n{p.stdout}{p.stderr}")
    if p.returncode:
        raise BuildError(cmd, p.stdout + p.stderr)


class BuildError(RuntimeError):
    """nvcc or the host compiler failed: `output` is what it printed."""

    def __init__(self, command: str, output: str):
        self.command, self.output = command, output
        super().__init__(f"the extension does not build: {command}\n{output[-4000:]}")


def build_extension(name: str, sources: list[str], extra_cflags=None, extra_cuda_cflags=None, extra_ldflags=None,
                    extra_include_paths=None, with_cuda: bool | None = None, is_standalone: bool = False) -> Extension:
    """Build (or find built) the extension load_inline asked for: `sources` are the files its build folder holds
    (main.cpp, cuda.cu). Raises BuildError where nvcc or the host compiler fails."""
    nvcc = nvcc_path()
    if with_cuda is None:
        with_cuda = any(s.endswith((".cu", ".cuh")) for s in sources)
    contents = [Path(s).read_bytes() for s in sources]
    flags = torch_flags(name, [Path(s).name for s in sources], extra_cflags, extra_cuda_cflags, extra_ldflags,
                        extra_include_paths, with_cuda, is_standalone)
    cxx = os.environ.get("CXX", "c++")
    shims = [hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(SHIMS.glob("*.h"))]
    key = hashlib.sha256(json.dumps([[hashlib.sha256(c).hexdigest() for c in contents], flags, str(nvcc), cxx,
                                     stubs_id(), nvcc_version(nvcc), shims]).encode()).hexdigest()[:20]
    folder = cache_root() / "cuda_ext" / f"{name}-{key}"
    ext = Extension(name, folder / flags["target"], folder, compiler=f"nvcc {nvcc_version(nvcc)}")
    if not (folder / "done.json").exists():
        tmp = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        (tmp / "keep").mkdir(parents=True)
        for src, data in zip(sources, contents):
            (tmp / Path(src).name).write_bytes(data)
        log = []
        # after torch's own include dirs: the CCCL headers where they are apart, then the library-header shims; and
        # c10/cuda's generated configuration header, which a CPU build of torch does not ship, skipped as torch's
        # own ROCm build skips it (c10/cuda/CUDAMacros.h: C10_CUDA_NO_CMAKE_CONFIGURE_FILE)
        cuda_include = " ".join(f"-isystem {shlex.quote(str(d))}" for d in [*include_dirs(nvcc)[1:], SHIMS])
        cuda_include += " -DC10_CUDA_NO_CMAKE_CONFIGURE_FILE"
        for src, obj in zip(sources, flags["objects"]):
            src = Path(src).name
            if src.endswith((".cu", ".cuh")):
                cmd = (f"{shlex.quote(str(nvcc))} {' '.join(flags['cuda_cflags'])} {cuda_include} --keep "
                       f"--keep-dir keep -c {src} -o {obj}")
            else:
                cmd = f"{cxx} {' '.join(flags['cflags'])} {cuda_include} -c {src} -o {obj}"
            _run(cmd, tmp, log)
        _run(f"{cxx} {' '.join(flags['objects'])} {' '.join(emulator_ldflags(flags['ldflags']))} -o {flags['target']}",
             tmp, log)
        (tmp / "build.log").write_text("\n".join(log))
        (tmp / "done.json").write_text(json.dumps({"name": name, "flags": flags, "compiler": ext.compiler}))
        try:
            os.replace(tmp, folder)
        except OSError:  # a concurrent build of the same key finished first: use its copy
            shutil.rmtree(tmp, ignore_errors=True)
    ext.ptx = [p.read_text() for p in sorted((folder / "keep").glob("*.ptx"))]
    ext.commands = [line[2:] for line in (folder / "build.log").read_text().splitlines() if line.startswith("$ ")]
    return ext


def missing_symbol(error: str) -> str | None:
    """The symbol a failed dlopen names ("undefined symbol: X"), demangled where c++filt is here."""
    m = re.search(r"undefined symbol: (\S+)", error)
    if not m:
        return None
    sym = m.group(1)
    if shutil.which("c++filt"):
        sym = subprocess.run(["c++filt", sym], capture_output=True, text=True).stdout.strip() or sym
    return sym
