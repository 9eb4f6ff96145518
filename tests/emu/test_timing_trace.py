"""The timed emulator's timeline (emu/timing/trace.py): each instruction's kind, and the picture a person reads (a
labelled row per warp role and unit of each CTA, a microsecond axis, a legend of the colours used, the call's
phases, the title), from traces made by hand. The kernel's own timed trace: tests/harness/test_timed.py.
The picture needs matplotlib (the test extra has it); without it the tests of the picture skip, and the error says
how to install it."""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from emu import ptx as ptx_mod  # noqa: E402
from emu.machine import role_of  # noqa: E402
from emu.timing import trace as T  # noqa: E402
from emu.timing.engine import classify  # noqa: E402
from tests.emu.ptx_kit import kernel_text  # noqa: E402

KINDS = list(T.ACTIVITIES)
BODY = [  # (instruction, the kind the picture gives it)
    ("add.s32 %r1, %r2, %r3;", KINDS[0]),
    ("cvt.rn.f16x2.f32 %r1, %f1, %f2;", KINDS[0]),
    ("ex2.approx.ftz.f32 %f1, %f2;", KINDS[1]),
    ("tcgen05.ld.sync.aligned.32x32b.x2.b32 {%r4, %r5}, [%r6];", KINDS[2]),
    ("tcgen05.wait::ld.sync.aligned;", KINDS[2]),
    ("st.global.v4.b32 [%rd1+16], {%r4, %r5, %r6, %r7};", KINDS[3]),
    ("st.shared.b32 [%r1], %r2;", KINDS[3]),
    ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4];",
     KINDS[4]),
    ("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r8];", KINDS[4]),
    ("mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r8], %r1;", KINDS[5]),
    ("fence.proxy.async.shared::cta;", KINDS[5]),
    ("bar.sync 1, 128;", KINDS[5]),
]


def instructions() -> dict:
    """{kind: a parsed instruction of that kind} from BODY, classified as the engine does."""
    text = kernel_text("\n".join(f"    {i}" for i, _ in BODY) + "\n    ret;", ".param .u64 p",
                       "    .reg .b32 %r<9>;\n    .reg .b64 %rd<4>;\n    .reg .f32 %f<4>;\n    .reg .pred %p<3>;",
                       smem=False)
    out = {}
    for ins in ptx_mod.parse_module(text).instrs[:len(BODY)]:
        ins.timing = classify(ins)
        out.setdefault(T.activity(ins), ins)
    return out


def test_each_instruction_has_the_kind_the_picture_gives_it():
    text = kernel_text("\n".join(f"    {i}" for i, _ in BODY), ".param .u64 p",
                       "    .reg .b32 %r<9>;\n    .reg .b64 %rd<4>;\n    .reg .f32 %f<4>;\n    .reg .pred %p<3>;",
                       smem=False)
    parsed = ptx_mod.parse_module(text).instrs
    for ins, (line, kind) in zip(parsed, BODY):
        ins.timing = classify(ins)
        assert T.activity(ins) == kind, line
    assert {kind for _, kind in BODY} == set(KINDS)  # every kind of the legend is reachable


class Warp:  # the engine's warps as the trace sees them: hashed by identity, with an id and a CTA
    def __init__(self, warp_id: int, cta):
        self.warp_id, self.cta = warp_id, cta


def pair_trace() -> T.Trace:
    """A 2-CTA pair as the engine reports one: each CTA's TMA warp (5) issues copies then waits, the MMA warp (4) of
    CTA 0 issues MMAs, the four epilogue warps wait for the accumulator then issue math, MUFU and stores; TMA loads
    and MMAs on the units. Cycles 0-4000."""
    ins = instructions()
    tr = T.Trace(role_of)
    for rank in (0, 1):
        cta = SimpleNamespace(ctaid=(rank, 0, 0), sm=SimpleNamespace(index=rank))
        warp = {w: Warp(w, cta) for w in range(6)}
        for t in range(0, 200, 4):
            tr.busy(warp[5], t, t + 2, ins[KINDS[4]])
        tr.begin_wait(warp[5], 200, "mbarrier empty")
        tr.end_wait(warp[5], 3000)
        tr.unit(cta, "TMA", 100, 2000, "TMA load A")
        tr.unit(cta, "TMA", 150, 2100, "TMA load B")  # overlaps: a second lane
        if rank == 0:
            for t in range(300, 2300, 8):
                tr.busy(warp[4], t, t + 2, ins[KINDS[4]])
            tr.unit(cta, "tensor core", 400, 2400, "tcgen05.mma")
        for w in range(4):
            tr.begin_wait(warp[w], 0, "mbarrier acc full")
            tr.end_wait(warp[w], 2500)
            for i, t in enumerate(range(2500, 4000, 6)):  # every third a MUFU op, stores at the end
                kind = KINDS[1] if i % 3 == 2 else KINDS[3] if t > 3900 else KINDS[0]
                tr.busy(warp[w], t, t + 2, ins[kind])
    return tr


