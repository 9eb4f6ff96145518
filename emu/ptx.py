"""PTX parser: the module text -> one Kernel whose instructions are decoded once.

Covers the PTX the CuTe DSL and nvcc emit (PTX ISA chapter 4 "Syntax", chapter 11 directives as used there):
one `.entry` with `.param` declarations and the `.func` it calls (each function's registers, labels and variables its
own; a call site's `.param` arguments in its `{ }` block), `.reg` declarations, `.shared` variables (the `.extern`
dynamic buffer and static ones, laid out by SharedLayout), `.local` variables (one per-thread frame), module `.global`
/ `.const` variables with their initialisers, labels,
guard predicates, vector operands `{a, b}`, address operands `[reg+imm]`, the `%r|%p` pair of
elect.sync, the `_` sink, and inline-asm `{ }` blocks whose labels and `.reg` names are local to the
block (PTX ISA 11.1 "Scoping"): they are renamed apart so each block's `DONE:` stays its own.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from .state import EmulatorError, Unsupported


class ParseError(EmulatorError):
    pass


@dataclass(frozen=True)
class Reg:
    name: str


@dataclass(frozen=True)
class Imm:
    value: int | float
    is_float: bool = False


@dataclass(frozen=True)
class Sym:
    """A named symbol: a kernel parameter, a shared variable or a label (resolved by the executor)."""

    name: str


@dataclass(frozen=True)
class ParamSym(Sym):
    """A `.param` variable of a call: a call site's argument or return value (`.param .b32 param0;` in its `{ }`
    block), or a `.func`'s formal parameter or return value (PTX ISA 5.1.6.2 "Device Function Parameters"): per-thread
    storage that st.param / ld.param move values through, not the kernel's parameter buffer."""


@dataclass(frozen=True)
class Args:
    """A call's parenthesised list, `(retval0)` or `(param0, param1)` (PTX ISA "call")."""

    items: tuple


@dataclass(frozen=True)
class Addr:
    """[base + offset]: base is a Reg, a Sym or None (an absolute address)."""

    base: object
    offset: int


@dataclass(frozen=True)
class TensorCoords:
    """[tensorMap, {c0, c1, ...}] of cp.async.bulk.tensor (PTX ISA 9.7.9.25.5.1)."""

    tensor_map: object
    coords: tuple


@dataclass(frozen=True)
class Vec:
    items: tuple


@dataclass(frozen=True)
class Pair:
    """elect.sync's `%r|%p` destination."""

    first: Reg
    second: Reg


@dataclass(frozen=True)
class Sink:
    pass


@dataclass
class Instr:
    opcode: str  # the full dotted opcode, e.g. "mbarrier.try_wait.parity.shared.b64"
    parts: tuple  # opcode.split(".")
    operands: tuple
    guard: tuple | None  # (Reg, negated)
    line: int  # 1-based line in the PTX text
    text: str
    target: int = -1  # branch target index (bra)
    callee: object = None  # call: the Function it calls
    handler: object = None  # set by the executor's decode step
    info: object = None  # handler-specific decoded data
    _where: str = field(default="", repr=False, compare=False)  # where(), made once: messages name it often

    @property
    def base(self) -> str:
        return self.parts[0]

    def where(self) -> str:
        if not self._where:
            self._where = f"PTX line {self.line}: {self.text.strip()}"
        return self._where

    def site(self) -> str:
        """Short form for notes: the line and the opcode."""
        return f"PTX line {self.line} ({self.opcode})"


@dataclass
class Param:
    name: str
    size: int
    align: int
    offset: int = 0  # byte offset in the parameter buffer (each parameter at its alignment, in order)
    decl: str = ""  # the declaration as written


@dataclass
class Kernel:
    name: str
    params: list
    instrs: list
    labels: dict
    reqntid: tuple | None = None
    shared_vars: dict = field(default_factory=dict)  # name -> (align, size or None for extern)
    reg_decls: dict = field(default_factory=dict)  # register name prefix -> PTX type
    shared_layout: "SharedLayout | None" = None
    functions: dict = field(default_factory=dict)  # name -> Function: the .func the kernel calls, directly or not
    param_vars: dict = field(default_factory=dict)  # ParamSym name -> bytes (call arguments, formals, return values)
    local_layout: "SharedLayout | None" = None  # the per-thread .local variables (every function's, one frame)
    global_vars: dict = field(default_factory=dict)  # module .global variable -> (align, initial bytes)


