"""Integer, logic, float, comparison and conversion instructions (PTX ISA 9.7.1–9.7.4, 9.7.6–9.7.9).

All lane-parallel: one numpy expression per instruction over the executing lanes. Overflow to inf, invalid
operations to NaN and underflow are the IEEE results the ISA specifies: numpy's warnings for them are off while a
machine runs (emu.machine.running).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import mufu
from .isa import family, unsupported
from .mufu import flush_subnormal as _ftz
from .ptx import Imm, Pair, Reg, Vec
from .simt import LOW_BITS, WARP, from_bits, to_bits, type_bits

_INT = {"b8", "b16", "b32", "b64", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64"}
_FLOAT = {"f32", "f64", "f16"}


def _ty(ins, allowed=None):
    ty = ins.parts[-1]
    if allowed is not None and ty not in allowed:
        raise unsupported(ins, f"type .{ty}")
    return ty


def _mods(ins, known):
    extra = set(ins.parts[1:-1]) - set(known)
    if extra:
        raise unsupported(ins, "modifiers " + ", ".join("." + e for e in sorted(extra)))


@family("mov")
class Mov:
    SPECIAL = ("%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%cluster_ctarank",
               "%cluster_nctarank", "%clusterid", "%nclusterid", "%cluster_ctaid", "%cluster_nctaid", "%smid",
               "%nsmid", "%is_explicit_cluster", "%dynamic_smem_size", "%total_smem_size", "%globaltimer",
               "%clock")

    @staticmethod
    def decode(ins):
        ty = _ty(ins, _INT | _FLOAT | {"pred"})
        _mods(ins, ())
        return ty

    @staticmethod
    def execute(ex, w, ins, m):
        ty = ins.info
        dst, src = ins.operands
        if isinstance(dst, Vec):  # mov.b64 {lo, hi}, x: unpack (PTX ISA 9.7.9.2 "mov")
            wide = w.read(src, ty).astype(np.uint64)
            half = type_bits(ty) // len(dst.items)
            for i, item in enumerate(dst.items):
                w.set_bits(item, (wide >> np.uint64(i * half)) & np.uint64((1 << half) - 1), m)
            return
        if isinstance(src, Vec):  # mov.b64 d, {lo, hi}: pack, first element lowest
            half = type_bits(ty) // len(src.items)
            sub = f"b{half}"
            # each part is zero-extended from its `half` bits, so the packed value needs no mask
            acc = w.read_bits(src.items[0], sub)
            for i, item in enumerate(src.items[1:], 1):
                acc |= w.read_bits(item, sub) << np.uint64(i * half)
            w.set_bits(dst, acc, m)
            return
        if isinstance(src, Reg) and src.name.startswith(Mov.SPECIAL):
            w.write(dst, ex.special_register(w, src.name).astype(np.uint64).astype(np.dtype(from_bits(np.zeros(1, np.uint64), ty).dtype)), ty, m)
            return
        if ty == "pred":
            w.write(dst, w.read(src, ty, ex), ty, m)
            return
        w.set_bits(dst, w.read_bits(src, ty, ex), m)  # (what write(read(src)) stores)


def _int_binary(fn, f32_op=None):
    """add/sub/min/max on integers and f16/f64; add/sub on .f32 and .f32x2 go to _F32Op (PTX ISA 9.7.3.3/9.7.3.4)."""

    class Fam:
        @staticmethod
        def decode(ins):
            if f32_op and ins.parts[-1] in ("f32", "f32x2"):
                return _F32Op.decode(ins, f32_op)
            ty = _ty(ins, _INT | _FLOAT)
            mods = [p for p in ins.parts[1:-1]]
            if ty in _FLOAT:
                for p in mods:
                    if p not in ("rn", "ftz", "sat", "approx", "full"):
                        raise unsupported(ins)
                if "sat" in mods:
                    raise unsupported(ins, ".sat")
            elif mods and mods != ["cc"]:
                raise unsupported(ins)
            return ty

        @staticmethod
        def execute(ex, w, ins, m):
            if isinstance(ins.info, _F32Op):
                return ins.info.execute(ex, w, ins, m)
            ty = ins.info
            d, a, b = ins.operands
            if ty in _INT:  # modulo 2^N, the same on the operands' bits (no conversion of operands or result)
                r = fn(w.read_bits(a, ty, ex), w.read_bits(b, ty, ex))
                w.set_bits(d, r if ty[1:] == "64" else r & LOW_BITS[type_bits(ty)], m)
                return
            x, y = w.read(a, ty, ex), w.read(b, ty, ex)
            flush = ty == "f32" and "ftz" in ins.parts
            if flush:
                x, y = _ftz(x), _ftz(y)
            r = _canon_nan(fn(x, y))
            w.write(d, _ftz(r) if flush else r, ty, m)

    return Fam


family("add")(_int_binary(lambda a, b: a + b, "add"))
family("sub")(_int_binary(lambda a, b: a - b, "sub"))


@family("min", "max")
class MinMax:
    """min/max on integers (PTX ISA 9.7.1.10/9.7.1.11) and on floating point (9.7.3.11/9.7.3.12 for .f32/.f64,
    9.7.4.x for .f16):
        max{.ftz}{.NaN}.f32  d, a, b;     max{.ftz}{.NaN}.f32  d, a, b, c;  (three inputs: PTX ISA 8.8, sm_100+)
    The ISA's max_num / min_num: a NaN input gives the other input, NaN only when both are (with .NaN any NaN input
    gives NaN, the canonical one); "+0.0 > -0.0 here", so max(+0, -0) = +0 and min(+0, -0) = -0; three inputs are
    two_inputs(two_inputs(a, b), c); .ftz flushes subnormal inputs and results (f32) to sign-preserving zero.
    .xorsign.abs / .abs are not implemented (no kernel here uses them). numpy's minimum/maximum propagate NaN and
    leave the sign of zero to the argument order, so the floating-point forms are spelled out here."""

    @staticmethod
    def decode(ins):
        ty = _ty(ins, _INT | _FLOAT)
        n_src = len(ins.operands) - 1
        if ty in _FLOAT:
            _mods(ins, ("ftz", "NaN"))
            if n_src not in (2, 3) or (n_src == 3 and ty != "f32"):
                raise unsupported(ins, "two source operands (three only for .f32)")
            return ty, "ftz" in ins.parts and ty == "f32", "NaN" in ins.parts
        _mods(ins, ())
        if n_src != 2:
            raise unsupported(ins, "two source operands")
        return ty, False, False

    @staticmethod
    def execute(ex, w, ins, m):
        ty, ftz, nan = ins.info
        d, *srcs = ins.operands
        xs = [w.read(s, ty, ex) for s in srcs]
        if ty not in _FLOAT:
            fn = np.maximum if ins.base == "max" else np.minimum
            w.write(d, fn(xs[0], xs[1]), ty, m)
            return
        if ftz:
            xs = [_ftz(x) for x in xs]
        r = xs[0]
        for x in xs[1:]:
            r = _float_min_max(ins.base, r, x, nan)
        r = _canon_nan(r)
        w.write(d, _ftz(r) if ftz else r, ty, m)


def _float_min_max(op: str, a: np.ndarray, b: np.ndarray, nan: bool) -> np.ndarray:
    """PTX ISA max_num / min_num (max_nan / min_nan with .NaN) per lane; +0.0 > -0.0."""
    zeros = (a == 0) & (b == 0)
    if op == "max":
        first = (a > b) | (zeros & ~np.signbit(a) & np.signbit(b))
    else:
        first = (a < b) | (zeros & np.signbit(a) & ~np.signbit(b))
    r = np.where(first, a, b)
    r = np.where(np.isnan(b), a, r)  # a NaN input gives the other one (both NaN: NaN)
    if nan:
        r = np.where(np.isnan(a) | np.isnan(b), np.array(np.nan, a.dtype), r)
    return r.astype(a.dtype)


@family("and", "or", "xor")
class Logic:
    @staticmethod
    def decode(ins):
        ty = _ty(ins, _INT | {"pred"})
        _mods(ins, ())
        return ty

    @staticmethod
    def execute(ex, w, ins, m):
        ty = ins.info
        d, a, b = ins.operands
        x, y = w.read(a, ty, ex), w.read(b, ty, ex)
        op = ins.base
        r = x & y if op == "and" else x | y if op == "or" else x ^ y
        w.write(d, r, ty, m)


@family("not")
class Not:
    @staticmethod
    def decode(ins):
        return _ty(ins, _INT | {"pred"})

    @staticmethod
    def execute(ex, w, ins, m):
        d, a = ins.operands
        v = w.read(a, ins.info, ex)
        w.write(d, ~v if v.dtype != bool else ~v, ins.info, m)


@family("neg", "abs")
class Unary:
    @staticmethod
    def decode(ins):
        ty = _ty(ins, {"s16", "s32", "s64", "f32", "f64"})
        _mods(ins, ("ftz",))
        return ty

    @staticmethod
    def execute(ex, w, ins, m):
        d, a = ins.operands
        v = w.read(a, ins.info, ex)
        w.write(d, -v if ins.base == "neg" else np.abs(v), ins.info, m)


def _wide(ty):
    return {"s16": "s32", "u16": "u32", "s32": "s64", "u32": "u64"}[ty]


@family("mul")
class Mul:
    """mul{.lo,.hi,.wide}.{s,u}N (PTX ISA 9.7.1.3), mul{.rn,.ftz}.f{16,64} and mul{.rnd}{.ftz}{.sat}.f32 /
    mul{.rnd}{.ftz}.f32x2 (PTX ISA 9.7.3.5, through _F32Op)."""

    @staticmethod
    def decode(ins):
        if ins.parts[-1] in ("f32", "f32x2"):
            return _F32Op.decode(ins, "mul")
        ty = _ty(ins, _INT | _FLOAT)
        mode = ins.parts[1] if len(ins.parts) == 3 else None
        if ty in _FLOAT:
            _mods(ins, ("rn", "ftz"))
            return ty, "f"
        if mode not in ("lo", "hi", "wide"):
            raise unsupported(ins)
        return ty, mode

    @staticmethod
    def execute(ex, w, ins, m):
        if isinstance(ins.info, _F32Op):
            return ins.info.execute(ex, w, ins, m)
        ty, mode = ins.info
        d, a, b = ins.operands
        x, y = w.read(a, ty, ex), w.read(b, ty, ex)
        if mode == "f":
            w.write(d, _canon_nan(x * y), ty, m)
            return
        bits = type_bits(ty)
        signed = ty[0] == "s"
        if bits <= 32:
            p = x.astype(np.int64) * y.astype(np.int64)
            if mode == "lo":
                w.write(d, p.astype(np.uint64).astype(np.uint32 if bits == 32 else np.uint16).view(x.dtype), ty, m)
            elif mode == "hi":
                w.write(d, (p >> bits).astype(x.dtype), ty, m)
            else:
                w.write(d, p, _wide(ty), m)
            return
        if mode != "lo":
            hi = [((int(u) * int(v)) >> 64) for u, v in zip(x.tolist(), y.tolist())]
            hi = np.array([h & 0xFFFFFFFFFFFFFFFF for h in hi], np.uint64)
            w.write(d, hi.view(x.dtype) if signed else hi, ty, m)
            return
        w.write(d, x.astype(np.uint64) * y.astype(np.uint64), "u64" if not signed else "u64", m)


@family("mad")
class Mad:
    @staticmethod
    def decode(ins):
        ty = _ty(ins, _INT | _FLOAT)
        if ty in _FLOAT:
            _mods(ins, ("rn", "ftz"))
            return ty, "f"
        mode = ins.parts[1]
        if mode not in ("lo", "wide"):
            raise unsupported(ins)
        return ty, mode

    @staticmethod
    def execute(ex, w, ins, m):
        ty, mode = ins.info
        d, a, b, c = ins.operands
        x, y = w.read(a, ty, ex), w.read(b, ty, ex)
        if mode == "f":
            r = _canon_nan((x.astype(np.float64) * y.astype(np.float64) + w.read(c, ty, ex).astype(np.float64)).astype(x.dtype))
            w.write(d, r, ty, m)
        elif mode == "wide":
            wt = _wide(ty)
            w.write(d, x.astype(np.int64) * y.astype(np.int64) + w.read(c, wt, ex).astype(np.int64), wt, m)
        else:
            ub = "u" + ty[1:]
            prod = to_bits(x, ty) * to_bits(y, ty) + w.read_bits(c, ty, ex)
            w.write(d, from_bits(prod & np.uint64((1 << type_bits(ty)) - 1), ub), ub, m)


@family("fma")
class Fma:
    """fma.rnd{.ftz}{.sat}.f32 and fma.rnd{.ftz}.f32x2 (PTX ISA 9.7.3.6), through _F32Op. fma.f64 is not
    implemented (a fused f64 fma needs more than float64 arithmetic; no kernel here uses it)."""

    @staticmethod
    def decode(ins):
        if ins.parts[-1] not in ("f32", "f32x2"):
            raise unsupported(ins, f"type .{ins.parts[-1]}")
        return _F32Op.decode(ins, "fma")

    @staticmethod
    def execute(ex, w, ins, m):
        return ins.info.execute(ex, w, ins, m)


# ------------------------------------------------------------------ f32 and packed f32x2 add, sub, mul, fma
# PTX ISA 9.7.3 "Floating-Point Instructions" (ISA 9.x numbering: 9.7.3.3 add, 9.7.3.4 sub, 9.7.3.5 mul, 9.7.3.6 fma):
#   add{.rnd}{.ftz}{.sat}.f32  d, a, b;      add{.rnd}{.ftz}.f32x2  d, a, b;      (sub and mul likewise)
#   fma.rnd{.ftz}{.sat}.f32    d, a, b, c;   fma.rnd{.ftz}.f32x2    d, a, b, c;   .rnd = { .rn, .rz, .rm, .rp }
# - .rnd: IEEE 754 rounding of the exact result; add/sub/mul default to .rn, fma has no default. fma is fused: the
#   exact a*b+c rounded once.
# - .ftz: subnormal inputs and results flushed to sign-preserving zero (else subnormals are supported, sm_20+).
# - .sat (.f32 only; the .f32x2 syntax has none): the result clamped to [0.0, 1.0], NaN results flushed to +0.0.
# - .f32x2 (PTX ISA 8.6, sm_100+): d, a, b, c are .b64 holding two f32, element 0 in bits 0-31, element 1 in bits
#   32-63; d[i] = a[i] op b[i] (op c[i]) for i = 0, 1, each exactly the .f32 operation. ptxas (CUDA 13.5, sm_100a)
#   compiles each to one FADD2 / FMUL2 / FFMA2 (sub: FADD2 with a negated operand).
# - NaN results: the canonical f32 NaN 0x7FFFFFFF whatever the inputs (seen on an H200 for add/mul.f32,
#   tests/calibration/test_alu.py; the ISA says "an unspecified NaN").
# CuTe DSL 4.8.1 emits add/sub/mul.f32x2 (no modifiers) for TensorSSA arithmetic and {add,sub,mul,fma}.rn.f32x2
# (.rz/.rm/.rp/.ftz on request) from cute.arch.{add,sub,mul,fma}_packed_f32x2.
_RND = ("rn", "rz", "rm", "rp")
_F32 = np.dtype(np.float32)
_F32_MAX = np.float32(np.finfo(np.float32).max)


@dataclass(frozen=True)
class _F32Op:
    """A decoded f32 / f32x2 add, sub, mul or fma: `arith` is the f32 operation on lane vectors, `execute` applies
    it to the instruction's registers (for .f32x2 to each 32-bit half)."""

    op: str  # add, sub, mul, fma
    packed: bool  # .f32x2
    rnd: str
    ftz: bool
    sat: bool

    @staticmethod
    def decode(ins, op: str) -> "_F32Op":
        packed = ins.parts[-1] == "f32x2"
        _mods(ins, _RND + (("ftz",) if packed else ("ftz", "sat")))
        rnds = [p for p in ins.parts[1:-1] if p in _RND]
        if len(rnds) > 1:
            raise unsupported(ins, "more than one rounding modifier")
        if op == "fma" and not rnds:
            raise unsupported(ins, "fma.f32 / fma.f32x2 need a rounding modifier (.rn, .rz, .rm, .rp)")
        if packed and any(isinstance(x, Imm) and x.is_float for x in ins.operands[1:]):
            raise unsupported(ins, "a floating-point immediate operand (the .f32x2 operands are .b64)")
        return _F32Op(op, packed, rnds[0] if rnds else "rn", "ftz" in ins.parts, "sat" in ins.parts)

    def execute(self, ex, w, ins, m):
        d, srcs = ins.operands[0], ins.operands[1:]
        if not self.packed:
            w.write(d, self.arith([w.read(s, "f32", ex) for s in srcs]), "f32", m)
            return
        # both halves at once: a .b64 lane viewed as two f32 is element 0 (bits 0-31), then element 1 (little-endian)
        words = [w.read(s, "b64", ex).view(np.float32) for s in srcs]
        w.write(d, self.arith(words).view(np.uint64), "b64", m)

    def arith(self, xs: list) -> np.ndarray:
        """The f32 result per lane: IEEE 754 binary32 with the rounding mode, then NaN -> canonical, .ftz, .sat."""
        xs = [x if x.dtype is _F32 else np.asarray(x, np.float32) for x in xs]
        if self.ftz:
            xs = [_ftz(x) for x in xs]
        if self.rnd == "rn" and self.op != "fma":  # numpy's float32 arithmetic is IEEE round-to-nearest-even
            a, b = xs
            r = a + b if self.op == "add" else a - b if self.op == "sub" else a * b
        else:
            # The exact result as float64 s plus error e: a product of two f32 is exact in float64 (48 bits),
            # the sum's rounding error comes from TwoSum; _round_f32 rounds s + e once.
            a, b = (x.astype(np.float64) for x in xs[:2])
            if self.op == "mul":
                s, e = a * b, np.zeros(a.shape)
            else:
                if self.op == "fma":
                    a, b = a * b, xs[2].astype(np.float64)
                elif self.op == "sub":
                    b = -b
                s, e = _two_sum(a, b)
            r = _round_f32(s, e, self.rnd)
            if self.rnd == "rm" and self.op != "mul":
                # an exact zero sum of opposite-signed operands is -0 rounding toward -inf, +0 otherwise
                # (IEEE 754-2008 6.3); float64 gave the round-to-nearest sign
                r = np.where(s == 0, (-((-a) + (-b))).astype(np.float32), r)
        r = _canon_nan(r)
        if self.ftz:
            r = _ftz(r)
        if self.sat:  # NaN -> +0, and -0 -> +0 (assumed: the range is [+0.0, 1.0])
            r = np.where(r > 0, np.minimum(r, np.float32(1)), np.float32(0)).astype(np.float32)
        return r


