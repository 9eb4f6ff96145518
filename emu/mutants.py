"""Planted single-line bugs in copies of submission.py: the emulator must report every one.

Each mutant names the exact line it changes (it must occur exactly once in submission.py, so a
refactor that moves the line makes the mutant fail loudly instead of silently testing nothing), the
config and shape that exercise it, and the outcomes that count as caught.
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
    caught_by: tuple = ("mismatch", "deadlock", "hazard")
    missed_because: str = ""  # a bug the emulator is known not to report (why): tested as a strict xfail

    def source(self, text: str) -> str:
        count = text.count(self.old)
        if count != 1:
            raise ValueError(f"mutant {self.name}: the line to change occurs {count} times in submission.py "
                             f"(expected once): {self.old.strip()!r}")
        return text.replace(self.old, self.new)

    def write(self, directory: Path, text: str | None = None) -> Path:
        text = (REPO / "submission.py").read_text() if text is None else text
        path = Path(directory) / f"submission_{self.name}.py"
        path.write_text(self.source(text))
        return path


C1 = "m128n64_c1x1_e32"
C2 = "m256n64_c2x1_e32"
C2_128 = "m256n128_c2x1_e32"
C_AC = "m128n64_c1x1_e32_ac"
C2_AC = "m256n64_c2x1_e32_ac"
C2_128_EP = "m256n128_c2x1_e16_ep"  # pipelined epilogue, one accumulator stage: the MMA warp reuses it at once

# KernelConfig.epi_pipeline: per subtile, tcgen05.wait::ld, then the next subtile's loads or, after the last one,
# the stage's release
EP_STEP = ("            cute.arch.fence_view_async_tmem_load()\n"
           "            if subtile + 1 < subtiles:\n"
           "                load(subtile + 1)\n"
           "            else:\n"
           "                acc_pipeline.consumer_release(acc_consumer_state)\n")


MUTANTS = (
    Mutant("expect_tx_short", "wrong expect-tx bytes",
           "tx_count=self.num_tma_load_bytes,", "tx_count=self.num_tma_load_bytes - 512,", C1, (128, 256, 512, 1)),
    Mutant("expect_tx_long", "wrong expect-tx bytes",
           "tx_count=self.num_tma_load_bytes,", "tx_count=self.num_tma_load_bytes + 16,", C2, (256, 256, 512, 1)),
    Mutant("missing_release", "missing consumer release",
           "                        ab_pipeline.consumer_release(ab_consumer_state)\n",
           "                        pass\n", C1, (128, 256, 512, 1)),
    Mutant("double_release", "doubled consumer release",
           "                        ab_pipeline.consumer_release(ab_consumer_state)\n",
           "                        ab_pipeline.consumer_release(ab_consumer_state)\n"
           "                        ab_pipeline.consumer_release(ab_consumer_state)\n", C1, (128, 256, 1536, 1)),
    Mutant("swap_b", "B1/B2 swapped",
           "for acc, tCrB, tCtSFB in ((tCtAcc1, tCrB1, tCtSFB1_mma), (tCtAcc2, tCrB2, tCtSFB2_mma)):",
           "for acc, tCrB, tCtSFB in ((tCtAcc1, tCrB2, tCtSFB1_mma), (tCtAcc2, tCrB1, tCtSFB2_mma)):", C1, (128, 256, 512, 1)),
    Mutant("swap_sfb", "SFB1/SFB2 swapped",
           "for acc, tCrB, tCtSFB in ((tCtAcc1, tCrB1, tCtSFB1_mma), (tCtAcc2, tCrB2, tCtSFB2_mma)):",
           "for acc, tCrB, tCtSFB in ((tCtAcc1, tCrB1, tCtSFB2_mma), (tCtAcc2, tCrB2, tCtSFB1_mma)):", C2, (256, 256, 512, 1)),
    Mutant("sfb_half_shift", "64-wide-N scale shift wrong",
           "shift = cutlass.Int32((tile_n % 2) * 2)", "shift = cutlass.Int32(((tile_n + 1) % 2) * 2)", C1, (128, 256, 512, 1)),
    Mutant("stage_off_by_one", "stage index off by one",
           "load.smem[(None, ab_producer_state.index)],",
           "load.smem[(None, (ab_producer_state.index + 1) % self.num_ab_stage)],", C1, (128, 256, 512, 1)),
    Mutant("missing_cluster_sync", "missing fence/cluster synchronisation after mbarrier init",
           "        pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mn)\n", "", C2, (256, 256, 512, 1)),
    Mutant("acc_phase", "accumulator stage phase wrong",
           "acc_consumer_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.num_acc_stage)",
           "acc_consumer_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.num_acc_stage)",
           C1, (128, 256, 512, 1)),
    Mutant("peer_c_coords", "wrong C coordinates for the peer CTA of a pair",
           "tCgC = thr_mma.partition_C(gC_mnl)", "tCgC = tiled_mma.get_slice(0).partition_C(gC_mnl)", C2_128,
           (256, 256, 512, 1)),
    Mutant("pdl_no_wait_before_loads", "global memory touched before griddepcontrol.wait under PDL",
           "                cute.arch.griddepcontrol_wait()  # the previous kernel's writes are complete and visible\n",
           "                pass\n", C1, (128, 256, 512, 1)),
    Mutant("collector_not_filled", "A collector used without a fill (collector::a::fill missing)",
           'f"@e {mma}.collector::a::fill [$0], ad, bd1, id, [$5], [$6], p;\\n"',
           'f"@e {mma}.collector::a::discard [$0], ad, bd1, id, [$5], [$6], p;\\n"', C_AC, (128, 256, 512, 1)),
    Mutant("collector_lastuse_first", "A collector: lastuse on the B1 MMA (no fill before it)",
           'f"@e {mma}.collector::a::fill [$0], ad, bd1, id, [$5], [$6], p;\\n"',
           'f"@e {mma}.collector::a::lastuse [$0], ad, bd1, id, [$5], [$6], p;\\n"', C2_AC, (256, 256, 512, 1)),
    Mutant("accumulate_not_reset", "accumulator not cleared between tiles",
           "                tiled_mma.set(tcgen05.Field.ACCUMULATE, False)\n", "", C1, (128, 512, 512, 1), sm_count=2),
    Mutant("epi_release_before_wait_ld", "pipelined epilogue: tcgen05.wait::ld after the accumulator release",
           EP_STEP, EP_STEP.replace("            cute.arch.fence_view_async_tmem_load()\n", "")
           + "            cute.arch.fence_view_async_tmem_load()\n", C2_128_EP, (256, 512, 256, 1), sm_count=2,
           missed_because="the emulator reads tensor memory at the first use of a loaded register, one instruction "
                          "after the early release, so the MMA warp never writes in between (not caught in 9 seeds)"),
    Mutant("epi_release_before_last_load", "pipelined epilogue: accumulator released before its last load",
           EP_STEP,
           "            if subtile + 2 == subtiles:\n"
           "                acc_pipeline.consumer_release(acc_consumer_state)\n"
           + EP_STEP.replace("                acc_pipeline.consumer_release(acc_consumer_state)\n", "                pass\n"),
           C2_128_EP, (256, 512, 256, 1), sm_count=2),
)