@dataclass
class Function:
    """A `.func` the kernel calls (PTX ISA 11.1.2 ".func"): its instructions start at `start` (after the kernel's);
    formals and retvals are (ParamSym name, bytes) in declaration order. An `.extern .func` with no body has start
    -1: only the CUDA runtime's vprintf is known (emu.ops_control.Call)."""

    name: str
    formals: tuple
    retvals: tuple
    start: int = -1


@dataclass(frozen=True)
class SharedLayout:
    """Where each `.shared` variable lives, in bytes from the start of the static region.

    The toolchain's layout (CUDA C++ Programming Guide, "Shared Memory": dynamic shared memory starts where the
    static variables end; every `extern __shared__` array names that same address): the static (sized) variables
    one after another in declaration order, each at its declared alignment, then the dynamic buffer at the largest
    alignment any `.extern .shared` declaration asks for. The PTX ISA (5.4.4 "Alignment of variables") only
    promises each variable its `.align`; the order is the toolchain's choice, and any order that honours the
    alignments gives the same values to a kernel that does not compute one variable's address from another's."""

    offsets: dict  # static variable name -> byte offset
    static_bytes: int
    dynamic_align: int
    dynamic_names: tuple

    def dynamic_offset(self, base: int) -> int:
        """The dynamic buffer's offset when the static region starts at `base`."""
        a = self.dynamic_align
        return (base + self.static_bytes + a - 1) // a * a



_TYPE_SIZES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "b32": 4, "u32": 4, "s32": 4,
               "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8, "pred": 1}
# PTX ISA 5.1.6.1 "Kernel Function Parameter Attributes" (.ptr): `.param .type .ptr [.space] [.align N] name`
# (nvcc writes `.param .u64 .ptr .align 1 p` for pointer parameters). The .ptr attribute's .space and .align
# describe the pointee (a hint), not the parameter: its size and alignment stay those of .type.
_PARAM_RE = re.compile(r"\.param\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+"
                       r"(?:\.ptr\s+(?:\.(?:const|global|local|shared)\s+)?(?:\.align\s+\d+\s+)?)?([\w$]+)(?:\[(\d+)\])?")
_REG_DECL_RE = re.compile(r"\.reg\s+\.(\w+)\s+([%\w$]+?)(?:<(\d+)>)?\s*$")
# A declaration may name several registers: `.reg .pred e, p;` (PTX ISA 5.4 "Variables": a list of names).
_REG_LIST_RE = re.compile(r"\.reg\s+\.(\w+)\s+([%\w$]+(?:<\d+>)?(?:\s*,\s*[%\w$]+(?:<\d+>)?)+)\s*$")


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _split_top(s: str, sep: str = ",") -> list:
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    tail = "".join(cur).strip()
    if tail:
        out.append(tail)
    return out


def parse_imm(tok: str) -> Imm | None:
    t = tok.strip()
    m = re.fullmatch(r"0[fF]([0-9a-fA-F]{8})", t)
    if m:
        return Imm(struct.unpack("<f", struct.pack("<I", int(m.group(1), 16)))[0], True)
    m = re.fullmatch(r"0[dD]([0-9a-fA-F]{16})", t)
    if m:
        return Imm(struct.unpack("<d", struct.pack("<Q", int(m.group(1), 16)))[0], True)
    m = re.fullmatch(r"(-?)0[xX]([0-9a-fA-F]+)U?", t)
    if m:
        v = int(m.group(2), 16)
        return Imm(-v if m.group(1) else v)
    m = re.fullmatch(r"-?\d+U?", t)
    if m:
        return Imm(int(t.rstrip("U")))
    m = re.fullmatch(r"-?\d+\.\d*(?:[eE][-+]?\d+)?", t)
    if m:
        return Imm(float(t), True)
    return None