def test_the_picture_has_a_labelled_row_per_role_and_unit_a_legend_and_the_phases(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (optional; in the test extra) draws the picture")
    tr = pair_trace()
    phases = T.phase_bands(0.3, {"to first load": 0.1, "to first MMA": 0.2, "mainloop": 1.0, "tail": 0.5})
    assert phases[0] == ("start", 0.0, 0.3) and phases[-1] == pytest.approx(("tail", 1.6, 2.1))
    fig = tr.figure(1 / 1920, "timed: X, binds: tensor core 50%", phases)
    ax = fig.axes[0]
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert rows == ["CTA (0, 0, 0)  TMA warp 5", "CTA (0, 0, 0)  MMA warp 4", "CTA (0, 0, 0)  epilogue warps 0-3",
                    "CTA (0, 0, 0)  TMA unit: loads in flight", "CTA (0, 0, 0)  tensor core busy (MMA)",
                    "CTA (1, 0, 0)  TMA warp 5", "CTA (1, 0, 0)  epilogue warps 0-3",
                    "CTA (1, 0, 0)  TMA unit: loads in flight", "phases of the call (mean CTA)"]
    assert "μs" in ax.get_xlabel() and ax.get_xlim() == pytest.approx((0, 4000 / 1920))
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [KINDS[0], KINDS[1], KINDS[3], KINDS[4], T.WAITING[0], T.UNITS["TMA"][0],
                      T.UNITS["tensor core"][0]]  # the kinds drawn, none other (no tcgen05.ld, no barrier here)
    bands = [t.get_text() for t in ax.texts]
    assert bands == ["start\n0.30 μs", "to first load\n0.10 μs", "to first MMA\n0.20 μs", "mainloop\n1.00 μs",
                     "tail\n0.50 μs"]
    assert fig._suptitle.get_text() == "timed: X, binds: tensor core 50%"
    tr.png(tmp_path / "t.png", 1 / 1920, "t", phases)
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_role_row_shows_what_its_warps_issue_and_where_they_wait():
    """The epilogue row of CTA 0: grey while its warps wait (before cycle 2500), then the issued kinds stacked by
    share (ALU over MUFU, about two to one), stores at the very end; nothing drawn before the first event."""
    tr = pair_trace()
    bins = 40  # 100 cycles each
    img = tr.role_image("CTA (0, 0, 0) on SM0", "epilogue", bins, 100.0)
    grey, alu, mufu, store = (T.rgba(c) for c in (T.WAITING[1], T.ACTIVITIES[KINDS[0]], T.ACTIVITIES[KINDS[1]],
                                                    T.ACTIVITIES[KINDS[3]]))
    assert all(tuple(img[r, b]) == grey for r in range(img.shape[0]) for b in range(0, 25))
    column = [tuple(px) for px in img[:, 30]]
    assert set(column) == {alu, mufu} and column.index(mufu) > column.index(alu)
    assert 0.6 < column.count(alu) / len(column) < 0.75
    assert store in {tuple(px) for px in img[:, 39]}


def test_a_trace_of_spans_only_draws_them_as_given():
    """tools/profile.py's trace: phases of a profile record as spans (no per-instruction kinds), one row per role."""
    pytest.importorskip("matplotlib", reason="matplotlib (optional; in the test extra) draws the picture")
    tr = T.Trace(role_of=None)
    tr.spans += [("measured CTA 0", "warp 5 (TMA)", 0, 500, "busy", "prologue"),
                 ("measured CTA 0", "warp 5 (TMA)", 500, 900, "wait", "griddepcontrol.wait"),
                 ("measured CTA 0", "warp 4 (MMA)", 900, 3000, "tensor core", "mainloop (MMA issue)"),
                 ("measured CTA 0", "warp 0 (epilogue)", 0, 3500, "busy", "tile 0")]
    ax = tr.figure(1e-3, "measured").axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "measured CTA 0  TMA warp 5", "measured CTA 0  MMA warp 4", "measured CTA 0  epilogue warp 0"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [T.WAITING[0], T.ISSUING[0],
                                                                   T.UNITS["tensor core"][0]]


def test_without_matplotlib_the_picture_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # an import of it raises ImportError
    with pytest.raises(RuntimeError, match=r"needs matplotlib, an optional dependency: pip install matplotlib"):
        pair_trace().figure(1 / 1920)
