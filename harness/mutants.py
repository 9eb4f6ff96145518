"""Planted single-line bugs in copies of submission.py: the emulator must report every one.

Each mutant names the exact line it changes (it must occur exactly once in submission.py, so a
refactor that moves the line makes the mutant fail loudly instead of silently testing nothing), the
config and shape that exercise it, and the failure it must produce (`expect`: its status, its hazard's rule or its
Note's rule, as harness.verdict reports them; each established by running it). `family` groups them by what in the
emulator catches them: "pipeline" (the first 15: deterministic pipeline accounting and data paths), "launch" (the
B200's launch limits), "lint" (the kernel-wide static pass), "init" (happens-before of mbarrier initialisation),
"schedule" (races only large schedule skews expose), "wrap" (bugs only a wrapping ring or accumulator shows),
"ordering" (tcgen05 order the ISA gives only through a wait or a fence). GEMM_MUTANTS plant bugs in the paths of the
single GEMM (KernelConfig.problem nvfp4_gemm) and run it as that problem; catch_table runs both sets.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    kind: str  # what class of bug it stands for
    old: str
    new: str
    config: str
    shape: tuple
    sm_count: int | None = None
    # The failure the bug must produce (shows()): each form a status ("mismatch", "deadlock"), "STATUS:WORDS" (that
    # status with WORDS in its message: a hazard's rule, the launch limit a B200 refuses) or "note:RULE" (C matches,
    # with a Note under RULE: emu.state.Note); more than one where schedules differ in which failure they see.
    expect: tuple = ()
    family: str = "pipeline"
    missed_because: str = ""  # a bug the emulator is known not to report (why): tested as a strict xfail
    also: tuple = ()  # further (old, new) edits of the same bug, each line also occurring exactly once
    problem: str = "nvfp4_dual_gemm"  # the leaderboard problem the config runs (harness.problems.get_problem)

    def caught(self, result) -> bool:
        """Reported with a failure the mutant states (a model violation that hardware-verified kernels survive is a
        Note, not a failure: the planted bug still shows, under its rule). `result`: an harness.verdict.EmulationResult
        or one schedule's harness.verdict.ScheduleRun."""
        return any(shows(result, form) for form in self.expect)

    def source(self, text: str) -> str:
        for old, new in ((self.old, self.new), *self.also):
            count = text.count(old)
            if count != 1:
                raise ValueError(f"mutant {self.name}: the line to change occurs {count} times in submission.py "
                                 f"(expected once): {old.strip()!r}")
            text = text.replace(old, new)
        return text

    def write(self, directory: Path, text: str | None = None) -> Path:
        text = (REPO / "submission.py").read_text() if text is None else text
        path = Path(directory) / f"submission_{self.name}.py"
        path.write_text(self.source(text))
        return path


def shows(result, form: str) -> bool:
    """Whether a verdict (or one schedule's run) shows the failure `form` of Mutant.expect."""
    status, _, detail = form.partition(":")
    if status == "note":
        return result.status == "match" and any(n.rule == detail for n in result.notes)
    return result.status == status and detail in result.message


FAILURES = ("mismatch", "deadlock", "hazard", "launch", "note")  # the statuses a form may name (note: a Note's rule)
C1 = "m128n64_c1x1_e32"
C2 = "m256n64_c2x1_e32"
C2_128 = "m256n128_c2x1_e32"
C_AC = "m128n64_c1x1_e32_ac"
C2_AC = "m256n64_c2x1_e32_ac"
C_TAIL = "m256n64_c2x1_e32_ac_t2"
C_SPLIT = "m256n128_c2x1_e16_sk2"
C_RS = "m256n128_c2x1_e16_sk2_rs"
C_RS3 = "m256n128_c2x1_e16_sk3_rs"
C_PAIR = "m128n128_c1x1_e32_ppc"
C2_AC_EARLY = "m256n64_c2x1_e32_ac_pe4"
C2_128_EP = "m256n128_c2x1_e16_ep"
# The failures (Mutant.expect) more than one mutant produces
MISMATCH, DEADLOCK = ("mismatch",), ("deadlock",)
MMA_THEN_CP = ("note:tcgen05-mma-then-cp-unordered",)  # emu.ordering: the rule each ordering mutant trips
FENCE_AFTER = ("note:tcgen05-fence-after-thread-sync-missing",)
# pipelined epilogue, one accumulator stage: the MMA warp reuses it at once
FENCE_BEFORE = ("note:tcgen05-fence-before-thread-sync-missing",)
INIT_UNPUBLISHED, USED_BEFORE_INIT = ("note:mbarrier-init-unpublished",), ("note:mbarrier-used-before-init",)
LD_THEN_MMA = ("hazard:[tcgen05-ld-then-mma-unordered]",)  # an MMA overwrites an accumulator a tcgen05.ld still reads
# a tcgen05.ld reads an accumulator before the MMA that writes it is observed
MMA_THEN_LD = ("hazard:[tcgen05-mma-then-ld-unordered]",)
D_UNWRITTEN = ("hazard:that hold no data (enable-input-d true on unwritten D)",)  # accumulating into unwritten columns
SCALES_UNWRITTEN = ("hazard:SFA: reads tensor memory columns",)  # an MMA reads scale columns nothing wrote
BEFORE_PDL_WAIT = ("hazard:global memory accessed before griddepcontrol.wait",)
COLLECTOR_EMPTY = ("hazard:the A collector is empty",)
EXTRA_ARRIVAL = ("hazard:more arrivals than pending in this phase",)  # an mbarrier arrived on more often than it counts