class _Scopes:
    """Label, register and `.param` renaming for `{ }` blocks (PTX ISA 11.1) and for a `.func`'s body.

    A block's names become name@N (N unique in the module); a function's own registers, labels, `.local` variables and
    parameters become name@function, so its %r1 is not the kernel's %r1 (PTX ISA 11.1.2: a function's declarations
    are local to it). The kernel's own names are kept as written."""

    def __init__(self, function: str | None = None, count: int = 0, function_names=()):
        self.stack = [0]
        self.count = count
        self.local_regs = [set()]
        self.local_labels = [set()]
        self.local_params = [set()]
        self.function = function
        self.function_regs = set()  # register names declared at the function's top level (%r of %r<9>, or %SP)
        self.function_names = set(function_names)  # its labels, .local variables and parameters
        self.params = set()  # renamed names that are ParamSym (call arguments, formals, return values)

    def push(self):
        self.count += 1
        self.stack.append(self.count)
        self.local_regs.append(set())
        self.local_labels.append(set())
        self.local_params.append(set())

    def pop(self):
        self.stack.pop()
        self.local_regs.pop()
        self.local_labels.pop()
        self.local_params.pop()

    def reg(self, name: str) -> str:
        for depth in range(len(self.stack) - 1, 0, -1):
            if name in self.local_regs[depth]:
                return f"{name}@{self.stack[depth]}"
        if self.function and (name in self.function_regs or name.rstrip("0123456789") in self.function_regs):
            return f"{name}@{self.function}"
        return name

    def label(self, name: str) -> str:
        for depth in range(len(self.stack) - 1, 0, -1):
            if name in self.local_labels[depth]:
                return f"{name}@{self.stack[depth]}"
        if name in self.function_names:
            return f"{name}@{self.function}"
        return name

    def declare_param(self, name: str) -> str:
        """A `.param` variable declared here: in a block (a call site's argument or return value), or at the
        function's top level (its formals and return values)."""
        if len(self.stack) > 1 or not self.function:
            self.local_params[-1].add(name)
            renamed = f"{name}@{self.stack[-1]}"
        else:
            self.function_names.add(name)
            renamed = f"{name}@{self.function}"
        self.params.add(renamed)
        return renamed

    def symbol(self, name: str) -> Sym:
        """A named operand that is no register: a `.param` variable in scope, a label, a variable or a function."""
        for depth in range(len(self.stack) - 1, -1, -1):
            if name in self.local_params[depth]:
                return ParamSym(f"{name}@{self.stack[depth]}")
        renamed = self.label(name)
        return ParamSym(renamed) if renamed in self.params else Sym(renamed)


def _prescan_block_labels(lines: list) -> dict:
    """Labels defined inside each `{ }` block, keyed by the line index of the opening brace."""
    out, stack = {}, []
    for i, (_, s) in enumerate(lines):
        if s == "{":
            stack.append(i)
            out[i] = set()
        elif s == "}":
            if stack:
                stack.pop()
        elif stack:
            m = re.fullmatch(r"([\w$]+):", s)
            if m:
                out[stack[-1]].add(m.group(1))
    return out


def parse_operand(tok: str, scopes: _Scopes):
    t = tok.strip()
    if t == "_":
        return Sink()
    if t.startswith("(") and t.endswith(")"):
        return Args(tuple(parse_operand(x, scopes) for x in _split_top(t[1:-1])))
    if t.startswith("{") and t.endswith("}"):
        return Vec(tuple(parse_operand(x, scopes) for x in _split_top(t[1:-1])))
    if t.startswith("[") and t.endswith("]"):
        inner = t[1:-1].strip()
        parts = _split_top(inner)
        if len(parts) == 2 and parts[1].startswith("{"):
            coords = parse_operand(parts[1], scopes)
            return TensorCoords(parse_operand(parts[0], scopes), coords.items)
        m = re.fullmatch(r"([%\w$.]+)\s*(?:\+\s*(-?(?:0x[0-9a-fA-F]+|\d+)))?", inner)
        if m is None:
            imm = parse_imm(inner)
            if imm is not None:
                return Addr(None, int(imm.value))
            raise ParseError(f"unsupported address operand {t!r}")
        base_tok, off = m.group(1), m.group(2)
        offset = int(off, 0) if off else 0
        imm = parse_imm(base_tok)
        if imm is not None:
            return Addr(None, int(imm.value) + offset)
        base = Reg(scopes.reg(base_tok)) if base_tok.startswith("%") or scopes.reg(base_tok) != base_tok \
            else scopes.symbol(base_tok)
        return Addr(base, offset)
    if "|" in t:
        a, b = t.split("|")
        return Pair(Reg(scopes.reg(a.strip())), Reg(scopes.reg(b.strip())))
    imm = parse_imm(t)
    if imm is not None:
        return imm
    if t.startswith("%"):
        return Reg(scopes.reg(t))
    local = scopes.reg(t)
    if local != t:
        return Reg(local)
    return scopes.symbol(t)


