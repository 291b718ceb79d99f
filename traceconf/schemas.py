"""Arrow schemas of every table that flows between traceconf's stages.

Data flows one way::

    PTX text ──parse──▶ KERNELS + INSTRUCTIONS ──emulate──▶ ACCESSES ─┐
    trace files ─────────────────read──────────────────────▶ ACCESSES ─┤
                                                                      ▼
                            engine (per device rule set) ──▶ EXECUTIONS ──aggregate──▶ INSTRUCTION_RESULTS ──▶ reports

Each schema below is the documented contract of one stage's output.  Column
names say what a value is; the field metadata carries the one-line meaning that
``traceconf`` prints in ``--help`` texts and the README.
"""

from __future__ import annotations

import pyarrow as pa

from traceconf.kinds import KIND_CODES, KINDS, OP_CODES, OPS  # noqa: F401  (re-exported: the tables name them)


def documented_field(name: str, type_: pa.DataType, doc: str, nullable: bool = True) -> pa.Field:
    """An Arrow field carrying its one-line meaning (printed by ``describe``)."""
    return pa.field(name, type_, nullable=nullable, metadata={"doc": doc})


_f = documented_field  # short name for the tables below



# --------------------------------------------------------------------------
# Parser output
# --------------------------------------------------------------------------

#: One structured operand of a PTX instruction.
#:
#: kind      reg | imm | float | symbol | address | vector | label | pred_not | string
#: name      register name (``%r3``, ``%tid.x``), symbol or label name; for
#:           ``address`` the base register or symbol (null for ``[1024]``)
#: value     integer immediate, or the byte offset of an ``address``
#: fvalue    floating immediate (``0f3F800000`` is decoded to 1.0 and also kept in ``value`` as its bit pattern)
#: elements  register names of a ``vector`` operand (``_`` for a sink)
#: text      the operand exactly as written
OPERAND_TYPE = pa.struct(
    [
        ("kind", pa.string()),
        ("name", pa.string()),
        ("value", pa.int64()),
        ("fvalue", pa.float64()),
        ("elements", pa.list_(pa.string())),
        ("text", pa.string()),
    ]
)

INSTRUCTIONS = pa.schema(
    [
        _f("kernel", pa.string(), "name of the .entry or .func the instruction belongs to", False),
        _f("instruction", pa.int32(), "0-based ordinal of the instruction in the whole module (file order), unique across functions so that accesses made inside a called .func keep their own id", False),
        _f("opcode", pa.string(), "base opcode, e.g. ld, st, ldmatrix, cp, mad", False),
        _f("modifiers", pa.list_(pa.string()), "dotted modifiers after the opcode, in source order"),
        _f("state_space", pa.string(), "shared | global | local | param | const | generic | null when not a memory op"),
        _f("type", pa.string(), "last type modifier (b32, u16, f64, ...) or null"),
        _f("vector", pa.int8(), "vector width 1, 2 or 4 (.v2/.v4)"),
        _f("access_bytes", pa.int16(), "bytes accessed per lane (vector x type size; 16 per ldmatrix row); 0 if not a memory op"),
        _f("operands", pa.list_(OPERAND_TYPE), "structured operands, destination first"),
        _f("guard", pa.string(), "guard predicate register (@%p / @!%p) or null"),
        _f("guard_negated", pa.bool_(), "true for @!%p"),
        _f("labels", pa.list_(pa.string()), "labels that mark this instruction"),
        _f("source_file", pa.string(), "CUDA source file from the last .loc/.file before it"),
        _f("source_line", pa.int32(), "CUDA source line from the last .loc"),
        _f("ptx_line", pa.int32(), "1-based line of the instruction in the PTX file", False),
        _f("text", pa.string(), "the instruction as written, without the trailing ';'", False),
    ]
)

PARAM_TYPE = pa.struct(
    [
        ("name", pa.string()),
        ("type", pa.string()),
        ("bytes", pa.int32()),
        ("align", pa.int32()),
        ("ptr_space", pa.string()),
        ("array", pa.int32()),
    ]
)

