"""Turn structured PTX operands into readers over a :class:`ThreadState`.

A reader is compiled once per instruction and returns ``(value, taint)``:
uint64 bit patterns (array or scalar) and the taint bits that go with them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from traceconf.emulate import taint
from traceconf.emulate.layout import SharedLayout
from traceconf.emulate.program import Slot

U64 = np.uint64
MASK64 = (1 << 64) - 1

#: Special registers whose value the emulator cannot know (SM id, clocks, timers, counters).
UNKNOWN_SPECIAL = re.compile(r"^%(smid|nsmid|gridid|clock|clock64|globaltimer(_lo|_hi)?|envreg\d+|pm\d+(_64)?|"
                             r"reserved_smem_offset_\w+|current_graph_exec)$")


@dataclass
class Context:
    """What compiling an instruction needs to know about the kernel and its launch."""

    kernel: str
    path: str | None
    layout: SharedLayout
    param_names: list[str]               # kernel parameters in order
    param_values: dict[str, int]         # those with a value
    param_bytes: dict[str, int]
    address_bits: int
    memory: object = None                # GlobalContents: the --data buffers (None: no global memory modelled)
    globals: dict = field(default_factory=dict)  # module global (__device__ variable) -> its address
    read_registers: frozenset | None = None  # register keys some instruction reads (None: not known)
    registers: frozenset = frozenset()   # register keys the program's register operands name (an address base
    #                                      among them is a register, else a symbol: PTX registers need no %)
    relevant_registers: frozenset | None = None  # registers whose values can matter (None: all of them; else
    #                                      slice.Dependence.needed_registers)
    shared_values: bool = True           # shared memory's contents can matter (the slice needs them)
    notes: list = field(default_factory=list)  # what instructions' counts rest on (the result's notes)


_SPECIAL_ROOTS = {"%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid", "%warpsize",
                  "%clusterid", "%nclusterid", "%cluster_ctaid", "%cluster_nctaid", "%cluster_ctarank",
                  "%cluster_nctarank", "%is_explicit_cluster", "%lanemask_eq", "%lanemask_le", "%lanemask_lt",
                  "%lanemask_ge", "%lanemask_gt", "%dynamic_smem_size", "%total_smem_size", "%aggr_smem_size"}


@lru_cache(maxsize=65536)
def is_special(name: str) -> bool:
    return name == "WARP_SZ" or name.split(".")[0] in _SPECIAL_ROOTS or bool(UNKNOWN_SPECIAL.match(name))


def register_key(name: str, slot: Slot) -> str:
    return name if is_special(name) else slot.scope + name


def param_symbol(name: str, slot: Slot) -> str:
    """The parameter-space symbol a name stands for in this inlined instance."""
    if name in slot.aliases:
        return slot.aliases[name]
    return slot.scope + name


def split_destinations(operand: dict) -> list[str]:
    """Register names written by a destination operand: ``%r``, ``{%r1, %r2}`` or ``%r|%p``."""
    if operand["kind"] == "vector":
        return list(operand["elements"] or [])
    name = operand.get("name") or operand.get("text") or ""
    return [part.strip() for part in name.split("|")] if "|" in name else [name]


def constant(value: int):
    bits = U64(value & MASK64)
    return lambda m: (bits, taint.ZERO)


def reader(operand: dict, slot: Slot, ctx: Context):
    """Reader of a source operand (register, immediate, symbol, negated predicate)."""
    kind = operand["kind"]
    if kind == "imm":
        return constant(int(operand["value"]))
    if kind == "float":
        if operand.get("value") is not None:
            return constant(int(operand["value"]))
        return lambda m: (U64(0), taint.FLOAT)
    if kind == "pred_not":
        inner = reader({**operand, "kind": "reg"}, slot, ctx)
        return lambda m: _negate_predicate(inner(m))
    if kind == "reg":
        name = operand["name"]
        if name.startswith("!"):
            inner = reader({**operand, "name": name[1:]}, slot, ctx)
            return lambda m: _negate_predicate(inner(m))
        if UNKNOWN_SPECIAL.match(name):
            return lambda m: (U64(0), taint.UNMODELLED)
        if is_special(name):
            return lambda m: m.special[name]
        key = slot.scope + name
        return lambda m: m.read(key)
    if kind in ("symbol", "address") and operand.get("name") is not None:
        offset = ctx.layout.offset_of(operand["name"])
        if offset is None:
            offset = ctx.globals.get(operand["name"])
        if offset is not None:
            return constant(offset + int(operand.get("value") or 0))
        return lambda m: (U64(0), taint.UNMODELLED)
    if kind in ("address",) and operand.get("name") is None:
        return constant(int(operand.get("value") or 0))
    return lambda m: (U64(0), taint.UNMODELLED)


def _negate_predicate(pair):
    value, bits = pair
    return value ^ U64(1), bits


def address_reader(operand: dict, slot: Slot, ctx: Context):
    """Reader of ``[base+offset]``: base register, shared symbol or absolute; offset added."""
    offset = int(operand.get("value") or 0)
    name = operand.get("name")
    if name is None:
        return constant(offset)
    if ctx.layout.offset_of(name) is not None:
        return constant(ctx.layout.offset_of(name) + offset)
    if name in ctx.globals:
        return constant(ctx.globals[name] + offset)
    base = reader({"kind": "reg", "name": name}, slot, ctx)
    if offset == 0:
        return base
    step = U64(offset & MASK64)
    return lambda m: _plus(base(m), step)


def _plus(pair, step):
    value, bits = pair
    return value + step, bits