# KernelConfig.epi_pipeline: per subtile, tcgen05.wait::ld, then the next subtile's loads or, after the last one,
# the stage's release
EP_STEP = ("            cute.arch.fence_view_async_tmem_load()\n"
           "            if subtile + 1 < subtiles:\n"
           "                load(subtile + 1)\n"
           "            else:\n"
           "                tcgen05_fence_before_thread_sync()  # this stage's loads (complete: wait::ld above) before the "
           "release\n"
           "                acc_pipeline.consumer_release(acc_consumer_state)\n")


MUTANTS = (
    Mutant("expect_tx_short", "wrong expect-tx bytes",
           "tx_count=self.num_tma_load_bytes,", "tx_count=self.num_tma_load_bytes - 512,", C1, (128, 256, 512, 1),
           expect=DEADLOCK),
    Mutant("expect_tx_long", "wrong expect-tx bytes",
           "tx_count=self.num_tma_load_bytes,", "tx_count=self.num_tma_load_bytes + 16,", C2, (256, 256, 512, 1),
           expect=DEADLOCK),
    Mutant("missing_release", "missing consumer release",
           "\n                        ab_pipeline.consumer_release(ab_consumer_state)\n",
           "\n                        pass\n", C1, (128, 256, 512, 1), expect=DEADLOCK),
    Mutant("double_release", "doubled consumer release",
           "\n                        ab_pipeline.consumer_release(ab_consumer_state)\n",
           "\n                        ab_pipeline.consumer_release(ab_consumer_state)\n"
           "                        ab_pipeline.consumer_release(ab_consumer_state)\n", C1, (128, 256, 1536, 1),
           expect=DEADLOCK),
    Mutant("swap_b", "B1/B2 swapped",
           "products = ((tCtAcc1, tCrB1), (tCtAcc2, tCrB2))",
           "products = ((tCtAcc1, tCrB2), (tCtAcc2, tCrB1))", C1, (128, 256, 512, 1), expect=MISMATCH),
    Mutant("swap_sfb", "SFB1/SFB2 swapped",
           "return tCtSFA, tuple(view(col + sfb_shift, scales.sfb_layout) for col in sfb_cols)",
           "return tCtSFA, tuple(view(col + sfb_shift, scales.sfb_layout) for col in sfb_cols[::-1])", C2, (256, 256, 512, 1),
           expect=MISMATCH),
    Mutant("sfb_half_shift", "64-wide-N scale shift wrong",
           "shift = cutlass.Int32((tile_n % 2) * 2)", "shift = cutlass.Int32(((tile_n + 1) % 2) * 2)", C1, (128, 256, 512, 1),
           expect=MISMATCH),
    Mutant("stage_off_by_one", "stage index off by one",
           "load.smem[(None, producer_state.index)],",
           "load.smem[(None, (producer_state.index + 1) % load.smem.shape[1])],", C1, (128, 256, 512, 1),
           expect=SCALES_UNWRITTEN),
    # The peer's TMA then signals mbarriers whose init nothing published to it: arseni_ivanov's B200-verified kernel
    # does the same and survives (issue 17), so it is reported as a Note, not a hazard.
    Mutant("missing_cluster_sync", "missing fence/cluster synchronisation after mbarrier init",
           "        pipeline_init_wait(cluster_shape_mn=self.launch_cluster_mn)\n", "", C2, (256, 256, 512, 1),
           expect=INIT_UNPUBLISHED + USED_BEFORE_INIT),
    Mutant("acc_phase", "accumulator stage phase wrong",
           "acc_consumer_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.num_acc_stage)",
           "acc_consumer_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.num_acc_stage)",
           C1, (128, 256, 512, 1), expect=LD_THEN_MMA),
    Mutant("peer_c_coords", "wrong C coordinates for the peer CTA of a pair",
           "tCgC = thr_mma.partition_C(gC_mnl)", "tCgC = tiled_mma.get_slice(0).partition_C(gC_mnl)", C2_128,
           (256, 256, 512, 1), expect=MISMATCH),
    Mutant("pdl_no_wait_before_loads", "global memory touched before griddepcontrol.wait under PDL",
           "                griddepcontrol_wait()  # the previous kernel's writes are complete and visible\n",
           "                pass\n", C1, (128, 256, 512, 1), expect=BEFORE_PDL_WAIT),
    # pdl_early_k_tiles: the config is judged in the leaderboard's stream, where reading inputs early is legal; storing
    # C before the wait is not (the previous call writes C)
    Mutant("pdl_store_before_wait", "C stored before griddepcontrol.wait under PDL (the early-loads config's stream)",
           "                griddepcontrol_wait()  # no store to C before the previous kernel is done with it\n",
           "                pass\n", C2_AC_EARLY, (256, 128, 512, 1), expect=BEFORE_PDL_WAIT),
    Mutant("collector_not_filled", "A collector used without a fill (collector::a::fill missing)",
           'f"@e {mma}.collector::a::fill [$0], ad, bd1, id, [$5], [$6], p;\\n"',
           'f"@e {mma}.collector::a::discard [$0], ad, bd1, id, [$5], [$6], p;\\n"', C_AC, (128, 256, 512, 1),
           expect=COLLECTOR_EMPTY),
    Mutant("collector_lastuse_first", "A collector: lastuse on the B1 MMA (no fill before it)",
           'f"@e {mma}.collector::a::fill [$0], ad, bd1, id, [$5], [$6], p;\\n"',
           'f"@e {mma}.collector::a::lastuse [$0], ad, bd1, id, [$5], [$6], p;\\n"', C2_AC, (256, 256, 512, 1),
           expect=COLLECTOR_EMPTY),
    Mutant("accumulate_not_reset", "accumulator not cleared between tiles",
           "                tiled_mma.set(tcgen05.Field.ACCUMULATE, False)\n", "", C1, (128, 512, 512, 1), sm_count=2,
           expect=D_UNWRITTEN),
    # ---- launch: limits a B200 enforces when it launches (emu.device B200_LIMITS, the runtime stand-ins)
    Mutant("smem_over_capacity", "shared memory request above the B200's 232448 bytes per block",
           "SMEM_CAPACITY = 232448  #", "SMEM_CAPACITY = 232448 + 16384  #", C1, (128, 256, 512, 1), family="launch",
           expect=("launch:shared memory per block",)),
    Mutant("tmem_oversubscribed", "two co-resident CTAs each holding all 512 tensor-memory columns",
           "SMEM_CAPACITY = 232448  #", "SMEM_CAPACITY = 232448 // 2  #", C1, (256, 512, 512, 1), family="launch",
           expect=("hazard:tensor memory over-subscribed",)),
    Mutant("cluster_over_limit", "cluster of more CTAs than a B200 allows (16 non-portable)",
           "            cluster=(*self.launch_cluster_mn, 1),\n", "            cluster=(*self.launch_cluster_mn, 32),\n",
           C1, (128, 256, 512, 1), family="launch", expect=("launch:cluster of 32 CTAs > 16",)),
    # ---- lint: kernel-wide rules of the PTX ISA (emu.lint)
    Mutant("mixed_cta_group", "tcgen05 instructions of one kernel with different .cta_group",
           '    mma = f"tcgen05.mma.cta_group::{cta_group}.kind::mxf4nvf4.block_scale.scale_vec::4X"\n',
           '    mma = "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X"\n', C2_AC, (256, 256, 512, 1),
           family="lint", expect=("hazard:[cta-group]",)),
    # 64-byte alignment alone can still land every buffer on a 128-byte boundary (legal: arseni's B200-verified kernel
    # has 128-aligned SW128 buffers); a 64-byte field aligned to 128 before sA puts A 64 bytes off (emu.tma.SMEM_ALIGN).
    Mutant("smem_buffers_misaligned", "TMA destinations 64 bytes off the required 128-byte alignment",
           "        align = 1024\n", "        align = 64\n", C1, (128, 256, 512, 1), family="lint",
           also=(("            sA: buffer(AB_DTYPE, self.a_smem_layout_staged.outer)\n",
                  "            pad: cute.struct.Align[cute.struct.MemRange[cutlass.Int8, 64], 128]\n"
                  "            sA: buffer(AB_DTYPE, self.a_smem_layout_staged.outer)\n"),),
           expect=("hazard:is not 128-byte aligned",)),
    # ---- init: the mbarrier initialisation ordered before every use (emu.mbarrier, inside a CTA). arseni_ivanov's
    # B200-verified kernel never synchronises its inits either (issue 17), so the unordered use is a Note under its rule.
    Mutant("init_not_ordered_1cta", "no synchronisation between mbarrier init and its first use (1 CTA)",
           "        pipeline_init_wait(cluster_shape_mn=self.launch_cluster_mn)\n", "", C1, (128, 256, 512, 1), family="init",
           expect=USED_BEFORE_INIT),
    Mutant("tmem_dealloc_barrier_uninit", "the pair's dealloc mbarrier never initialised (the kernel owns it)",
           "                cute.arch.mbarrier_init(dealloc_mbar, cute.arch.WARP_SIZE)\n", "                pass\n", C2,
           (256, 256, 512, 1), family="init", expect=DEADLOCK + USED_BEFORE_INIT),
    # ---- schedule: races that need a large skew between roles (emu.machine.POLICIES)
    Mutant("acc_no_producer_acquire", "MMA overwrites an accumulator stage the epilogue may still read",
           "                    acc_pipeline.producer_acquire(acc_producer_state)\n", "                    pass\n",
           C1, (128, 512, 512, 1), family="schedule", expect=LD_THEN_MMA),
    Mutant("ab_refill_without_acquire", "TMA refills ring stages without waiting for the MMA to free them",
           "                        peek_empty = ab_pipeline.producer_try_acquire(ab_producer_state)\n",
           "                        pass\n", C1, (128, 256, 2048, 1), expect=EXTRA_ARRIVAL),
    Mutant("acc_empty_count_half", "accumulator-empty barrier counts one CTA's epilogue threads in a pair",
           "CooperativeGroup(\n                pipeline.Agent.Thread, 32 * len(self.EPILOGUE_WARPS) * (2 if use_2cta else 1)\n",
           "CooperativeGroup(\n                pipeline.Agent.Thread, 32 * len(self.EPILOGUE_WARPS)\n", C2, (256, 512, 512, 1),
           # the MMA warp reuses the stage while the peer's epilogue reads it, or (3 of 10 schedules) waits forever
           family="schedule", expect=LD_THEN_MMA + DEADLOCK),
    Mutant("tmem_freed_while_read", "tensor memory freed while other epilogue warps still read it",
           "            self.epilogue_barrier.arrive_and_wait()\n", "", C1, (128, 256, 512, 1), family="schedule",
           # emu.ordering names the free at every schedule (the freed columns' poison once showed in one in four)
           expect=("note:tcgen05-dealloc-while-read",)),
    # the pair's tensor-memory deallocation (DualGemmKernel._tmem_free): each allocator warp waits for its peer's arrival
    Mutant("tmem_pair_dealloc_no_wait", "a CTA of a pair deallocates tensor memory without waiting for its peer",
           "                cute.arch.mbarrier_wait(dealloc_mbar, 0)\n", "", C2, (256, 256, 512, 1), family="schedule",
           expect=("note:tcgen05-dealloc-while-read",)),
    # ---- wrap: only several tiles per CTA show it (harness.verdict.default_sm_count)
    Mutant("acc_stage_index_fixed", "epilogue reads accumulator stage 0 whatever the stage",
           "tTR_tAcc1 = epi.tAcc[(None, None, None, 0, None, self.accs_per_stage * acc_consumer_state.index)]",
           "tTR_tAcc1 = epi.tAcc[(None, None, None, 0, None, 0)]", C1, (128, 512, 512, 1), family="wrap",
           # stage 0 overwritten while read, or read before its MMA (5 of 10 schedules): the race goes either way
           expect=LD_THEN_MMA + MMA_THEN_LD),
    # the tail (tail_k_tiles): acc1's own barrier, the held stages, acc2's first MMA when the tail is all of K
    Mutant("tail_acc1_not_awaited", "tail: acc1 read before its barrier",
           "                    acc1_pipeline.consumer_wait(acc_consumer_state)  # the tail hands acc1 over before acc2\n",
           "                    pass\n", C_TAIL, (256, 128, 1024, 1), expect=LD_THEN_MMA),
    Mutant("tail_b2_pass_wrong_stages", "tail: A@B2 reads the stages after the held ones",
           "self._tail_k_tile(tiled_mma, scales, scale_state, tail_start.index,",
           "self._tail_k_tile(tiled_mma, scales, scale_state, ab_consumer_state.index,", C_TAIL, (256, 256, 1024, 1),
           sm_count=2, expect=MISMATCH),
    Mutant("tail_acc2_not_cleared", "tail: A@B2 not cleared when the tail is all of K",
           "                    tiled_mma.set(tcgen05.Field.ACCUMULATE, both_k_tiles > 0)\n", "", C_TAIL,
           (256, 128, 512, 1), expect=D_UNWRITTEN),
    # the exchange through distributed shared memory (split_k, product_per_cta)
    Mutant("exchange_read_before_full", "exchange: slot read before its full barrier",
           "        cute.arch.mbarrier_wait(xring.full + slots.index, slots.phase ^ 1)\n", "        pass\n", C_PAIR,
           (128, 128, 512, 1), expect=DEADLOCK),
    Mutant("exchange_slot_not_freed", "exchange: receiver never frees a slot",
           "        cute.arch.mbarrier_arrive(self._exchange_empty(xring, slots, receiver), sender_rank)\n", "        pass\n", C_PAIR,
           (128, 128, 512, 1), expect=DEADLOCK),
    Mutant("exchange_expect_tx_short", "exchange: expect-tx bytes short",
           "len(fragments) * self.epi_tile_n * 4, dst_rank)", "len(fragments) * self.epi_tile_n * 4 - 16, dst_rank)",
           C_SPLIT, (256, 128, 512, 1), expect=MISMATCH),
    # split_k: the reduction and the K slices
    Mutant("split_k_partial_dropped", "split-K: a slice's partial sums not added",
           "                for sender in cutlass.range_constexpr(1, self.config.split_k):\n"
           "                    for a in cutlass.range_constexpr(products):\n",
           "                for sender in cutlass.range_constexpr(2, self.config.split_k):\n"
           "                    for a in cutlass.range_constexpr(products):\n", C_SPLIT, (256, 128, 512, 1),
           expect=MISMATCH),
    Mutant("split_k_slices_overlap", "split-K: K slices overlap",
           "            k_tile_cnt = (part + 1) * k_tile_cnt // self.config.split_k - k_first\n",
           "            k_tile_cnt = k_tile_cnt - k_first\n", C_SPLIT, (256, 128, 512, 1), expect=MISMATCH),
    # split_k with reduce_scatter: who owns which subtile, the partials added, the per-receiver empty barriers, the
    # null sends of an uneven last round, the drain of every slice
    Mutant("rs_partial_dropped", "reduce-scatter: the owner adds one partial fewer",
           "        for q in cutlass.range_constexpr(self.config.split_k - 1):\n            for a in",
           "        for q in cutlass.range_constexpr(self.config.split_k - 2):\n            for a in", C_RS,
           (256, 128, 512, 1), expect=MISMATCH),
    Mutant("rs_wrong_own_subtile", "reduce-scatter: a slice reduces and stores a subtile it does not own",
           "            subtile = rnd * split + part\n", "            subtile = rnd * split + (part + 1) % split\n",
           C_RS, (256, 128, 512, 1), expect=MISMATCH),
    Mutant("rs_senders_collide", "reduce-scatter: two senders write the same fragment set of the owner's slot",
           "self._exchange_send(xring, sends, accs, products * (split - 1 - j), first_rank + owner * step,\n",
           "self._exchange_send(xring, sends, accs, 0, first_rank + owner * step,\n", C_RS3, (256, 128, 768, 1),
           expect=MISMATCH),
    Mutant("rs_release_wrong_barrier", "reduce-scatter: an owner frees the sender's barrier of another receiver",
           "(part + q + 1) % split * step, split - 2 - q)", "(part + q + 1) % split * step, q)", C_RS3,
           (256, 128, 768, 1), family="schedule", expect=EXTRA_ARRIVAL),
    Mutant("rs_null_send_missing", "reduce-scatter: no arrival for a subtile that does not exist (uneven last round)",
           "                    self._exchange_send(xring, sends, (), 0, first_rank + owner * step, tidx, j - 1)\n",
           "                        pass\n", C_RS3, (256, 128, 768, 1), expect=DEADLOCK),
    Mutant("rs_not_drained", "reduce-scatter: a slice exits before its receivers have freed its slots",
           "            if cutlass.const_expr(self.exchange[\"bytes\"]):\n"
           "                self._exchange_drain(xring, exchange_state, part)\n",
           "            if cutlass.const_expr(self.exchange[\"bytes\"] and not self.config.reduce_scatter):\n"
           "                self._exchange_drain(xring, exchange_state, part)\n", C_RS, (256, 128, 512, 1),
           # the hazard needs a slice to exit before its receiver's last free: 2 of 6 schedules
           family="schedule", expect=("hazard:after that CTA exited",)),
    # silu_ex2_poly: the packed 2^t of a pair takes the first element's exponent for both (a copy-paste slip)
    Mutant("px_pair_exponent_swapped", "FMA-pipe exp2: the pair's second element gets the first one's exponent",
           '"add.s32 ep0, ep0, er0;\\nadd.s32 ep1, ep1, er1;\\n"',
           '"add.s32 ep0, ep0, er0;\\nadd.s32 ep1, ep1, er0;\\n"', "m256n64_c2x1_e32_ac_px2", (256, 128, 512, 1),
           expect=MISMATCH),
    # product_per_cta: which half goes to the peer, which product each CTA loads
    Mutant("pair_sends_own_half", "product pair: a CTA sends the half it stores itself",
           "tTR_tAcc[(None, None, None, (1 - part) * half + i)], other)",
           "tTR_tAcc[(None, None, None, part * half + i)], other)", C_PAIR, (128, 128, 512, 1), expect=MISMATCH),
    Mutant("pair_products_swapped", "product pair: each CTA loads the other product's B",
           "                            if part == load.product:\n                                self._tma_copy(",
           "                            if part != load.product:\n                                self._tma_copy(",
           C_PAIR, (128, 128, 512, 1), expect=MISMATCH),
    Mutant("epi_release_before_last_load", "pipelined epilogue: accumulator released before its last load",
           EP_STEP,
           "            if subtile + 2 == subtiles:\n"
           "                tcgen05_fence_before_thread_sync()\n"
           "                acc_pipeline.consumer_release(acc_consumer_state)\n"
           + EP_STEP.replace("                acc_pipeline.consumer_release(acc_consumer_state)\n", "                pass\n"),
           C2_128_EP, (256, 512, 256, 1), sm_count=2, expect=LD_THEN_MMA),
    Mutant("epi_release_before_wait_ld", "pipelined epilogue: the last subtile's tcgen05.wait::ld after the release",
           EP_STEP,
           "            if subtile + 1 < subtiles:\n"
           "                cute.arch.fence_view_async_tmem_load()\n"
           "                load(subtile + 1)\n"
           "            else:\n"
           "                tcgen05_fence_before_thread_sync()\n"
           "                acc_pipeline.consumer_release(acc_consumer_state)\n"
           "                cute.arch.fence_view_async_tmem_load()\n", C2_128_EP, (256, 512, 256, 1), sm_count=2, family="ordering",
           expect=("note:tcgen05-ld-released-before-wait",)),
    # ---- ordering: the tcgen05 order the ISA gives only through a wait or a fence (emu.ordering). These kernels are
    # correct in the emulator's FIFO; the broken order shows as a Note under the rule (hardware-verified kernels have
    # relied on each, so none is a Hazard).
    Mutant("scale_copy_not_awaited", "scale copy overwrites a buffer before the MMAs that read it are complete",
           "        cute.arch.mbarrier_wait(scales.mbar + scale_state.index, scale_state.phase)\n", "", C2_AC,
           (256, 256, 1024, 1), family="ordering", expect=MMA_THEN_CP),
    Mutant("scale_single_buffer", "every k-tile's scales into one tensor-memory buffer",
           "        sfa_col = self.num_acc_tmem_cols + scale_state.index * self.scale_buffer_cols\n",
           "        sfa_col = self.num_acc_tmem_cols\n", C1, (128, 256, 512, 1), family="ordering", expect=MMA_THEN_CP),
    Mutant("scale_commit_missing", "no commit after a k-tile's MMAs: the scale buffer's wait never completes",
           "            tcgen05.commit(scales.mbar + scale_state.index, None, self.cta_group)\n", "            pass\n",
           C1, (128, 256, 1024, 1), family="ordering", expect=DEADLOCK),
    Mutant("epilogue_no_after_fence", "epilogue loads tensor memory after the accumulator-full wait without a fence",
           "                tcgen05_fence_after_thread_sync()  # the MMAs behind that commit come before this thread's "
           "loads\n", "", C1, (128, 256, 512, 1), family="ordering", expect=FENCE_AFTER),
    Mutant("epilogue_no_before_fence", "epilogue releases an accumulator stage without a fence after its loads",
           "                    tcgen05_fence_before_thread_sync()\n"
           "                    acc_pipeline.consumer_release(acc_consumer_state)\n",
           "                    acc_pipeline.consumer_release(acc_consumer_state)\n", C1, (128, 512, 512, 1), family="ordering",
           expect=FENCE_BEFORE),
)