SHARED_VAR_TYPE = pa.struct(
    [
        ("name", pa.string()),
        ("type", pa.string()),
        ("bytes", pa.int64()),
        ("align", pa.int32()),
        ("extern", pa.bool_()),
        ("scope", pa.string()),  # module | function
    ]
)

REGISTER_DECL_TYPE = pa.struct([("name", pa.string()), ("type", pa.string()), ("count", pa.int32())])

KERNELS = pa.schema(
    [
        _f("kernel", pa.string(), "function name", False),
        _f("entry", pa.bool_(), "true for .entry (a kernel), false for .func", False),
        _f("visibility", pa.string(), "visible | weak | extern | null"),
        _f("params", pa.list_(PARAM_TYPE), "parameters in order; bytes = type size x array length"),
        _f("returns", pa.list_(PARAM_TYPE), ".func return values"),
        _f("shared", pa.list_(SHARED_VAR_TYPE), "shared variables the function declares or references, in declaration order"),
        _f("registers", pa.list_(REGISTER_DECL_TYPE), ".reg declarations; count is N for %r<N>, 1 for a single register"),
        _f("reqntid", pa.list_(pa.int32()), ".reqntid x[,y[,z]] or null"),
        _f("maxntid", pa.list_(pa.int32()), ".maxntid x[,y[,z]] or null"),
        _f("minnctapersm", pa.int32(), ".minnctapersm or null"),
        _f("maxnreg", pa.int32(), ".maxnreg or null"),
        _f("ptx_version", pa.string(), ".version of the module"),
        _f("target", pa.string(), ".target of the module, e.g. sm_90"),
        _f("address_size", pa.int32(), ".address_size (32/64), 64 when absent in PTX >= 2"),
        _f("ptx_line", pa.int32(), "line of the .entry/.func header"),
    ]
)

# --------------------------------------------------------------------------
# Accesses: produced by the emulator and by every trace reader.  Also the
# canonical on-disk format (Parquet or CSV with these column names).
# --------------------------------------------------------------------------

ACCESSES = pa.schema(
    [
        _f("kernel", pa.string(), "kernel name", False),
        _f("cta", pa.int64(), "linear CTA id: x + y*gx + z*gx*gy", False),
        _f("warp", pa.int32(), "warp (wavefront) index inside the CTA", False),
        _f("execution", pa.int64(), "id of the warp-level execution; all lanes of one execution share it; unique per kernel", False),
        _f("instruction", pa.int32(), "static instruction id (PTX ordinal, or trace PC)", False),
        _f("lane", pa.int16(), "lane inside the warp", False),
        _f("address", pa.int64(), "byte address inside the shared-memory window", False),
        _f("bytes", pa.int16(), "bytes accessed by the lane: 1, 2, 4, 8 or 16 (ldmatrix/stmatrix: 16, one row)", False),
        _f("kind", pa.string(), "ld | st | atom | ldmatrix | stmatrix | cp_async", False),
        _f("matrices", pa.int8(), "ldmatrix/stmatrix matrix count (1, 2, 4); 0 otherwise", False),
        _f("op", pa.string(), "atomics: the operation as executed (add, popc_inc, inc, dec, cas, exch, min, max, "
           "and, or, xor, cas_spin: ATOMS.CAST.SPIN, every lane that executes it); cp_async: bypass (cp.async.cg, LDGSTS.BYPASS), bypass_zfill (with a src-size "
           "operand, LDGSTS.BYPASS.ZFILL); null or empty otherwise or when unknown (optional column)"),
        _f("source", pa.int64(), "cp_async: the lane's global source byte address (cp.async's source, LDGSTS's "
           "global operand); null otherwise or when unknown (optional column; a rule set may count a copy "
           "from its sources: docs/rules.md)"),
        _f("src_size", pa.int16(), "cp_async: the bytes the lane copies from its source, the rest of its destination "
           "zero-filled (cp.async's src-size; 0 where the ignore-src operand is true); null where the copy has no "
           "src-size or ignore-src operand (it copies all) or where it is unknown (optional column)"),
    ]
)
#: ACCESSES columns a reader may leave out.
OPTIONAL_ACCESS_COLUMNS = ("op", "source", "src_size")