def _two_sum(a: np.ndarray, b: np.ndarray):
    """s = fl64(a + b) and the exact rounding error e = (a + b) - s (Knuth's TwoSum; no overflow for f32 operands)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _round_f32(s: np.ndarray, e: np.ndarray, rnd: str) -> np.ndarray:
    """The binary32 value of the exact s + e rounded once with `rnd`, where s is float64 and e its TwoSum error
    (|e| <= half an ulp of s). Overflow follows IEEE 754: round-to-nearest gives inf from 2^128 - 2^103 on,
    toward zero gives +-FLT_MAX, toward +-inf gives inf on its own side and +-FLT_MAX on the other."""
    t0 = s.astype(np.float32)  # round to nearest even: the answer unless s is an f32 tie that e decides
    if rnd == "rn" and not np.count_nonzero(e):
        return t0
    finite = np.isfinite(s)
    # past FLT_MAX take FLT_MAX as the nearest value and inf as its upper neighbour (2^128, unbounded exponent)
    t = np.where(np.isinf(t0) & finite, np.copysign(_F32_MAX, s), t0).astype(np.float32)
    g = s - t.astype(np.float64)  # exact in range (t within an f32 ulp of s); past FLT_MAX only its sign and size count
    # the side of t the exact value lies on: g's sign (a nonzero g is a multiple of s's ulp, |e| at most half of it)
    side = np.where(g != 0, np.sign(g), np.sign(e))
    up, down = np.nextafter(t, np.float32(np.inf)), np.nextafter(t, np.float32(-np.inf))
    if rnd == "rn":
        nb = np.where(g > 0, up, down)
        gap = np.where(np.isinf(nb), 2.0 ** 104, np.abs(nb.astype(np.float64) - t.astype(np.float64)))
        tie = (np.abs(g) == gap / 2) & (e != 0)  # s exactly halfway: e says which neighbour is nearer
        r = np.where(tie, np.where(np.sign(e) == np.sign(g), nb, t), t0)
    elif rnd == "rz":
        r = np.where((side != 0) & (np.signbit(t) != (side < 0)), np.nextafter(t, np.float32(0)), t)
    elif rnd == "rp":
        r = np.where(side > 0, up, t)
    else:
        r = np.where(side < 0, down, t)
    return np.where(finite, r, t0).astype(np.float32)


@family("shl", "shr")
class Shift:
    """Shift amounts above the width clamp to the width (PTX ISA 9.7.8.7/9.7.8.8)."""

    @staticmethod
    def decode(ins):
        return _ty(ins, _INT)

    @staticmethod
    def execute(ex, w, ins, m):
        ty = ins.info
        d, a, b = ins.operands
        bits = type_bits(ty)
        x = w.read(a, ty, ex)
        n = np.minimum(w.read(b, "u32", ex).astype(np.int64), bits)
        if ins.base == "shl":
            shifted = to_bits(x, ty) << np.minimum(n, 63).astype(np.uint64)
            r = np.where(n >= bits, np.uint64(0), shifted & np.uint64((1 << bits) - 1))
            w.write(d, from_bits(r, ty), ty, m)
        elif ty[0] == "s":
            w.write(d, (x.astype(np.int64) >> np.minimum(n, 63)).astype(x.dtype), ty, m)
        else:
            u = to_bits(x, ty)
            r = np.where(n >= bits, np.uint64(0), u >> np.minimum(n, 63).astype(np.uint64))
            w.write(d, from_bits(r, ty), ty, m)


@family("selp")
class Selp:
    @staticmethod
    def decode(ins):
        return _ty(ins, _INT | _FLOAT)

    @staticmethod
    def execute(ex, w, ins, m):
        d, a, b, c = ins.operands
        ty = ins.info
        w.write(d, np.where(w.read(c, "pred", ex), w.read(a, ty, ex), w.read(b, ty, ex)), ty, m)


_CMP = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal,
}


@family("setp")
class Setp:
    """setp.CmpOp[.BoolOp].type p[|q], a, b[, c] (PTX ISA "setp", integer and floating-point comparison sections)."""

    @staticmethod
    def decode(ins):
        ty = _ty(ins, _INT | _FLOAT)
        cmp = ins.parts[1]
        if cmp not in _CMP:
            raise unsupported(ins, f"comparison .{cmp}")
        bool_op = ins.parts[2] if len(ins.parts) == 4 else None
        if bool_op not in (None, "and", "or", "xor"):
            raise unsupported(ins)
        if isinstance(ins.operands[0], Pair):
            raise unsupported(ins, "p|q destination")
        return ty, cmp, bool_op

    @staticmethod
    def execute(ex, w, ins, m):
        ty, cmp, bool_op = ins.info
        d, a, b = ins.operands[:3]
        r = _CMP[cmp](w.read(a, ty, ex), w.read(b, ty, ex))
        if bool_op:
            c = w.read(ins.operands[3], "pred", ex)
            r = r & c if bool_op == "and" else r | c if bool_op == "or" else r ^ c
        w.write(d, r, "pred", m)


@family("cvt")
class Cvt:
    """cvt between integer widths, cvt.rn.{f16,f32}.<int of <= 32 bits>, cvt.rn.f16.f32, cvt.rn.f16x2.f32,
    cvt{.ftz}.f64.f32 and cvt{.ftz}.sat.f32.f32 (PTX ISA 9.7.9.21)."""

    @staticmethod
    def decode(ins):
        parts = ins.parts[1:]
        if parts == ["rn", "f16x2", "f32"] or tuple(parts) == ("rn", "f16x2", "f32"):
            return "f16x2"
        if tuple(parts) == ("rn", "f16", "f32"):
            # a narrowing float conversion takes a rounding modifier; .rn: to nearest, ties to even, beyond the f16
            # range -> inf as IEEE 754 rounding gives (PTX ISA 9.7.9.21 "cvt", floating-point rounding modifiers)
            return ("f2f",) + tuple(parts[-2:])
        if len(parts) == 2 and parts[0] in _INT and parts[1] in _INT:
            return tuple(parts)
        if tuple(parts) in (("f64", "f32"), ("ftz", "f64", "f32")):
            # widening f32 -> f64 is exact and takes no rounding modifier; .ftz flushes a subnormal input to a zero of
            # its sign first (PTX ISA 9.7.9.21 "cvt": float-to-float conversions, .ftz on .f32 sources)
            return ("widen", "ftz" in parts)
        if tuple(parts) in (("sat", "f32", "f32"), ("ftz", "sat", "f32", "f32")):
            # cvt{.ftz}.sat.f32.f32: clamp to [0.0, 1.0], NaN -> +0.0 (PTX ISA 9.7.9.21 "cvt", saturation modifier);
            # .ftz flushes a subnormal input to a zero of its sign, which the clamp then makes +0.0 or keeps -0.0
            return ("sat", "ftz" in parts)
        if len(parts) == 3 and parts[0] == "rn" and parts[1] in ("f16", "f32") and parts[2] in _INT \
                and type_bits(parts[2]) <= 32:
            # integer -> float (PTX ISA 9.7.9.21 "cvt": cvt.frnd.dtype.atype, an integer-to-float conversion takes a
            # floating-point rounding modifier; .rn = round to nearest, ties to even)
            return ("i2f",) + tuple(parts[1:])
        raise unsupported(ins)

    @staticmethod
    def execute(ex, w, ins, m):
        if ins.info == "f16x2":
            # d = {a -> upper half, b -> lower half}, round to nearest even
            d, a, b = ins.operands
            hi = _canon_nan(w.read(a, "f32", ex).astype(np.float16)).view(np.uint16).astype(np.uint32)
            lo = _canon_nan(w.read(b, "f32", ex).astype(np.float16)).view(np.uint16).astype(np.uint32)
            w.write(d, (hi << np.uint32(16)) | lo, "b32", m)
            return
        if ins.info[0] == "f2f":
            _, dty, sty = ins.info
            d, a = ins.operands
            r = w.read(a, sty, ex).astype(np.float16 if dty == "f16" else np.float32)
            w.write(d, _canon_nan(r), dty, m)  # NaN -> 0x7FFF, as cvt.rn.f16x2.f32 gives on an H200 (assumed alike)
            return
        if ins.info[0] == "widen":
            d, a = ins.operands
            v = w.read(a, "f32", ex)
            if ins.info[1]:
                v = np.where(np.abs(v) < np.float32(1.17549435e-38), np.copysign(np.float32(0), v), v)
            w.write(d, v.astype(np.float64), "f64", m)
            return
        if ins.info[0] == "sat":
            d, a = ins.operands
            v = w.read(a, "f32", ex)
            if ins.info[1]:
                v = np.where(np.abs(v) < np.float32(1.17549435e-38), np.copysign(np.float32(0), v), v)
            w.write(d, np.where(np.isnan(v), np.float32(0), np.clip(v, np.float32(0), np.float32(1))), "f32", m)
            return
        if ins.info[0] == "i2f":
            _, fty, ity = ins.info
            d, a = ins.operands
            # a <= 32-bit integer is exact in float64, so float64 -> f16/f32 is the single correctly rounded step
            v = w.read(a, ity, ex).astype(np.float64)
            if fty == "f16" and (np.abs(v[m]) >= 65520).any():  # past f16's range after rounding: not verified
                raise unsupported(ins, "an integer beyond f16's finite range (overflow behaviour not modelled)")
            w.write(d, v.astype(np.float16 if fty == "f16" else np.float32), fty, m)
            return
        dty, sty = ins.info
        d, a = ins.operands
        v = w.read(a, sty, ex)
        if sty[0] == "s":
            wide = v.astype(np.int64).astype(np.uint64)
        else:
            wide = to_bits(v, sty)
        w.write(d, from_bits(wide & np.uint64((1 << type_bits(dty)) - 1), dty), dty, m)


@family("cvta")
class Cvta:
    """cvta{.to}.space.size: conversions between state-space and generic addresses (PTX ISA 9.7.9.20)."""

    @staticmethod
    def decode(ins):
        parts = ins.parts[1:]
        to = parts[0] == "to"
        space = parts[1] if to else parts[0]
        if space not in ("param", "shared", "shared::cta", "shared::cluster", "global", "local"):
            raise unsupported(ins)
        return to, space, parts[-1]

    @staticmethod
    def execute(ex, w, ins, m):
        to, space, ty = ins.info
        d, a = ins.operands
        v = w.read_bits(a, ty, ex)
        w.write(d, ex.convert_address(v, space, to), ty, m)


def _special_function(name: str, forms: tuple):
    """One-operand f32 special functions (MUFU): emu.mufu's model (the exact value rounded once, or the measured
    hardware word where a sweep measured the input), .ftz flushing subnormal inputs and results, the canonical NaN
    the GPU returns. rcp.rn.f32 is IEEE division, not a MUFU approximation: always exact."""

    class Fam:
        @staticmethod
        def decode(ins):
            if ins.opcode not in forms:
                raise unsupported(ins)
            return "ftz" in ins.parts, "approx" in ins.parts

        @staticmethod
        def execute(ex, w, ins, m):
            d, a = ins.operands
            ftz, approx = ins.info
            x = w.read(a, "f32", ex)
            if approx:
                r = mufu.evaluate(name, x, ftz, _mufu_rng(ex) if name == "tanh" else None)
            else:
                r = mufu.EXACT[name](x.astype(np.float64)).astype(np.float32)
            w.write(d, _canon_nan(r), "f32", m)

    return Fam


def _mufu_rng(ex):
    """The generator of tanh.approx error draws: only under a non-default schedule (Machine seed != 0), and its own
    stream, so the warp schedule a seed draws does not depend on how many tanh instructions ran."""
    seed = getattr(ex, "seed", 0)
    if not seed:
        return None
    rng = ex.mufu_rng
    if rng is None:
        rng = ex.mufu_rng = np.random.default_rng([seed, 0x6D756675])
    return rng


# PTX ISA "Floating Point Instructions": ex2.approx{.ftz}.f32 2^a, max relative error 2^-22 on the normal range;
# rcp.approx{.ftz}.f32 1/a, max relative error 2^-23 (rcp.rn.f32: IEEE); tanh.approx.f32 (sm_75+) max relative error
# 2^-10.987, subnormals supported, no .ftz form. What the emulator returns inside those bounds: emu/mufu.py.
family("ex2")(_special_function("ex2", ("ex2.approx.ftz.f32", "ex2.approx.f32")))
family("rcp")(_special_function("rcp", ("rcp.approx.ftz.f32", "rcp.approx.f32", "rcp.rn.f32")))
family("tanh")(_special_function("tanh", ("tanh.approx.f32",)))


_CANONICAL_NAN = {np.dtype(np.float32): np.uint32(0x7FFFFFFF).view(np.float32),
                  np.dtype(np.float16): np.uint16(0x7FFF).view(np.float16)}


def _canon_nan(x: np.ndarray) -> np.ndarray:
    """NaN results of f32/f16 arithmetic are the GPU's canonical NaN (f32 0x7FFFFFFF, f16 0x7FFF), whatever the
    inputs' payloads: add/mul/ex2/rcp.f32 and cvt.rn.f16x2.f32 seen on an H200 (tests/calibration/test_alu.py)."""
    x = np.asarray(x)
    nan = _CANONICAL_NAN.get(x.dtype)
    if nan is None or not np.count_nonzero(x != x):  # (count_nonzero: a fraction of isnan(x).any()'s cost)
        return x
    return np.where(np.isnan(x), nan, x)