def _entry(body: str) -> tuple[str, list, int]:
    """(name, parameters, end of the parameter list) of the first .entry in comment-free PTX.

    PTX ISA 5.1.6.1 "Kernel Function Parameters": `.param .align A .b8 name[N]` is N bytes aligned to A; a scalar
    `.param .u32 name` is its type's size, naturally aligned; `.ptr` attributes describe the pointee only."""
    m = re.search(r"\.entry\s+([\w$]+)\s*\(", body)
    if m is None:
        raise ParseError("no .entry in the PTX")
    start = m.end()
    end = body.index(")", start)
    params, off = [], 0
    for decl in _split_top(body[start:end]):
        pm = _PARAM_RE.search(decl)
        if pm is None:
            raise ParseError(f"unsupported parameter declaration {decl!r}")
        align, ty, pname, count = pm.groups()
        size = _TYPE_SIZES[ty] * (int(count) if count else 1)
        p = Param(pname, size, int(align) if align else _TYPE_SIZES[ty], decl=decl.strip())
        off = (off + p.align - 1) // p.align * p.align
        p.offset = off
        off += p.size
        params.append(p)
    return m.group(1), params, end


def parse_entry(text: str) -> tuple[str, list]:
    """The kernel's name and parameters (Param: name, size, alignment, offset, declaration)."""
    name, params, _ = _entry(_strip_comments(text.replace("\x00", "")))
    return name, params


# A function definition's header at module scope: `[.visible|.weak|.extern] .entry NAME (` or `.func [(ret)] NAME (`
# (PTX ISA 11.1.1, 11.1.2); its body is the next balanced `{ ... }` after the parameter list.
_FUNCTION_RE = re.compile(r"(?m)^[ \t]*((?:\.(?:visible|weak|extern)\s+)*)\.(entry|func)\s*(?:\([^)]*\)\s*)?([\w$]+)\s*\(")


def _functions(body: str) -> list[tuple[str, str, int, int]]:
    """(kind, name, start, end) of every function definition of comment-free PTX, in order: `end` is one past its
    body's closing brace (a prototype without a body, `.extern .func f(...);`, ends at its semicolon)."""
    out = []
    for m in _FUNCTION_RE.finditer(body):
        depth, i = 1, m.end()
        while depth and i < len(body):  # the parameter list
            depth += {"(": 1, ")": -1}.get(body[i], 0)
            i += 1
        while i < len(body) and body[i] not in "{;":
            i += 1
        if i < len(body) and body[i] == "{":
            depth, i = 1, i + 1
            while depth and i < len(body):
                depth += {"{": 1, "}": -1}.get(body[i], 0)
                i += 1
        else:
            i += 1
        out.append((m.group(2), m.group(3), m.start(), i))
    return out


def entry_names(text: str) -> list[str]:
    """The names of the module's kernels (`.entry` definitions), in order."""
    return [name for kind, name, _, _ in _functions(_strip_comments(text.replace("\x00", ""))) if kind == "entry"]


def select_entry(text: str, name: str) -> str:
    """The module reduced to one kernel: its module-scope declarations (version, target, variables), its `.func`
    definitions (which the kernel may call) and the `.entry` named `name`, every other `.entry` blanked out (lines
    kept). What parse_module, parse_entry and static_shared_bytes read of a module that holds several kernels (nvcc
    compiles every kernel of a file into one)."""
    body = _strip_comments(text.replace("\x00", ""))
    functions = _functions(body)
    if not any(kind == "entry" and fname == name for kind, fname, _, _ in functions):
        raise ParseError(f"no .entry {name} in the PTX (its kernels: {entry_names(text)})")
    out, at = [], 0
    for kind, fname, start, end in functions:
        out.append(body[at:start])
        # the other functions become blank lines, so PTX line numbers still name lines of the whole module
        keep = kind == "func" or fname == name
        out.append(body[start:end] if keep else "\n" * body.count("\n", start, end))
        at = end
    out.append(body[at:])
    return "".join(out)


# Debugging directives nvcc writes one per line with no ';' (PTX ISA 11.5.3 ".loc", 11.5.2 ".file", 11.5.1
# ".section"): each ends at its line's end. (A word: `.local` is a statement, not `.loc`.)
_LINE_DIRECTIVE_RE = re.compile(r"\.(?:loc|file|section)\b")