# The single GEMM (nvfp4_gemm): its own load tuple and epilogue, and the K split's reduction with one accumulator.
G1 = "gemm_m128n64_c1x1_e32"
G_SPLIT = "gemm_m128n64_c1x1_e16_sk2"
GEMM_MUTANTS = (
    Mutant("gemm_b_rows_of_m_tile", "single GEMM: B loaded from the M tile's rows (every N tile reads B's first rows)",
           "            TmaLoad(tma_atom_b1, tBsB1, tBgB1, b_mcast_mask, ROWS_OF_N_TILE, b_policy),\n",
           "            TmaLoad(tma_atom_b1, tBsB1, tBgB1, b_mcast_mask, ROWS_OF_M_TILE, b_policy),\n", G1,
           (128, 256, 512, 1), problem="nvfp4_gemm", expect=MISMATCH),
    Mutant("gemm_sfb_rows_of_n_tile", "single GEMM: a 64-wide N tile's scales from the wrong 128-row atom",
           "            TmaLoad(tma_atom_sfb1, tBsSFB1, tBgSFB1, sfb_mcast_mask, ROWS_OF_SFB_TILE, None),\n",
           "            TmaLoad(tma_atom_sfb1, tBsSFB1, tBgSFB1, sfb_mcast_mask, ROWS_OF_N_TILE, None),\n", G1,
           (128, 256, 512, 1), problem="nvfp4_gemm", expect=MISMATCH),
    Mutant("gemm_store_wrong_column", "single GEMM: the epilogue stores every subtile into the tile's first columns",
           "            cute.copy(epi.store, out, tTR_gC[(None, None, None, subtile)])\n",
           "            cute.copy(epi.store, out, tTR_gC[(None, None, None, 0)])\n", G1, (128, 256, 512, 1),
           problem="nvfp4_gemm", expect=MISMATCH),
    Mutant("gemm_split_k_partial_dropped", "single GEMM, split-K: a slice's partial sums not added",
           "                for sender in cutlass.range_constexpr(1, self.config.split_k):\n"
           "                    for a in cutlass.range_constexpr(products):\n",
           "                for sender in cutlass.range_constexpr(2, self.config.split_k):\n"
           "                    for a in cutlass.range_constexpr(products):\n", G_SPLIT, (128, 256, 512, 1),
           problem="nvfp4_gemm", expect=MISMATCH),
    Mutant("gemm_split_k_slices_overlap", "single GEMM, split-K: K slices overlap",
           "            k_tile_cnt = (part + 1) * k_tile_cnt // self.config.split_k - k_first\n",
           "            k_tile_cnt = k_tile_cnt - k_first\n", G_SPLIT, (128, 256, 512, 1), problem="nvfp4_gemm",
           expect=MISMATCH),
    Mutant("gemm_rs_wrong_own_subtile", "single GEMM, reduce-scatter: a slice stores a subtile it does not own",
           "            subtile = rnd * split + part\n", "            subtile = rnd * split + (part + 1) % split\n",
           "gemm_m128n128_c1x1_e16_sk3_rs", (128, 256, 768, 1), problem="nvfp4_gemm", expect=MISMATCH),
)