#: What the canonical table may also say of each access's instruction (``traceconf convert`` writes them from
#: the trace's instruction descriptions; the canonical reader gives them back, so a re-analysis shows
#: ``pc 0xc70 LDS.U R136, R0``, not ``#3184 ld``).  Null where the trace recorded none.
ACCESS_INSTRUCTION_COLUMNS = pa.schema(
    [
        _f("pc", pa.int64(), "SASS PC offset inside the function"),
        _f("sass", pa.string(), "the instruction's SASS text as the trace recorded it"),
        _f("source_line", pa.int32(), "CUDA source line"),
    ]
)
#: ACCESSES with the instruction columns: what ``traceconf convert`` writes.
CONVERTED_ACCESSES = pa.schema(list(ACCESSES) + list(ACCESS_INSTRUCTION_COLUMNS))
#: Parquet key-value metadata of a converted table: JSON ``{kernel: launch facts}`` as the trace stated them
#: (grid, block, the architecture it was recorded on ...), given back by the canonical reader.
LAUNCHES_KEY = "traceconf.launches"

# --------------------------------------------------------------------------
# Engine output
# --------------------------------------------------------------------------

EXECUTIONS = pa.schema(
    [
        _f("device", pa.string(), "rule set name", False),
        _f("kernel", pa.string(), "kernel name", False),
        _f("cta", pa.int64(), "linear CTA id", False),
        _f("warp", pa.int32(), "warp index in the CTA", False),
        _f("execution", pa.int64(), "warp-level execution id", False),
        _f("instruction", pa.int32(), "static instruction id", False),
        _f("kind", pa.string(), "access kind", False),
        _f("bytes", pa.int16(), "bytes per lane", False),
        _f("active_lanes", pa.int16(), "lanes that took part", False),
        _f("wavefronts", pa.int32(), "shared-memory passes the execution needs under the rule set", False),
        _f("ideal_wavefronts", pa.int32(), "passes without bank conflicts (active lane groups)", False),
        _f("excess_wavefronts", pa.int32(), "wavefronts - ideal_wavefronts (Nsight's bank conflicts)", False),
        _f("max_ways", pa.int16(), "largest n-way conflict degree in any lane group", False),
    ]
)

INSTRUCTION_RESULTS = pa.schema(
    [
        _f("device", pa.string(), "rule set name", False),
        _f("kernel", pa.string(), "kernel name", False),
        _f("instruction", pa.int32(), "static instruction id", False),
        _f("kind", pa.string(), "access kind", False),
        _f("bytes", pa.int16(), "bytes per lane", False),
        _f("executions", pa.int64(), "warp-level executions (scaled to the whole launch)", False),
        _f("wavefronts", pa.int64(), "sum of wavefronts", False),
        _f("ideal_wavefronts", pa.int64(), "sum of ideal wavefronts", False),
        _f("excess_wavefronts", pa.int64(), "sum of excess wavefronts", False),
        _f("max_ways", pa.int32(), "largest n-way degree over all executions", False),
    ]
)


def describe(schema: pa.Schema) -> str:
    """Markdown table of a schema (used by the README and ``traceconf schema``)."""
    rows = ["| column | type | meaning |", "| --- | --- | --- |"]
    for field in schema:
        doc = (field.metadata or {}).get(b"doc", b"").decode()
        rows.append(f"| `{field.name}` | `{field.type}` | {doc} |")
    return "\n".join(rows)

# --------------------------------------------------------------------------
# What reports need to know about each static instruction, whatever the input
# --------------------------------------------------------------------------

INSTRUCTION_INFO = pa.schema(
    [
        _f("kernel", pa.string(), "kernel name", False),
        _f("instruction", pa.int32(), "static instruction id (matches the ACCESSES/results tables)", False),
        _f("text", pa.string(), "PTX instruction (or SASS text for traces)", False),
        _f("kind", pa.string(), "access kind", False),
        _f("bytes", pa.int16(), "bytes per lane", False),
        _f("ptx_line", pa.int32(), "line in the PTX file (null for traces without PTX)"),
        _f("pc", pa.int64(), "SASS program counter (traces)"),
        _f("source_file", pa.string(), "CUDA source file from .loc or the trace"),
        _f("source_line", pa.int32(), "CUDA source line"),
    ]
)