def _statements(raw_lines: list, start: int, stop: int | None = None) -> list:
    """(line, text) of every statement, block brace and label of a function body from raw_lines[start:stop]. PTX ISA 4.3
    "Statements": a statement "begins with an optional label and ends with a semicolon", and 4.1 "Source Format": all
    whitespace, newlines included, only separates tokens. So a statement may span lines (inline asm written as
    "opcode\\n operands;" gives an opcode on one line and its operands on the next); it is numbered by the line it
    starts on. A '{' or '}' opens or closes a block only where no statement is pending (inside one it belongs to a
    vector operand)."""
    stmts, pending, first = [], "", 0
    for i in range(start, len(raw_lines) if stop is None else stop):
        s = raw_lines[i].strip()
        while s:
            if pending:
                semi = s.find(";")
                if semi < 0:
                    pending += " " + s
                    break
                stmts.append((first, f"{pending} {s[:semi]}".strip()))
                pending, s = "", s[semi + 1:].strip()
                continue
            if s[0] in "{}":
                stmts.append((i + 1, s[0]))
                s = s[1:].strip()
                continue
            lm = re.match(r"([\w$]+):\s*", s)
            if lm and not s.startswith("."):
                stmts.append((i + 1, lm.group(1) + ":"))
                s = s[lm.end():].strip()
                continue
            if _LINE_DIRECTIVE_RE.match(s):
                stmts.append((i + 1, s))
                break
            semi = s.find(";")
            if semi < 0:
                pending, first = s, i + 1
                break
            stmts.append((i + 1, s[:semi].strip()))
            s = s[semi + 1:].strip()
    if pending:
        raise ParseError(f"PTX line {first}: a statement with no ';' before the end of the body: {pending[:80]!r}")
    return stmts


# `.local .align 16 .b8 __local_depot0[32];` and a call site's `.param .b32 param0;` inside a body (PTX ISA 5.1.5
# ".local", 5.1.6.2 "Device Function Parameters").
_BODY_VAR_RE = re.compile(r"\.(local|param)\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([\w$]+)(?:\[(\d+)\])?$")
# A `.func`'s header (PTX ISA 11.1.2): `.func [(.param ... retval)] name (` then its formal parameters.
_FUNC_HEADER_RE = re.compile(r"\.func\s*(?:\(([^)]*)\)\s*)?([\w$]+)\s*\(")
# A module-scope variable in the global or constant state space, with its initializer (PTX ISA 5.4.4
# "Variable Initializers"): `.global .align 1 .b8 $str[53] = {78, 79, ...};`, `.global .align 8 .f64 e = 0d4005...;`.
_GLOBAL_RE = re.compile(r"(?m)^[ \t]*((?:\.(?:visible|weak|extern|common)\s+)*)\.(global|const)\s+"
                        r"(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([\w$]+)(?:\[(\d*)\])?\s*(?:=\s*([^;]*))?;")


def _param_decls(text: str) -> list:
    """(name, bytes) of each `.param` declaration of a parameter list."""
    out = []
    for decl in _split_top(text):
        pm = _PARAM_RE.search(decl)
        if pm is None:
            raise ParseError(f"unsupported parameter declaration {decl!r}")
        _, ty, pname, count = pm.groups()
        out.append((pname, _TYPE_SIZES[ty] * (int(count) if count else 1)))
    return out


def _closing_paren(body: str, i: int) -> int:
    depth = 1
    while depth and i < len(body):
        depth += {"(": 1, ")": -1}.get(body[i], 0)
        i += 1
    return i


def _body_statements(body: str, raw_lines: list, header_end: int, def_end: int) -> list:
    """The statements of the function whose parameter list ends at `header_end` and whose definition ends at
    `def_end` (character offsets in comment-free PTX), without its body's braces."""
    line_of_end = body.count("\n", 0, header_end)
    first_brace = next((i for i in range(line_of_end, len(raw_lines)) if raw_lines[i].strip().startswith("{")), None)
    if first_brace is None:
        raise ParseError("function body not found")
    stmts = _statements(raw_lines, first_brace + 1, body.count("\n", 0, def_end) + 1)
    if stmts and stmts[-1][1] == "}":
        stmts.pop()  # the body's closing brace
    return stmts