def beside_the_kernel(mutant: Mutant, directory: Path, sched_seed: int = 7, schedules=None,
                      stop_at_failure: bool = True) -> tuple:
    """(the mutant's verdict, the unmutated submission.py's verdict) at the mutant's shape and SM count, with the same
    inputs, seeds and problem, the kernel over exactly the schedules the mutant's verdict ran (the first one where it
    ran none: a launch refused, a kernel-wide rule broken). The kernel must pass for the mutant's failure to be its
    bug's. `schedules`, `stop_at_failure`: as harness.verdict.emulate's, for the mutant."""
    from .verdict import emulate

    same = dict(config_name=mutant.config, mode="strict", sm_count=mutant.sm_count, sched_seed=sched_seed,
                problem=mutant.problem)
    res = emulate(*mutant.shape, submission=mutant.write(directory), schedules=schedules,
                  stop_at_failure=stop_at_failure, **same)
    ran = tuple(r.schedule for r in res.runs) or 1
    key = (tuple(mutant.shape), ran, tuple(sorted(same.items())))
    if key not in KERNEL_VERDICTS:  # many planted bugs share a config, shape and schedules: the kernel runs once
        KERNEL_VERDICTS[key] = emulate(*mutant.shape, schedules=list(ran) if ran != 1 else 1, **same)
    return res, KERNEL_VERDICTS[key]


