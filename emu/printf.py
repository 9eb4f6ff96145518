"""Device printf: the text one thread's `call vprintf` writes, formatted on the host as the CUDA runtime does.

nvcc compiles printf(fmt, ...) to `call.uni (retval0), vprintf, (param0, param1)`: param0 the generic address of the
format string (a module `.global` byte array), param1 the generic address of an argument buffer the thread filled in
its local memory, each argument at the next offset aligned to its own size after the default argument promotions
(float to double, char and short to int), as nvcc's PTX stores them (`st.local.v4.b32 [%SPL]`, ...
`st.local.b64 [%SPL+24]` for a double after six ints). The conversions are the CUDA C++ Programming Guide's
("Formatted Output": `%[flags][width][.precision][size]type`, sizes h hh l ll, types c d i o u x X e E f F g G a A s
p); vprintf returns the number of arguments it read (the same section: not the characters printed, -1 for a NULL
format).
"""
from __future__ import annotations

import re
import struct

# flags, width, precision, size, type (CUDA C++ Programming Guide, "Format Specifiers")
SPEC = re.compile(rb"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d*))?(hh|h|ll|l|z|j|t)?([cdiouxXeEfFgGaAsp%])")
INTEGER, FLOATING = b"cdiouxX", b"eEfFgGaA"
MAX_STRING = 1 << 16  # a %s or format string longer than this is read no further


def _argument_size(size: bytes, kind: bytes) -> int:
    if kind in FLOATING or kind in b"sp":
        return 8  # a double after promotion; a pointer
    return 8 if size in (b"l", b"ll", b"z", b"j", b"t") else 4


def format_printf(fmt: bytes, read, read_string) -> tuple[str, int]:
    """(text, arguments read) of one printf: `read(offset, n)` gives n bytes of the argument buffer at offset,
    `read_string(address)` the NUL-terminated bytes at a generic address (for %s)."""
    out, pos, offset, count = [], 0, 0, 0

    def take(n: int) -> bytes:
        nonlocal offset, count
        offset = (offset + n - 1) // n * n
        data = read(offset, n)
        offset += n
        count += 1
        return bytes(data)

    for m in SPEC.finditer(fmt):
        out.append(fmt[pos:m.start()].decode("utf-8", "replace"))
        pos = m.end()
        flags, width, precision, size, kind = m.groups()
        if kind == b"%":
            out.append("%")
            continue
        if width == b"*":
            width = str(struct.unpack("<i", take(4))[0]).encode()
        if precision == b"*":
            precision = str(struct.unpack("<i", take(4))[0]).encode()
        spec = "%" + flags.decode() + (width or b"").decode() + ("." + precision.decode() if precision is not None
                                                                  else "")
        raw = take(_argument_size(size, kind))
        if kind in FLOATING:
            value = struct.unpack("<d", raw)[0]
            out.append(value.hex() if kind in b"aA" else (spec + kind.decode()) % value)
        elif kind == b"s":
            address = struct.unpack("<Q", raw)[0]
            out.append((spec + "s") % ("(null)" if address == 0 else read_string(address).decode("utf-8", "replace")))
        elif kind == b"p":
            out.append((spec + "s") % hex(struct.unpack("<Q", raw)[0]))
        else:
            bits = len(raw) * 8
            value = int.from_bytes(raw, "little")
            if size in (b"h", b"hh"):  # the promoted int printed as short / char
                bits = 16 if size == b"h" else 8
                value &= (1 << bits) - 1
            if kind in b"di" and value >= 1 << (bits - 1):
                value -= 1 << bits
            if kind == b"c":
                out.append((spec + "c") % chr(value & 0xFF))
            else:
                out.append((spec + {"i": "d", "u": "d"}.get(kind.decode(), kind.decode())) % value)
    out.append(fmt[pos:].decode("utf-8", "replace"))
    return "".join(out), count