@family("div")
class Div:
    """div.{s,u}{16,32,64} (PTX ISA 9.7.1.6 "Integer Arithmetic Instructions: div": the quotient truncated toward
    zero; "Division by zero yields an unspecified, machine-specific value" -> Hazard here) and
    div.{approx,full,rn}{.ftz}.f32 (PTX ISA 9.7.3.8 "Floating Point Instructions: div": .approx is a fast
    approximation computed as a * (1/b), max 2 ulp error for |b| in [2^-126, 2^126]; for 2^126 < |b| < 2^128
    it returns 0, or NaN when a is infinite; .full max 2 ulp; .rn IEEE round-to-nearest). Emulated as the
    correctly rounded quotient (float64 division rounded once to f32, exact for .rn; within the ISA's error
    bound for .approx / .full), with the .approx large-divisor rule and .ftz flushing inputs and result.
    nvcc --use_fast_math emits div.approx.ftz.f32 for `x / y` (gau-nernst's epilogue x / (1 + exp(-x)))."""

    @staticmethod
    def decode(ins):
        ty = _ty(ins)
        if ty in ("s16", "u16", "s32", "u32", "s64", "u64"):
            _mods(ins, ())
            return ty, None, False
        if ty != "f32":
            raise unsupported(ins, f"type .{ty}")
        mode = next((p for p in ins.parts[1:-1] if p in ("approx", "full", "rn")), None)
        if mode is None:
            raise unsupported(ins, "div.f32 needs .approx, .full or .rn")
        _mods(ins, (mode, "ftz"))
        return ty, mode, "ftz" in ins.parts

    @staticmethod
    def execute(ex, w, ins, m):
        ty, mode, ftz = ins.info
        d, a, b = ins.operands
        x, y = w.read(a, ty, ex), w.read(b, ty, ex)
        if mode is None:
            from .state import Hazard
            lanes = np.flatnonzero(m)
            if (y[lanes] == 0).any():
                raise Hazard(f"{ins.where()}: integer division by zero (PTX ISA: unspecified result)")
            xs, ys = x.astype(np.int64), y.astype(np.int64)
            ys = np.where(ys == 0, 1, ys)
            q = np.abs(xs) // np.abs(ys) * np.sign(xs) * np.sign(ys)  # truncation toward zero
            w.write(d, q.astype(x.dtype), ty, m)
            return
        if ftz:
            x, y = _ftz(x), _ftz(y)
        r = (x.astype(np.float64) / y.astype(np.float64)).astype(np.float32)
        if mode == "approx":
            big = np.abs(y) > np.float32(2.0 ** 126)
            r = np.where(big, np.where(np.isinf(x), np.float32(np.nan), np.float32(0)), r).astype(np.float32)
        w.write(d, _canon_nan(_ftz(r) if ftz else r), ty, m)


