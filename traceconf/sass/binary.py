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


@dataclass
class ElfFacts:
    params: dict[str, list[dict]] = field(default_factory=dict)     # kernel -> [{"name", "offset", "bytes"}]
    param_base: dict[str, int] = field(default_factory=dict)
    shared_bytes: dict[str, int] = field(default_factory=dict)
    constants: dict[str, dict[int, bytes]] = field(default_factory=dict)   # kernel ("" all) -> bank -> bytes


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