# the unmutated kernel's verdicts beside_the_kernel has made in this process, by (shape, schedules, settings):
# submission.py does not change while a process plants bugs in copies of it
KERNEL_VERDICTS = {}


def problems(mutant: Mutant, res, kernel) -> list[str]:
    """What is wrong with a planted bug's verdict `res` beside the kernel's `kernel` (beside_the_kernel): empty when
    the mutant shows a failure it states and the unmutated kernel passes over the same schedules and SM count."""
    out = []
    if not mutant.caught(res):
        out.append(f"{mutant.name} ({mutant.kind}): expected {' or '.join(mutant.expect)}, got {res.status}"
                   f"{' at ' + res.failed_schedule if res.failed_schedule else ''}: {res.message[:300]} "
                   f"(notes: {sorted({n.rule for n in res.notes})})")
    if not kernel.passed:
        out.append(f"the unmutated kernel fails beside {mutant.name}: {kernel.summary()}: {kernel.message[:300]}")
    ran = [r.schedule for r in res.runs] or kernel.schedules[:1]
    if [r.schedule for r in kernel.runs] != ran or kernel.launch.get("sm_count") != res.launch.get(
            "sm_count", kernel.launch.get("sm_count")):
        out.append(f"the kernel ran {[r.schedule for r in kernel.runs]} on {kernel.launch.get('sm_count')} SMs, the "
                   f"mutant {ran} on {res.launch.get('sm_count')}")
    return out


