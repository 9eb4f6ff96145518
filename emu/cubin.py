"""A cubin (an sm_100a ELF image) read as the CUDA driver and cuobjdump read it: its sections, the resources a
kernel of it asks for at launch (registers per thread, static shared memory), and the cubins a fatbinary module image
holds (emu.timing.sass disassembles them)."""
from __future__ import annotations


EM_CUDA = 190  # ELF e_machine of a cubin
EIATTR_REGCOUNT = 0x2F  # .nv.info attribute: (symbol index, registers per thread)


def elf_sections(elf: bytes) -> dict:
    """{section name: (type, file offset, size)} of an ELF64 image."""
    shoff = int.from_bytes(elf[0x28:0x30], "little")
    shentsize, shnum, shstrndx = (int.from_bytes(elf[o:o + 2], "little") for o in (0x3A, 0x3C, 0x3E))
    raw = [elf[shoff + i * shentsize:shoff + (i + 1) * shentsize] for i in range(shnum)]
    names_off = int.from_bytes(raw[shstrndx][0x18:0x20], "little")
    out = {}
    for sh in raw:
        name_at = names_off + int.from_bytes(sh[0:4], "little")
        name = elf[name_at:elf.index(b"\0", name_at)].decode()
        out[name] = (int.from_bytes(sh[4:8], "little"), int.from_bytes(sh[0x18:0x20], "little"),
                     int.from_bytes(sh[0x20:0x28], "little"))
    return out


def cubin_resources(elf: bytes, kernel_name: str) -> dict:
    """Registers per thread (.nv.info EIATTR_REGCOUNT of the kernel's symbol) and static shared memory (size of
    .nv.shared.<kernel>) of a cubin: what cuobjdump --dump-resource-usage reports as REG and SHARED."""
    secs = elf_sections(elf)
    _, symoff, symsize = secs[".symtab"]
    _, stroff, _ = secs[".strtab"]
    index = None
    for i in range(symsize // 24):
        name_at = stroff + int.from_bytes(elf[symoff + 24 * i:symoff + 24 * i + 4], "little")
        if elf[name_at:elf.index(b"\0", name_at)].decode() == kernel_name:
            index = i
    registers = None
    _, off, size = secs.get(".nv.info", (0, 0, 0))
    p = off
    while p < off + size:
        fmt, attr = elf[p], elf[p + 1]
        if fmt == 4:  # EIFMT_SVAL: u16 size, payload
            n = int.from_bytes(elf[p + 2:p + 4], "little")
            if attr == EIATTR_REGCOUNT and int.from_bytes(elf[p + 4:p + 8], "little") == index:
                registers = int.from_bytes(elf[p + 8:p + 12], "little")
            p += 4 + n
        else:  # EIFMT_HVAL (u16 value), EIFMT_BVAL (u8), EIFMT_NVAL (none): 4 bytes at most, all skipped
            p += {3: 4, 2: 3}.get(fmt, 2)
    static = secs.get(f".nv.shared.{kernel_name}", (0, 0, 0))[2]
    return {"registers": registers, "static_smem": static}


FATBIN_MAGIC = 0xBA55ED50  # the fatbinary header's u32 magic (what cudaLibraryLoadData is handed by the CuTe DSL)


def elf_extent(image: bytes, at: int = 0) -> int:
    """Bytes of the ELF64 image starting at `at`: the end of its furthest header table or section (a cubin's
    section header table is usually last)."""
    e = image[at:at + 64]
    phoff, shoff = int.from_bytes(e[0x20:0x28], "little"), int.from_bytes(e[0x28:0x30], "little")
    phentsize, phnum = int.from_bytes(e[0x36:0x38], "little"), int.from_bytes(e[0x38:0x3A], "little")
    shentsize, shnum = int.from_bytes(e[0x3A:0x3C], "little"), int.from_bytes(e[0x3C:0x3E], "little")
    end = max(phoff + phentsize * phnum, shoff + shentsize * shnum, 64)
    for i in range(shnum):
        sh = image[at + shoff + i * shentsize:at + shoff + (i + 1) * shentsize]
        if len(sh) < 0x28:
            break
        if int.from_bytes(sh[4:8], "little") != 8:  # SHT_NOBITS occupies no file bytes
            end = max(end, int.from_bytes(sh[0x18:0x20], "little") + int.from_bytes(sh[0x20:0x28], "little"))
    return end


def device_elves(image: bytes) -> list[bytes]:
    """The cubins (ELF64, e_machine EM_CUDA) in a module image: the image itself when it is one, else every one a
    fatbinary holds uncompressed (a compressed entry is not found here: cuobjdump reads those)."""
    out, at = [], image.find(b"\x7fELF")
    while at >= 0:
        if image[at + 4] == 2 and int.from_bytes(image[at + 18:at + 20], "little") == EM_CUDA:
            try:
                n = elf_extent(image, at)
            except (IndexError, ValueError):
                n = 0
            if 64 < n <= len(image) - at:
                out.append(image[at:at + n])
        at = image.find(b"\x7fELF", at + 1)
    return out


def has_function(elf: bytes, kernel_name: str) -> bool:
    """Whether the cubin holds the kernel's code (a .text.<kernel> section)."""
    try:
        return f".text.{kernel_name}" in elf_sections(elf)
    except (IndexError, ValueError):
        return False
