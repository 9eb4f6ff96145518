"""A functional SM100 (B200) emulator: runs a PTX module's kernel, as compiled for sm_100a, on the CPU.

It knows PTX, the ISA and the B200, and nothing of any problem: it never imports the harness, the calibration, the
package's reference or its kernels. The public entry point:

    from emu import CapturedLaunch, GlobalMemory, run_kernel
    run = run_kernel(launch, gmem, schedule=Schedule("uniform", 0))

Modules, one concern each:
  ptx        the parser: PTX text -> Kernel (and the .func it calls) with decoded instructions
  state      machine state: global memory, CTAs (shared and tensor memory), clusters, errors
  device     the B200's counts, capacities and launch limits (every B200 fact, cited)
  launch     the launch record (CapturedLaunch): grid, block, cluster, shared memory, parameter bytes
  cubin      a cubin's sections and the resources a kernel of it asks for
  execute    run_kernel: the public entry point
  simt       warps: lanes, divergence, typed registers
  isa        the opcode table (decode once, execute per warp)
  ops_alu, ops_control, ops_memory, ops_async   one small function per opcode family (calls and ret: ops_control)
  mbarrier   mbarrier phase / arrival / tx-count semantics, happens-before of their initialisation
  ordering   tcgen05 ordering and proxy fences the ISA requires (notes where hardware-verified kernels rely on more)
  tma        tensor-map decode and tile fetch (swizzle, FP4 packing, multicast)
  tcgen05    tensor memory, descriptors, every MMA kind, tcgen05.cp/ld/st
  mufu       ex2/rcp/tanh .approx values: exact-rounded, or a hardware measurement where one exists
  printf     device printf's text (call vprintf), formatted on the host
  precedents the hardware-verified kernels that verdict notes name (a model violation they survive)
  lint       the kernel-wide static pass over the PTX (cta_group, mbarrier state spaces, alloc pairing, alignment)
  machine    clusters, the seeded scheduler and its policies, the asynchronous engine, deadlock reports
  timing/    the timed emulator: the same run on a clock (engine, resources, cost table b200.yaml, the timed call)
"""
from . import ops_alu, ops_async, ops_control, ops_memory  # noqa: F401  (fill the opcode table)
from .execute import Execution, run_kernel
from .launch import CapturedLaunch
from .machine import Schedule
from .state import GlobalMemory

__all__ = ["CapturedLaunch", "Execution", "GlobalMemory", "Schedule", "run_kernel"]