def catch_table(schedules: int = 10, names=None, progress=print, jobs: int | None = None) -> list:
    """Run each mutant (or those named) over `schedules` schedules (harness.verdict.schedules_for: the default verdict's
    first) with every schedule run to its end; one row per mutant, `jobs` mutants at once in worker processes (default
    one per CPU: harness.verdict.emulate_in_order), the rows in the table's order."""
    import tempfile

    from .verdict import DEFAULT_SCHEDULES, emulate_in_order

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        planted = [m for m in MUTANTS + GEMM_MUTANTS if not names or m.name in names]
        calls = [{"m": m.shape[0], "n": m.shape[1], "k": m.shape[2], "l": m.shape[3], "config_name": m.config,
                  "submission": m.write(Path(tmp)), "sm_count": m.sm_count, "schedules": schedules,
                  "stop_at_failure": False, "problem": m.problem} for m in planted]
        for m, res in zip(planted, emulate_in_order(calls, jobs)):
            # per schedule: its status, "note" where a match carries a Note the mutant names; launch/compile: before
            # any run
            statuses = ["note" if r.status == "match" and m.caught(r) else r.status for r in res.runs] \
                or [res.status] * schedules
            hits = [m.caught(r) for r in res.runs] or [m.caught(res)] * schedules
            default = statuses[:len(DEFAULT_SCHEDULES)]
            first = next((i for i, hit in enumerate(hits[:len(DEFAULT_SCHEDULES)]) if hit), None)
            row = {"name": m.name, "family": m.family, "kind": m.kind, "config": m.config, "shape": m.shape,
                   "caught": sum(hits), "schedules": len(statuses),
                   "default_verdict": None if first is None else f"{default[first]} " + (
                       f"at {res.schedules[first]}" if res.runs else "before any schedule"),
                   "statuses": statuses, "schedule_names": res.schedules, "message": res.message[:300],
                   "seconds": round(res.seconds, 1)}
            rows.append(row)
            if progress:
                progress(f"{m.name}: {row['caught']}/{row['schedules']} caught, default verdict: "
                         f"{row['default_verdict'] or 'NOT CAUGHT'} ({row['seconds']} s)")
    return rows


