"""A kernel launch as the emulator runs it: the PTX module, the kernel, grid, block, cluster, dynamic shared memory and
the exact bytes of every parameter. Whoever launches (harness.capture from a submission's own host code, the
calibration runners from a public kernel's launch arguments) fills one CapturedLaunch; emu.run_kernel runs it."""
from __future__ import annotations

from dataclasses import dataclass, field

from .ptx import parse_entry


@dataclass
class CapturedLaunch:
    ptx: str                      # PTX text of the module holding the kernel
    kernel_name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    dynamic_smem: int
    params: list[bytes]           # one entry per .param of the kernel, in PTX order, exact bytes as launched
    dsl_version: str
    # extras
    param_names: list[str] = field(default_factory=list)
    param_decls: list[str] = field(default_factory=list)
    cubin: bytes = b""          # the module image handed to cudaLibraryLoadData (a fatbinary holding the cubin)
    launch_attrs: list[tuple[int, bytes]] = field(default_factory=list)
    runtime_log: list[str] = field(default_factory=list)
    artifact_dir: str = ""
    timings: dict = field(default_factory=dict)
    registers: int | None = None  # per thread, from the cubin (None: not known for this capture)
    static_smem: int | None = None  # bytes of static shared memory the driver charges (emu.ptx.static_shared_bytes)


def entry_params(ptx: str) -> tuple[str, list[tuple[str, int, int, str]]]:
    """(name, [(param name, size in bytes, alignment, declaration)]) of the kernel's .entry (emu.ptx's parser)."""
    name, params = parse_entry(ptx)
    return name, [(p.name, p.size, p.align, p.decl) for p in params]