# --------------------------------------------------------------------------
# What reports write: INSTRUCTION_RESULTS joined with INSTRUCTION_INFO
# --------------------------------------------------------------------------

#: Columns of the per-instruction results table (``-o results.parquet``, ``--format csv``, the Python API).
RESULT_ROWS = pa.schema(
    [
        _f("input", pa.string(), "the analysed file", False),
        _f("kernel", pa.string(), "kernel name as the input spells it (mangled for C++: what --kernel selects)", False),
        _f("kernel_name", pa.string(), "readable kernel name (demangled, without parameters)", False),
        _f("device", pa.string(), "rule set (device) the counts were computed for", False),
        _f("instruction", pa.int32(), "static instruction id (PTX ordinal, or trace PC id)", False),
        _f("kind", pa.string(), "ld | st | atom | ldmatrix | stmatrix | cp_async", False),
        _f("width_bits", pa.int32(), "bits accessed per lane (128 per ldmatrix/stmatrix row)", False),
        _f("text", pa.string(), "PTX instruction (or SASS text for traces)", False),
        _f("ptx_line", pa.int32(), "line in the PTX file (null for traces)"),
        _f("pc", pa.int64(), "SASS program counter, relative to the kernel's first instruction (null at the PTX level)"),
        _f("source_file", pa.string(), "CUDA source file from .loc / line info"),
        _f("source_line", pa.int32(), "CUDA source line"),
        _f("source", pa.string(), "\"file:line\" or null"),
        _f("executions", pa.int64(), "warp-level executions (scaled to the whole launch)", False),
        _f("wavefronts", pa.int64(), "shared-memory wavefronts (passes)", False),
        _f("ideal_wavefronts", pa.int64(), "wavefronts without bank conflicts", False),
        _f("excess_wavefronts", pa.int64(), "wavefronts - ideal_wavefronts (Nsight's bank conflicts)", False),
        _f("max_ways", pa.int32(), "largest n-way conflict degree over all executions (0 if never executed)", False),
        _f("resolved", pa.bool_(), "false when the emulator could not compute this instruction's addresses", False),
        _f("unresolved_reason", pa.string(), "why the addresses are unknown (null when resolved)"),
        _f("model_note", pa.string(), "why Nsight's Source page may count this instruction otherwise than the "
                                      "rule set (null when the rule set reproduces it; the rule's model_note)"),
    ]
)

# --------------------------------------------------------------------------
# Trace readers' side tables
# --------------------------------------------------------------------------

#: The shared-memory instructions of one traced kernel launch (``KernelTrace.instructions``).
TRACE_INSTRUCTIONS = pa.schema(
    [
        _f("kernel", pa.string(), "kernel name (unique per launch in the trace)", False),
        _f("instruction", pa.int32(), "id used in the accesses' instruction column (the PC when the trace has PCs)", False),
        _f("pc", pa.int64(), "SASS PC offset inside the function; null when the trace records none (NVBit mem_trace)"),
        _f("sass", pa.string(), "opcode and register operands as recorded by the trace", False),
        _f("opcode", pa.string(), "SASS opcode with modifiers, e.g. LDS.U.128", False),
        _f("kind", pa.string(), "ld | st | atom | ldmatrix | stmatrix | cp_async", False),
        _f("bytes", pa.int16(), "bytes accessed per lane", False),
        _f("matrices", pa.int8(), "ldmatrix/stmatrix matrix count, 0 otherwise", False),
        _f("source_line", pa.int32(), "CUDA source line when the trace records line numbers"),
        _f("executions", pa.int64(), "warp-level executions with at least one active shared lane", False),
    ]
)

#: GPGPU-Sim's per-PTX-line counters (``gpgpu_inst_stats.txt``), one row per (PTX file, line).
GPGPUSIM_COUNTERS = ("count", "latency", "dram_traffic", "smem_bk_conflicts", "smem_warp", "gmem_access_generated",
                     "gmem_warp", "exposed_latency", "warp_divergence")