def markdown(rows: list) -> str:
    """The catch-rate table (docs/design.md "Mutants")."""
    letter = {"match": ".", "note": "N", "mismatch": "M", "deadlock": "D", "hazard": "H", "launch": "L",
              "compile": "C", "unsupported": "U"}
    out = ["| mutant | family | bug | default verdict | caught over schedules | per schedule |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['name']} | {r['family']} | {r['kind']} | {r['default_verdict'] or 'not caught'} | "
                   f"{r['caught']}/{r['schedules']} | {''.join(letter.get(s, '?') for s in r['statuses'])} |")
    return "\n".join(out)


def main(argv=None) -> int:
    """python -m harness.mutants [--schedules N] [--names a,b] [--jobs N] [--json PATH]: the catch-rate table
    (emulated)."""
    import argparse
    import json

    ap = argparse.ArgumentParser(description="Catch rate of every planted bug over N schedules (emulated).")
    ap.add_argument("--schedules", type=int, default=10)
    ap.add_argument("--names", default=None, help="comma-separated mutant names (default: all)")
    ap.add_argument("--jobs", type=int, default=None, help="mutants at once, a worker process each (default: one per CPU)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows = catch_table(args.schedules, args.names.split(",") if args.names else None, jobs=args.jobs)
    print(markdown(rows))
    print("per schedule: . match, N match with the mutant's note, M mismatch, D deadlock, H hazard, L launch refused; "
          "schedules in order: "
          + ", ".join(rows[0]["schedule_names"]) if rows and rows[0]["schedule_names"] else "")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"label": "emulated", "rows": rows}, indent=1))
    return 0 if all(r["default_verdict"] for r in rows) else 1


if __name__ == "__main__":
    import sys

    sys.exit(main())
