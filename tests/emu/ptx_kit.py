"""Hand-written PTX on the emulator's public entry point, shared by the tests of every folder.

    from tests.emu.ptx_kit import kernel_text, run_ptx, static_pass, wait_loop
    run = run_ptx(kernel_text(body), out_words=32, threads=64)   # emu.run_kernel on a real emu.CapturedLaunch
    run.words, run.machine.notes                                 # the `out` buffer as u32, the machine it ran on
    static_pass(kernel_text(body))                               # emu.lint's verdict on it, "" when it passes

A kernel here is one `.entry k` whose first parameter is `out`, a zero-filled global buffer the test reads back; the
other parameters are given in order (an address or scalar, packed to the size the .entry declares; bytes as they
are; an array, placed in global memory and passed by address; or a function of (gmem, out address) giving one of
those). A run that does not complete raises what the emulator raised (Deadlock, Hazard, Unsupported, ParseError),
with its message, so a test can expect it with pytest.raises.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from emu import CapturedLaunch, GlobalMemory, Schedule, run_kernel
from emu.isa import decode_kernel
from emu.launch import entry_params
from emu.lint import check_kernel
from emu.machine import Deadlock, Machine
from emu.ptx import ParseError, parse_module
from emu.state import EmulatorError, Hazard, Unsupported

HEADER = ".version 8.8\n.target sm_100a\n.address_size 64\n"
SMEM = ".extern .shared .align 1024 .b8 smem[];\n"  # the dynamic shared-memory window, at `smem`
DECLS = ".reg .pred %p<8>;\n.reg .b32 %r<64>;\n.reg .b64 %rd<16>;"
# run_kernel reports an emulator error by status; a test expects the exception (a ParseError, like every error
# besides Unsupported, comes back as "unsupported" with its class name before the message)
RAISED = {"deadlock": Deadlock, "hazard": Hazard}
ERRORS = {cls.__name__: cls for cls in (EmulatorError, ParseError, Unsupported)}


def kernel_text(body: str, params: str = ".param .u64 out", decls: str = DECLS, shared: str | None = None,
                top: str = "", smem: bool = True) -> str:
    """A module of one kernel `k`: the header, `top` (module-level declarations), the dynamic shared-memory window
    `smem` (unless smem=False), then the .entry with `params`, its register declarations, `shared` (function-scope
    declarations, when given) and `body`."""
    return (f"{HEADER}{top}{SMEM if smem else ''}.visible .entry k({params})\n{{\n{decls}\n"
            + (f"{shared}\n" if shared is not None else "") + f"{body}\n}}\n")


def wait_loop(addr: str = "[%r9]", parity: int = 0, hint: int | None = 1000, label: str = "LAB_WAIT",
              done: str = "DONE") -> str:
    """The scoped mbarrier wait loop every CuTe DSL kernel spins in: try_wait (with a suspend-time `hint` unless
    None) on the mbarrier at `addr` for `parity`, until it completes. Labels and predicate are local to the block."""
    hint_text = f", {hint}" if hint is not None else ""
    return (f"    {{\n    .reg .pred P1;\n    {label}:\n"
            f"    mbarrier.try_wait.parity.shared.b64 P1, {addr}, {parity}{hint_text};\n"
            f"    @P1 bra.uni {done};\n    bra.uni {label};\n    {done}:\n    }}\n")


WAIT = wait_loop()  # on the barrier at smem (%r9), phase 0
# %rd1 = out, %r1 = the thread's index, %rd3 = its word of out
STORE_TID = """
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
"""


def param_bytes(value, size: int, gmem: GlobalMemory, out: int) -> bytes:
    """One parameter as launched: bytes as given, an array placed in gmem (its address), a builder called with
    (gmem, out), an integer packed little-endian to the declared size."""
    if callable(value):
        value = value(gmem, out)
    if isinstance(value, np.ndarray):
        value = gmem.alloc_array(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return (int(value) % (1 << (8 * size))).to_bytes(size, "little")


def launch(ptx: str, params: list[bytes] = (), threads: int = 32, grid=(1, 1, 1), cluster=(1, 1, 1),
           dynamic_smem: int = 0, launch_attrs=()) -> CapturedLaunch:
    """The launch record of ptx's kernel (name and parameter declarations from its .entry) with exact parameter
    bytes, `threads` threads per CTA (x only)."""
    name, declared = entry_params(ptx)
    if len(params) != len(declared):
        raise ValueError(f"{len(params)} parameters for the {len(declared)} of .entry {name}")
    return CapturedLaunch(ptx=ptx, kernel_name=name, grid=tuple(grid), block=(threads, 1, 1), cluster=tuple(cluster),
                          dynamic_smem=dynamic_smem, params=list(params), dsl_version="",
                          param_names=[p[0] for p in declared], param_decls=[p[3] for p in declared],
                          launch_attrs=list(launch_attrs))


@dataclass
class Ran:
    """One completed run: the machine, its global memory and the `out` buffer."""

    machine: Machine
    gmem: GlobalMemory
    out: int
    out_words: int

    @property
    def raw(self) -> np.ndarray:
        """The out buffer's bytes."""
        return self.gmem.read(self.out, self.out_words * 4)

    @property
    def words(self) -> np.ndarray:
        """The out buffer as u32 words."""
        return self.raw.view(np.uint32)

    def __iter__(self):
        """`out, machine = run_ptx(...)`."""
        return iter((self.words, self.machine))


def run_ptx(ptx: str, args=(), out_words: int = 64, init=None, threads: int = 32, grid=(1, 1, 1), cluster=(1, 1, 1),
            dynamic_smem: int = 4096, seed: int = 0, schedule: Schedule | None = None) -> Ran:
    """Run ptx's kernel with emu.run_kernel: its first parameter a zero-filled buffer of out_words u32 (`init`, an
    array, written over it first), then `args` (see param_bytes), `threads` threads per CTA and `dynamic_smem` bytes
    of dynamic shared memory, on every cluster of the grid, under `schedule` (default: the uniform policy drawn with
    `seed`). Raises what the emulator raised when the run did not complete."""
    gmem = GlobalMemory()
    out = gmem.alloc(out_words * 4, fill=0)
    if init is not None:
        gmem.write(out, np.asarray(init).view(np.uint8))
    name, declared = entry_params(ptx)
    if len(declared) != len(args) + 1:
        raise ValueError(f"out and {len(args)} more parameters for the {len(declared)} of .entry {name}")
    params = [param_bytes(a, p[1], gmem, out) for a, p in zip((out, *args), declared)]
    run = run_kernel(launch(ptx, params, threads, grid, cluster, dynamic_smem), gmem, sched_seed=seed,
                     schedule=schedule)
    if run.status == "completed":
        return Ran(run.machine, gmem, out, out_words)
    if run.status in RAISED:
        raise RAISED[run.status](run.message)
    name, sep, rest = run.message.partition(": ")
    if sep and name in ERRORS and name != "Unsupported":
        raise ERRORS[name](rest)
    raise Unsupported(run.message)


def static_pass(ptx: str) -> str:
    """What the kernel-wide static pass (emu.lint) says of ptx's kernel before anything runs: the Hazard's message,
    "" when it passes."""
    kernel = parse_module(ptx)
    decode_kernel(kernel)
    try:
        check_kernel(kernel)
    except Hazard as e:
        return str(e)
    return ""