_GPGPUSIM_DOCS = {
    "count": "threads that executed the PTX line",
    "latency": "pipeline cycles of its warps",
    "dram_traffic": "DRAM requests it caused",
    "smem_bk_conflicts": "sum over its shared warp instructions of GPGPU-Sim's n-way degree (cycles)",
    "smem_warp": "its warp instructions that accessed shared memory",
    "gmem_access_generated": "global memory accesses it generated",
    "gmem_warp": "its warp instructions that accessed global memory",
    "exposed_latency": "pipeline bubbles attributed to it",
    "warp_divergence": "warp divergences at it",
}

GPGPUSIM_STATS = pa.schema(
    [pa.field("ptx_file", pa.string(), False, metadata={"doc": "PTX file GPGPU-Sim loaded (e.g. _1.ptx)"}),
     pa.field("ptx_line", pa.int32(), False, metadata={"doc": "1-based PTX line"})]
    + [pa.field(name, pa.int64(), False, metadata={"doc": _GPGPUSIM_DOCS[name]}) for name in GPGPUSIM_COUNTERS]
)


# --------------------------------------------------------------------------
# SASS listings (traceconf.sass): the machine code ptxas emitted
# --------------------------------------------------------------------------

SASS_INSTRUCTIONS = pa.schema(
    [
        _f("kernel", pa.string(), "function the instruction belongs to (mangled name)", False),
        _f("instruction", pa.int32(), "0-based ordinal of the instruction in the whole listing (static instruction id)", False),
        _f("pc", pa.int64(), "byte offset of the instruction inside its function (the /*0230*/ column)", False),
        _f("opcode", pa.string(), "mnemonic without modifiers, e.g. LDS, IMAD, ISETP", False),
        _f("modifiers", pa.list_(pa.string()), "dotted modifiers after the mnemonic, in order (LDS.U.128 -> [U, 128])"),
        _f("operands", pa.list_(pa.string()), "operands as written, destination first, without .reuse hints"),
        _f("guard", pa.string(), "guard predicate (P0, UP1, PT) or null"),
        _f("guard_negated", pa.bool_(), "true for @!P0"),
        _f("labels", pa.list_(pa.string()), "nvdisasm labels (.L_x_3) that mark this instruction"),
        _f("source_file", pa.string(), "CUDA source file from the line info (nvdisasm -g/-gi), or null"),
        _f("source_line", pa.int32(), "CUDA source line from the line info, or null"),
        _f("ptx_line", pa.int32(), "line of the PTX instruction it was compiled from (nvdisasm -gp line info), or null"),
        _f("line", pa.int32(), "1-based line of the instruction in the listing (null for nvdisasm -json)"),
        _f("text", pa.string(), "the instruction as written, guard included, without the trailing ';'", False),
    ]
)

SASS_PARAM_TYPE = pa.struct([("name", pa.string()), ("offset", pa.int32()), ("bytes", pa.int32())])

SASS_KERNELS = pa.schema(
    [
        _f("kernel", pa.string(), "function name (mangled)", False),
        _f("arch", pa.string(), "SASS architecture, e.g. sm_90"),
        _f("params", pa.list_(SASS_PARAM_TYPE), "parameters in order: name, byte offset in the parameter block, size (ELF EIATTR_KPARAM_INFO or the PTX signature); null when unknown"),
        _f("param_base", pa.int32(), "constant-bank-0 offset of the first parameter byte (0x210 on sm_90; ELF EIATTR_PARAM_CBANK) or null"),
        _f("shared_bytes", pa.int64(), "static shared memory of the function in bytes (ELF .nv.shared section), or null"),
        _f("listing_line", pa.int32(), "line of the function header in the listing"),
    ]
)

#: Every table of the pipeline by name, as ``traceconf schema`` lists them.
TABLES = {
    "instructions": INSTRUCTIONS,
    "kernels": KERNELS,
    "accesses": ACCESSES,
    "converted_accesses": CONVERTED_ACCESSES,
    "executions": EXECUTIONS,
    "instruction_results": INSTRUCTION_RESULTS,
    "instruction_info": INSTRUCTION_INFO,
    "result_rows": RESULT_ROWS,
    "trace_instructions": TRACE_INSTRUCTIONS,
    "gpgpusim_stats": GPGPUSIM_STATS,
    "sass_instructions": SASS_INSTRUCTIONS,
    "sass_kernels": SASS_KERNELS,
}