def _top_level_names(stmts: list) -> set:
    """Labels and `.local` / `.param` variables a function body declares outside every `{ }` block: its own names."""
    names, depth = set(), 0
    for _, s in stmts:
        depth += {"{": 1, "}": -1}.get(s, 0)
        if depth:
            continue
        lm = re.fullmatch(r"([\w$]+):", s)
        vm = _BODY_VAR_RE.match(s)
        if lm:
            names.add(lm.group(1))
        elif vm:
            names.add(vm.group(4))
    return names


class _ModuleParser:
    """The instructions of a kernel and of every .func it calls, in one list: the kernel's first (so its program
    counters are those of the kernel alone), then each function's in the order the calls reach them."""

    def __init__(self):
        self.instrs, self.labels, self.reg_decls = [], {}, {}
        self.param_vars, self.local_vars = {}, {}
        self.blocks = 0  # { } blocks opened so far: their names are numbered apart across functions

    def parse_body(self, stmts: list, scopes: _Scopes) -> list:
        """Append a body's instructions; return its call instructions."""
        block_labels = _prescan_block_labels(stmts)
        calls = []
        for idx, (line, s) in enumerate(stmts):
            if s == "{":
                scopes.push()
                scopes.local_labels[-1] |= block_labels.get(idx, set())
                continue
            if s == "}":
                scopes.pop()
                continue
            lm = re.fullmatch(r"([\w$]+):", s)
            if lm:
                self.labels[scopes.label(lm.group(1))] = len(self.instrs)
                continue
            if s.startswith("."):
                self.declaration(s, scopes)
                continue
            guard = None
            gm = re.match(r"@(!?)([%\w$]+)\s+", s)
            if gm:
                guard = (Reg(scopes.reg(gm.group(2))), gm.group(1) == "!")
                s_ins = s[gm.end():]
            else:
                s_ins = s
            om = re.match(r"([a-z][\w.:]*)\s*(.*)$", s_ins, flags=re.S)
            if om is None:
                raise ParseError(f"PTX line {line}: cannot parse {s!r}")
            opcode, rest = om.group(1), om.group(2).strip()
            operands = tuple(parse_operand(t, scopes) for t in _split_top(rest)) if rest else ()
            ins = Instr(opcode, tuple(opcode.split(".")), operands, guard, line, s)
            if ins.base == "call":
                calls.append(ins)
            self.instrs.append(ins)
        self.blocks = scopes.count
        return calls

    def declaration(self, s: str, scopes: _Scopes) -> None:
        """`.reg` (block-, function- or kernel-scoped), `.local` and `.param` variables; other directives (.pragma,
        .loc, the demoted `.shared` read by _shared_declarations) carry no semantics here."""
        dm = _REG_DECL_RE.match(s)
        lm = None if dm else _REG_LIST_RE.match(s)
        decls = [dm.groups()[:2]] if dm else [
            (lm.group(1), re.sub(r"<\d+>$", "", n.strip())) for n in lm.group(2).split(",")] if lm else []
        for ty, rname in decls:
            if len(scopes.stack) > 1:
                scopes.local_regs[-1].add(rname)
            elif scopes.function:
                scopes.function_regs.add(rname)
            self.reg_decls[scopes.reg(rname)] = ty
        vm = None if decls else _BODY_VAR_RE.match(s)
        if vm:
            space, align, ty, vname, count = vm.groups()
            if ty not in _TYPE_SIZES:
                raise ParseError(f".{space} variable {vname}: unsupported type .{ty}")
            size = _TYPE_SIZES[ty] * (int(count) if count else 1)
            if space == "param":
                self.param_vars[scopes.declare_param(vname)] = size
            else:
                self.local_vars[scopes.label(vname)] = (int(align) if align else _TYPE_SIZES[ty], size)


def _callee_name(ins) -> str:
    """The function a call names (PTX ISA "call": `call{.uni} [(ret),] func, [(args)]`); a call through a register
    (an indirect call with a prototype) names none."""
    names = [op.name for op in ins.operands if type(op) is Sym]
    if len(names) != 1 or any(isinstance(op, Reg) for op in ins.operands):
        raise Unsupported(f"{ins.where()}: an indirect call (through a register) is not implemented")
    return names[0]


