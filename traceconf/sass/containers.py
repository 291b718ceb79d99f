"""The outer structure of the binaries the NVIDIA tools read (ELF: cubins and host binaries; fatbins), checked
before the tools see them.

A damaged binary makes ``cuobjdump`` / ``nvdisasm`` print a message about a temporary file, print nothing, or
work on whatever the damaged tables point at; the tools also take about a second to start.  Tables that point
past the end of the file are found here in microseconds and named in the user's terms: which table, which
entry, where it points and how long the file is.  The tools still judge everything inside the sections.
"""

from __future__ import annotations

import struct

from traceconf.errors import InputError

ELF_MAGIC = b"\x7fELF"
FATBIN_MAGIC = (b"\x50\xed\x55\xba", b"\xba\x55\xed\x50")   # little-endian first: the one checked here
SHT_NULL, SHT_NOBITS = 0, 8
FATBIN_HEADER = struct.Struct("<IHHQ")        # magic, version, header size, size of the entries that follow
FATBIN_ENTRY = struct.Struct("<HHIQ")         # kind, version, header size, payload size

#: ELF layouts by class (1: 32-bit, 2: 64-bit): the header's (e_phoff, e_shoff) and the six u16 from
#: e_ehsize on; a section header's (sh_offset, sh_size); a program header's (p_offset, p_filesz).
_ELF = {
    1: {"header": 52, "offsets": ("I", 28), "counts": 40, "section": (40, 4, "II", 16), "segment": (32, "I", 4, 16)},
    2: {"header": 64, "offsets": ("Q", 32), "counts": 52, "section": (64, 4, "QQ", 24), "segment": (56, "Q", 8, 32)},
}


def check_container(data: bytes, path: str) -> None:
    """Raise an InputError at ``path`` when the ELF or fatbin tables of ``data`` point outside it."""
    if data[:4] == ELF_MAGIC:
        _check_elf(data, path)
    elif data[:4] == FATBIN_MAGIC[0]:
        _check_fatbin(data, path)


def _damaged(path: str, what: str) -> InputError:
    return InputError(f"damaged binary: {what}", path)


def _check_elf(data: bytes, path: str) -> None:
    size = len(data)
    if len(data) < 6 or data[4] not in _ELF or data[5] not in (1, 2):
        raise _damaged(path, f"ELF class {data[4] if size > 4 else '?'} / byte order "
                             f"{data[5] if size > 5 else '?'} (expected 1 or 2)")
    layout = _ELF[data[4]]
    order = "<" if data[5] == 1 else ">"
    if size < layout["header"]:
        raise _damaged(path, f"{size} bytes, shorter than an ELF header ({layout['header']})")
    kind, at = layout["offsets"]
    phoff, shoff = struct.unpack_from(order + kind * 2, data, at)
    _, phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(order + "6H", data, layout["counts"])
    section_size, type_at, section_fields, fields_at = layout["section"]
    segment_size, segment_kind, offset_at, filesz_at = layout["segment"]
    _table(path, "section header table", shoff, shnum, shentsize, section_size, size)
    _table(path, "program header table", phoff, phnum, phentsize, segment_size, size)
    if shnum and shstrndx >= shnum and shstrndx != 0xFFFF:
        raise _damaged(path, f"section-name table index {shstrndx}, but there are {shnum} sections")
    for index in range(shnum):
        entry = shoff + index * shentsize
        kind_of = struct.unpack_from(order + "I", data, entry + type_at)[0]
        offset, length = struct.unpack_from(order + section_fields, data, entry + fields_at)
        if kind_of not in (SHT_NULL, SHT_NOBITS) and offset + length > size:
            raise _damaged(path, f"section {index} ({length} bytes at offset {offset}) ends past the end of "
                                 f"the file ({size} bytes)")
    for index in range(phnum):
        entry = phoff + index * phentsize
        offset = struct.unpack_from(order + segment_kind, data, entry + offset_at)[0]
        length = struct.unpack_from(order + segment_kind, data, entry + filesz_at)[0]
        if length and offset + length > size:
            raise _damaged(path, f"segment {index} ({length} bytes at offset {offset}) ends past the end of "
                                 f"the file ({size} bytes)")


def _table(path: str, name: str, offset: int, count: int, entry_size: int, minimum: int, size: int) -> None:
    if not count:
        return
    if entry_size < minimum:
        raise _damaged(path, f"{name} entries of {entry_size} bytes (at least {minimum})")
    if offset + count * entry_size > size:
        raise _damaged(path, f"{name} ({count} entries of {entry_size} bytes at offset {offset}) ends past the "
                             f"end of the file ({size} bytes)")


def _check_fatbin(data: bytes, path: str) -> None:
    size = len(data)
    if size < FATBIN_HEADER.size:
        raise _damaged(path, f"{size} bytes, shorter than a fatbin header ({FATBIN_HEADER.size})")
    _, _, header_size, entries_size = FATBIN_HEADER.unpack_from(data)
    end = header_size + entries_size
    if header_size < FATBIN_HEADER.size or end > size:
        raise _damaged(path, f"fatbin header of {header_size} bytes announces {entries_size} bytes of entries, "
                             f"the file has {size}")
    offset, index = header_size, 0
    while offset < end:
        if offset + FATBIN_ENTRY.size > end:
            raise _damaged(path, f"fatbin entry {index} at offset {offset} is cut short")
        _, _, entry_header, payload = FATBIN_ENTRY.unpack_from(data, offset)
        if entry_header < FATBIN_ENTRY.size or offset + entry_header + payload > end:
            raise _damaged(path, f"fatbin entry {index} ({entry_header}-byte header, {payload}-byte payload at "
                                 f"offset {offset}) ends past the fatbin ({end} bytes)")
        offset += entry_header + payload
        index += 1
