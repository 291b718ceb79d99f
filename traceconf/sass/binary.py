"""CUDA binaries (cubin, fatbin, executables, shared libraries) and ptxas output → a parsed SASS module.

The listing comes from ``nvdisasm``/``cuobjdump`` (:mod:`.toolchain`); the
facts a listing does not print come from ``cuobjdump -elf``: each kernel's
parameters (``EIATTR_KPARAM_INFO``: ordinal, offset, size), where the
parameter block starts in constant bank 0 (``EIATTR_PARAM_CBANK``) and its
static shared memory (the size of its ``.nv.shared.KERNEL`` section) and the contents of its constant banks
other than 0 (``.nv.constant2.KERNEL``: the jump tables of ``BRX``/``BRXU`` and the function-pointer tables of
indirect ``CALL``; ``.nv.constant3``: ``__constant__`` data).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from traceconf.errors import InputError
from traceconf.sass import toolchain
from traceconf.sass.listing import SassModule, parse_text
from traceconf.schemas import SASS_KERNELS

_SECTION_ROW = re.compile(r"^\s*[0-9a-f]+\s+[0-9a-f]+\s+(?P<size>[0-9a-f]+)\s+.*\s(?P<name>\.nv\.shared\.\S+)\s*$",
                          re.M)
_INFO_SECTION = re.compile(r"^\.nv\.info\.(?P<kernel>\S+)\s*$", re.M)
_KPARAM = re.compile(r"Ordinal\s*:\s*(0x[0-9a-f]+)\s+Offset\s*:\s*(0x[0-9a-f]+)\s+Size\s*:\s*(0x[0-9a-f]+)")
_CONSTANT_SECTION = re.compile(r"^\.nv\.constant(?P<bank>[1-9]\d*)(?:\.(?P<kernel>\S+))?[ \t]*\n"
                               r"(?P<words>(?:[ \t]*0x[0-9a-f]+)+(?:[ \t]*\n(?:[ \t]*0x[0-9a-f]+)+)*)", re.M)
_PARAM_CBANK = re.compile(r"EIATTR_PARAM_CBANK\s+Format:\s*\S+\s+Value:\s*0x[0-9a-f]+\s+(0x[0-9a-f]+)")
#: A section header row: index, size and name (``cuobjdump -elf``'s section table).
_SECTION = re.compile(r"^\s*(?P<index>[0-9a-f]+)\s+[0-9a-f]+\s+(?P<size>[0-9a-f]+)\s+\d+\s+\d+\s+\w+\s+.*\s"
                      r"(?P<name>\.\S+)\s*$", re.M)
#: A data object of the symbol table: offset in its section, size, section index, name.
_OBJECT = re.compile(r"^\s*0x[0-9a-f]+\s+(?P<value>0x[0-9a-f]+|0)\s+(?P<size>0x[0-9a-f]+|0)\s+OBJECT\s+\S+\s+\S+\s+\S+"
                     r"\s+(?P<section>0x[0-9a-f]+|0)\s+(?P<name>\S+)\s*$", re.M)
_GLOBAL_INIT = re.compile(r"^\.nv\.global\.init[ \t]*\n(?P<words>(?:[ \t]*0x[0-9a-f]+)+(?:[ \t]*\n(?:[ \t]*0x[0-9a-f]+)+)*)",
                          re.M)
#: The relocations of a constant bank: ``OFFSET SYMBOL R_CUDA_64 ADDEND`` rows (the loader writes the symbol's
#: address there: how SASS finds a ``__device__`` variable, ``LDC.64 R8, c[0x4][RZ]``).
_CONSTANT_RELOCATIONS = re.compile(r"^\.section \.rela\.nv\.constant(?P<bank>[1-9]\d*)(?:\.(?P<kernel>\S+))?\s+RELA\s*\n"
                                   r"(?P<rows>(?:0x[0-9a-f]+\s+\S+\s+R_CUDA_\w+\s+0x[0-9a-f]+\s*\n)+)", re.M)
_INIT_RELOCATIONS = re.compile(r"^\.section \.rela\.nv\.global\.init\s+RELA\s*\n((?:0x[0-9a-f]+\s+\S+\s+R_CUDA_\w+"
                               r"\s+0x[0-9a-f]+\s*\n)*)", re.M)
_RELOCATION = re.compile(r"(0x[0-9a-f]+)\s+(\S+)\s+R_CUDA_(64|32)\s+(0x[0-9a-f]+)")


@dataclass
class ElfFacts:
    params: dict[str, list[dict]] = field(default_factory=dict)     # kernel -> [{"name", "offset", "bytes"}]
    param_base: dict[str, int] = field(default_factory=dict)
    shared_bytes: dict[str, int] = field(default_factory=dict)
    constants: dict[str, dict[int, bytes]] = field(default_factory=dict)   # kernel ("" all) -> bank -> bytes
    globals: list[dict] = field(default_factory=list)   # module globals: name, bytes, init (None: zeros)
    relocations: dict[str, dict[int, list]] = field(default_factory=dict)  # kernel -> bank -> [(offset, symbol,
    #                                                                        addend, bytes)]


def elf_facts(elf: str) -> ElfFacts:
    """Parameters, parameter base, static shared size and SASS→PTX lines from ``cuobjdump -elf`` text."""
    facts = ElfFacts()
    for match in _SECTION_ROW.finditer(elf):
        name = match.group("name")[len(".nv.shared."):]
        facts.shared_bytes[name] = int(match.group("size"), 16)
    for match in _CONSTANT_SECTION.finditer(elf):
        words = [int(word, 16) for word in match.group("words").split()]
        facts.constants.setdefault(match.group("kernel") or "", {})[int(match.group("bank"))] = \
            b"".join(word.to_bytes(4, "little") for word in words)
    facts.globals = _module_globals(elf)
    for match in _CONSTANT_RELOCATIONS.finditer(elf):
        facts.relocations.setdefault(match.group("kernel") or "", {})[int(match.group("bank"))] = [
            (int(offset, 16), symbol, int(addend, 16), int(bits) // 8)
            for offset, symbol, bits, addend in _RELOCATION.findall(match.group("rows"))]
    sections = list(_INFO_SECTION.finditer(elf))
    for index, section in enumerate(sections):
        end = sections[index + 1].start() if index + 1 < len(sections) else len(elf)
        body = elf[section.end():end]
        body = body.split("\n\n\n", 1)[0]
        kernel = section.group("kernel")
        params = sorted((int(o, 16), int(off, 16), int(size, 16)) for o, off, size in _KPARAM.findall(body))
        if params:
            facts.params[kernel] = [{"name": f"param_{ordinal}", "offset": offset, "bytes": size}
                                    for ordinal, offset, size in params]
        cbank = _PARAM_CBANK.search(body)
        if cbank:
            facts.param_base[kernel] = int(cbank.group(1), 16) & 0xFFFF
    return facts


def _module_globals(elf: str) -> list[dict]:
    """The objects of ``.nv.global`` (zero-initialised) and ``.nv.global.init`` (initialised: its bytes)."""
    sections = {int(m.group("index"), 16): m.group("name") for m in _SECTION.finditer(elf)}
    init = _GLOBAL_INIT.search(elf)
    relocated = {int(offset, 16) for rows in _INIT_RELOCATIONS.findall(elf) for offset in re.findall(
        r"^(0x[0-9a-f]+)\s", rows, re.M)}
    data = b"".join(int(word, 16).to_bytes(4, "little") for word in init.group("words").split()) if init else b""
    found = []
    for match in _OBJECT.finditer(elf):
        section = sections.get(int(match.group("section"), 16))
        if section not in (".nv.global", ".nv.global.init"):
            continue
        start, size = int(match.group("value"), 16), int(match.group("size"), 16)
        initialised = section == ".nv.global.init"
        found.append({"name": match.group("name"), "bytes": size,
                      "init": data[start:start + size].ljust(size, b"\0") if initialised else None,
                      # an address the loader writes into it (.rela.nv.global.init): not known here
                      "unknown": initialised and any(start <= offset < start + size for offset in relocated)})
    return found


def with_elf_facts(module: SassModule, facts: ElfFacts) -> SassModule:
    rows = module.kernels.to_pylist()
    for row in rows:
        name = row["kernel"]
        if row["params"] is None and name in facts.params:
            row["params"] = facts.params[name]
        if row["param_base"] is None and name in facts.param_base:
            row["param_base"] = facts.param_base[name]
        if row["shared_bytes"] is None and name in facts.shared_bytes:
            row["shared_bytes"] = facts.shared_bytes[name]
    module.kernels = pa.Table.from_pylist(rows, schema=SASS_KERNELS)
    module.constants = facts.constants
    module.globals = facts.globals
    module.relocations = facts.relocations
    return module


def with_ptx_signature(module: SassModule, ptx_module) -> SassModule:
    """Parameter names and offsets from the PTX the SASS was assembled from (natural alignment, in order)."""
    rows = module.kernels.to_pylist()
    known = set(ptx_module.kernel_names())
    for row in rows:
        if row["kernel"] not in known:
            continue
        offset, params = 0, []
        for param in ptx_module.kernel(row["kernel"]).get("params") or []:
            size = int(param.get("bytes") or 8)
            align = int(param.get("align") or min(size, 8)) or 1
            offset = -(-offset // align) * align
            params.append({"name": param["name"], "offset": offset, "bytes": size})
            offset += size
        row["params"] = params
    module.kernels = pa.Table.from_pylist(rows, schema=SASS_KERNELS)
    return module


def load_binary(path: str | Path) -> SassModule:
    """Disassemble a cubin / fatbin / host binary with the found tools and parse the listing."""
    path = str(path)
    data = Path(path).read_bytes()
    listing, elf = toolchain.disassemble(data, path)
    if not listing.strip() or "Function" not in listing and ".text." not in listing:
        raise InputError("the binary holds no SASS (no embedded cubin for any architecture)", path)
    module = parse_text(listing, path)
    return with_elf_facts(module, elf_facts(elf))