def _no_recursion(functions: dict, calls_of: dict) -> None:
    """A `.func`'s registers and `.local` variables are one set per function here, not one per call: a recursive
    call would share them with its caller, so recursion is refused before anything runs."""
    state = {}

    def visit(name, path):
        state[name] = "open"
        for callee in calls_of.get(name, ()):
            if state.get(callee) == "open":
                cycle = " -> ".join(path[path.index(callee):] + [callee])
                raise Unsupported(f"recursive calls ({cycle}) are not implemented: a function's registers and .local "
                                  "frame are one per function here, not one per call")
            if callee not in state:
                visit(callee, path + [callee])
        state[name] = "done"

    for name in list(calls_of):
        if name not in state:
            visit(name, [name])


def parse_module(text: str) -> Kernel:
    """Parse PTX text holding one .entry (the kernel) and the .func it calls; return it with instructions decoded."""
    body = _strip_comments(text.replace("\x00", ""))  # 4.3.5's PTX dump ends with a NUL byte
    raw_lines = body.split("\n")
    name, params, end = _entry(body)
    shared_vars = _shared_declarations(body)
    reqntid = None
    rm = re.search(r"\.reqntid\s+(\d+)\s*,\s*(\d+)\s*,\s*(\d+)", body)
    if rm:
        reqntid = tuple(int(x) for x in rm.groups())
    definitions = _functions(body)
    entry_end = next(e for kind, fname, start, e in definitions if kind == "entry" and start <= end < e)
    module = _ModuleParser()
    calls = module.parse_body(_body_statements(body, raw_lines, end, entry_end), _Scopes())
    calls_of = {name: {_callee_name(c) for c in calls}}
    functions, queue = {}, [_callee_name(c) for c in calls]
    funcs = {fname: (start, e) for kind, fname, start, e in definitions if kind == "func"}
    while queue:
        fname = queue.pop(0)
        if fname in functions:
            continue
        if fname not in funcs:
            raise ParseError(f"call to {fname}, which the module does not declare")
        start, def_end = funcs[fname]
        hm = _FUNC_HEADER_RE.search(body, start, def_end)
        header_end = _closing_paren(body, hm.end())
        retvals, formals = _param_decls(hm.group(1) or ""), _param_decls(body[hm.end():header_end - 1])
        has_body = "{" in body[header_end:def_end]
        fn = Function(fname, tuple((f"{n}@{fname}", size) for n, size in formals),
                      tuple((f"{n}@{fname}", size) for n, size in retvals), len(module.instrs) if has_body else -1)
        functions[fname] = fn
        for pname, size in fn.formals + fn.retvals:
            module.param_vars[pname] = size
        if not has_body:
            continue
        stmts = _body_statements(body, raw_lines, header_end, def_end)
        names = _top_level_names(stmts) | {n for n, _ in formals + retvals}
        scopes = _Scopes(fname, module.blocks, names)
        scopes.params |= {pname for pname, _ in fn.formals + fn.retvals}
        found = module.parse_body(stmts, scopes)
        calls += found
        calls_of[fname] = {_callee_name(c) for c in found}
        queue += sorted(calls_of[fname])
    _no_recursion(functions, calls_of)
    for ins in calls:
        ins.callee = functions[_callee_name(ins)]
    for ins in module.instrs:
        if ins.base != "bra":
            continue
        target = ins.operands[0]
        if not isinstance(target, Sym) or target.name not in module.labels:
            raise ParseError(f"{ins.where()}: unknown branch target")
        ins.target = module.labels[target.name]
    kernel = Kernel(name, params, module.instrs, module.labels, reqntid, shared_vars, module.reg_decls,
                    layout_shared(shared_vars))
    kernel.functions, kernel.param_vars = functions, module.param_vars
    kernel.local_layout = layout_shared(module.local_vars)
    kernel.global_vars = _global_declarations(body, definitions)
    return kernel


def _global_declarations(body: str, definitions: list) -> dict:
    """name -> (alignment, bytes, state space, type, initializer text) of the module-scope .global and .const
    variables (an `.extern` one has no storage here: it stays unknown). Their values are made on first use
    (emu.machine.Machine.symbol_address)."""
    inside = [(start, end) for _, _, start, end in definitions]
    out = {}
    for m in _GLOBAL_RE.finditer(body):
        if any(start <= m.start() < end for start, end in inside):
            continue
        attrs, space, align, ty, vname, count, init = m.groups()
        if "extern" in attrs or ty not in _TYPE_SIZES:
            continue
        esize = _TYPE_SIZES[ty]
        size = esize * (int(count) if count else 1)
        if count == "":  # `x[] = {...}`: sized by its initializer
            size = esize * len(_split_top(init.strip()[1:-1])) if init else 0
        out[vname] = (int(align) if align else esize, size, space, ty, (init or "").strip())
    return out