@family("rem")
class Rem:
    """rem.{s,u}{16,32,64} (PTX ISA 9.7.1 "Integer Arithmetic Instructions: rem"): the remainder of the division
    div truncates toward zero, so its sign is the dividend's (a - b * trunc(a / b)); a zero divisor is unspecified
    in the ISA -> Hazard, as div's. nvcc writes it for `%` with a runtime divisor."""

    @staticmethod
    def decode(ins):
        ty = _ty(ins)
        if ty not in ("s16", "u16", "s32", "u32", "s64", "u64"):
            raise unsupported(ins, f"type .{ty}")
        _mods(ins, ())
        return ty

    @staticmethod
    def execute(ex, w, ins, m):
        from .state import Hazard

        ty = ins.info
        d, a, b = ins.operands
        x, y = w.read(a, ty, ex), w.read(b, ty, ex)
        if (y[np.flatnonzero(m)] == 0).any():
            raise Hazard(f"{ins.where()}: integer remainder by zero (PTX ISA: unspecified result)")
        y = np.where(y == 0, 1, y)
        # fmod of integers keeps the dividend's sign (C's %); unsigned: the plain remainder, in 64 bits either way
        r = np.fmod(x.astype(np.int64), y.astype(np.int64)) if ty[0] == "s" else x.astype(np.uint64) % y.astype(np.uint64)
        w.write(d, r.astype(x.dtype), ty, m)
