"""The timed mode of the SM100 emulator: the same PTX, the same launch and the same functional result, plus a clock.

Modules, one concern each:
  b200.yaml   the cost table: every constant with its unit and public source (one auditable table, as Accel-Sim's
              per-GPU config files are)
  costs       loads the table; unit conversions; overrides for fitting
  resources   bandwidth pipes and the per-SM units (issue slots, MUFU, tensor core, TMA engine, ports)
  engine      TimedMachine: a discrete-event scheduler over emu.machine.Machine's warps and asynchronous operations
  sass        what the machine issues: the launch cubin's SASS (nvdisasm / cuobjdump), where it issues a copy once per
              warp that the PTX issues per lane (a whole-warp TMA store), and the hot loops' R2UR / S2UR
  call        one leaderboard call: which clusters to simulate, bandwidth shares, the launch gap, PDL; timed_emulate()
  trace       Chrome trace JSON (Perfetto / chrome://tracing) and a PNG of the phases
Functional semantics stay in emu/*.py; nothing here changes what an instruction computes.
"""