def initial_bytes(ty: str, size: int, init: str) -> bytes:
    """A variable's initial bytes (PTX ISA 5.4.4 "Variable Initializers": a scalar or a `{ }` list of constants, the
    rest zero-filled; no initializer: zeros). An initializer naming an address (`generic(x)`, a symbol) is
    Unsupported."""
    items = _split_top(init[1:-1]) if init.startswith("{") else ([init] if init else [])
    esize = _TYPE_SIZES[ty]
    out = bytearray()
    for item in items:
        imm = parse_imm(item)
        if imm is None:
            raise Unsupported(f"the initializer {item!r} of a .{ty} variable is not implemented")
        if ty in ("f32", "f64"):
            out += struct.pack("<f" if ty == "f32" else "<d", float(imm.value))
        else:
            out += (int(imm.value) % (1 << (8 * esize))).to_bytes(esize, "little")
    if len(out) > size:
        raise ParseError(f"an initializer of {len(out)} bytes for a variable of {size}")
    return bytes(out) + bytes(size - len(out))


# `.extern .shared .align 1024 .b8 smem[];` (module scope) and `.shared .align 8 .b8 bars[72];` (nvcc demotes a
# function-scope `__shared__` into the kernel body, "// demoted variable"): PTX ISA 5.4 "Variables" / 5.1.5.
# (A declaration begins on its own line: `^[ \t]*`, not `^\s*`, which from every line start scanned the whole run of
# blank lines after it: quadratic in the blank lines select_entry leaves of a module's other functions, 60% of a
# nvcc-compiled public file's run.)
_SHARED_RE = re.compile(r"(?m)^[ \t]*(\.extern\s+)?\.shared\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([\w$]+)(?:\[(\d*)\])?\s*;")


def _shared_declarations(body: str) -> dict:
    """name -> (alignment, bytes or None for an `.extern` array), in declaration order. Without `.align` a variable
    is aligned to its type's size (PTX ISA 5.4.4)."""
    out = {}
    for m in _SHARED_RE.finditer(body):
        extern, align, ty, name, count = m.groups()
        if ty not in _TYPE_SIZES:
            raise ParseError(f"shared variable {name}: unsupported type .{ty}")
        esize = _TYPE_SIZES[ty]
        if extern and count not in ("", None):
            raise ParseError(f"shared variable {name}: an .extern array must be unsized")
        size = None if extern else esize * (int(count) if count else 1)
        if not extern and count == "":
            raise ParseError(f"shared variable {name}: a non-extern array needs a size")
        out[name] = (int(align) if align else esize, size)
    return out


def layout_shared(shared_vars: dict) -> SharedLayout:
    offsets, off = {}, 0
    for name, (align, size) in shared_vars.items():
        if size is None:
            continue
        off = (off + align - 1) // align * align
        offsets[name] = off
        off += size
    dynamic = tuple(n for n, (_, size) in shared_vars.items() if size is None)
    return SharedLayout(offsets, off, max([shared_vars[n][0] for n in dynamic], default=16), dynamic)


def static_shared_bytes(ptx: str) -> int:
    """The static shared memory the driver charges a kernel: its own sized `.shared` variables. Not the cubin's
    .nv.shared.<kernel> section, which for a kernel with only an `.extern` array holds 1024 bytes: measured on a lent
    H100 (python -m calibration.launch_limits; docs/design.md "Launch limits"), cuFuncGetAttribute(SHARED_SIZE_BYTES)
    is 0 for such a kernel, its array starts at shared address 1024 (the 1 KiB reserved per block, CUDA C++
    Programming Guide) and a launch with the whole 232448-byte opt-in maximum of dynamic memory succeeds; and
    arseni_ivanov's B200-verified CuTe DSL kernel launches 231680 dynamic bytes, which a charged 1024 would refuse."""
    decls = {}
    for extern, align, ty, name, count in _SHARED_RE.findall(ptx):
        size = None if extern else _TYPE_SIZES[ty] * (int(count) if count else 1)
        decls[name] = (int(align) if align else _TYPE_SIZES[ty], size)
    return layout_shared(decls).static_bytes
