"""Records → the KERNELS and INSTRUCTIONS Arrow tables (schemas in :mod:`traceconf.schemas`).

One pass over the records appends plain Python columns; everything that needs
the whole module (``.file`` tables that debug PTX emits after the code, whether
a bare name is a register, a label or a symbol, which module-scope shared
variables a function references) is resolved afterwards on arrays.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from traceconf.errors import InputError
from traceconf.ptx.records import (AddressSize, DumpLine, FileDecl, Function, Instruction, Label, Loc,
                                   Target, Variable, Version)
from traceconf.schemas import INSTRUCTIONS, KERNELS, OPERAND_TYPE

#: A header line that starts a new module in a ``cuobjdump -ptx`` dump.
DUMP_MODULE_START = "Fatbin ptx code:"
_NUMBERED = re.compile(r"(.*?)(\d+)$")


@dataclass
class ModuleHeader:
    """Module-level facts of one PTX module (a dump can hold several)."""

    version: str | None = None
    target: str | None = None
    target_options: tuple[str, ...] = ()
    address_size: int | None = None
    files: dict[int, str] = field(default_factory=dict)
    variables: list[Variable] = field(default_factory=list)
    first_line: int = 1

    @property
    def effective_address_size(self) -> int:
        """``.address_size``, else 64 for PTX >= 2 and 32 for PTX 1.x (the ISA default)."""
        if self.address_size is not None:
            return self.address_size
        if self.version is not None and int(self.version.split(".")[0]) < 2:
            return 32
        return 64


@dataclass
class _FunctionScope:
    """What a definition declares, for resolving its bare names afterwards."""

    module: int
    registers: set = field(default_factory=set)
    register_ranges: dict = field(default_factory=dict)
    labels: set = field(default_factory=set)

    def kind_of(self, name: str) -> str:
        if name in self.labels:
            return "label"
        base = name.split(".", 1)[0]
        if base in self.registers:
            return "reg"
        numbered = _NUMBERED.match(base)
        if numbered and int(numbered.group(2)) < self.register_ranges.get(numbered.group(1), 0):
            return "reg"
        return "symbol"


class TableBuilder:
    """Accumulates the records of one PTX file (one or more modules)."""

    def __init__(self, path: str):
        self.path = path
        self.modules: list[ModuleHeader] = []
        self.kernel_rows: dict[str, dict] = {}
        self.scopes: list[_FunctionScope] = []       # one per definition, in INSTRUCTIONS order
        self.defined_names: list[str] = []
        self.counts: list[int] = []
        self.records: list[Instruction] = []
        # (instruction index from which it applies, file key, source line); file key -1 = none
        self.loc_marks: list[tuple[int, int, int | None]] = []
        self.file_keys: dict[tuple[int, int], int] = {}
        # (index of the instruction it marks, label)
        self.label_marks: list[tuple[int, str]] = []
        self._new_module(1)

    # ------------------------------------------------------------ records
    def _new_module(self, line: int) -> None:
        self.modules.append(ModuleHeader(first_line=line))

    @property
    def module(self) -> ModuleHeader:
        return self.modules[-1]

    def _module_has_content(self) -> bool:
        index = len(self.modules) - 1
        return self.module.version is not None or any(r["_module"] == index for r in self.kernel_rows.values())

    def add(self, records) -> None:
        for record in records:
            kind = type(record)
            if kind is Function:
                self._function(record)
            elif kind is Variable:
                self.module.variables.append(record)
            elif kind is FileDecl:
                self.module.files[record.index] = record.path
            elif kind is Version:
                if self.module.version is not None:   # a second module without a dump header
                    self._new_module(0)
                self.module.version = record.text
            elif kind is Target:
                self.module.target = record.names[0]
                self.module.target_options = record.names[1:]
            elif kind is AddressSize:
                self.module.address_size = record.bits
            elif kind is DumpLine:
                if record.text == DUMP_MODULE_START and self._module_has_content():
                    self._new_module(record.line)

    def _function(self, function: Function) -> None:
        module_index = len(self.modules) - 1
        name = function.name
        existing = self.kernel_rows.get(name)
        if existing is not None and existing["_module"] != module_index and function.body is not None \
                and existing["_defined"]:
            # The same kernel compiled for another architecture in a cuobjdump dump.
            name = f"{name}@{self.module.target or module_index}"
            existing = self.kernel_rows.get(name)
        if existing is not None and existing["_defined"] and function.body is not None:
            raise InputError(f"function '{function.name}' is defined twice (first at line {existing['ptx_line']})",
                             self.path, function.line)
        if existing is not None and function.body is None:
            return  # a prototype of something already known
        row = self._kernel_row(function, name, module_index)
        if existing is not None:
            row["_order"] = existing["_order"]
        self.kernel_rows[name] = row
        if function.body is not None:
            self._body(name, function.body, row, module_index)

    def _kernel_row(self, function: Function, name: str, module_index: int) -> dict:
        performance = dict(function.performance)
        return {
            "kernel": name,
            "entry": function.entry,
            "visibility": function.visibility,
            "params": [p._asdict() for p in function.params],
            "returns": [p._asdict() for p in function.returns],
            "registers": [],
            "reqntid": list(performance["reqntid"]) if "reqntid" in performance else None,
            "maxntid": list(performance["maxntid"]) if "maxntid" in performance else None,
            "minnctapersm": performance["minnctapersm"][0] if performance.get("minnctapersm") else None,
            "maxnreg": performance["maxnreg"][0] if performance.get("maxnreg") else None,
            "ptx_line": function.line,
            "_module": module_index,
            "_defined": function.body is not None,
            "_shared": [],
            "_order": len(self.kernel_rows),
        }

    def _body(self, name: str, body: list, row: dict, module_index: int) -> None:
        scope = _FunctionScope(module_index)
        instructions = self.records
        append = instructions.append
        start = len(instructions)
        self.loc_marks.append((start, -1, None))      # no .loc carries over from the previous function
        labels_before = len(self.label_marks)
        for record in body:
            kind = type(record)
            if kind is Instruction:
                append(record)
            elif kind is Loc:
                key = (module_index, record.file)
                file_key = self.file_keys.get(key)
                if file_key is None:
                    file_key = self.file_keys[key] = len(self.file_keys)
                self.loc_marks.append((len(instructions), file_key, record.line))
            elif kind is Label:
                self.label_marks.append((len(instructions), record.name))
                scope.labels.add(record.name)
            elif kind is Variable:
                if record.space == "reg":
                    row["registers"].append({"name": record.name, "type": record.type, "count": record.count})
                    # `x<1>` declares x0 and a plain `x` declares x: count 1 cannot tell them apart
                    scope.register_ranges[record.name] = record.count
                    if record.count == 1:
                        scope.registers.add(record.name)
                elif record.space == "shared":
                    row["_shared"].append(_shared_var(record, "function"))
        end = len(instructions)
        while len(self.label_marks) > labels_before and self.label_marks[-1][0] == end:
            self.label_marks.pop()    # labels after the last instruction mark nothing
        self.scopes.append(scope)
        self.defined_names.append(name)
        self.counts.append(end - start)

    # ------------------------------------------------------------ tables
    def tables(self) -> tuple[pa.Table, pa.Table]:
        """(KERNELS, INSTRUCTIONS)."""
        instructions = self._instructions()
        return self._kernels(), instructions

    def _instructions(self) -> pa.Table:
        n = len(self.records)
        counts = np.asarray(self.counts, dtype=np.int64)
        function_of = np.repeat(np.arange(len(counts)), counts)
        if n:
            ptx_line, guard, guard_negated, infos, operands, text = zip(*self.records)
        else:
            ptx_line = guard = guard_negated = infos = operands = text = ()
        kernel = pa.array(np.repeat(np.asarray(self.defined_names, dtype=object), counts), pa.string())
        ordinal = np.arange(n, dtype=np.int64)  # module-wide: ids stay unique across called .func bodies
        # Opcode columns: one row per distinct opcode token (opcode_info returns shared objects).
        unique_infos, info_ids = _distinct_objects(infos)
        info_ids = pa.array(info_ids, pa.int64())
        opcode = pa.array([i.opcode for i in unique_infos], pa.string()).take(info_ids)
        modifiers = pa.array([list(i.modifiers) for i in unique_infos], pa.list_(pa.string())).take(info_ids)
        type_ = pa.array([i.type for i in unique_infos], pa.string()).take(info_ids)
        vector = pa.array([i.vector for i in unique_infos], pa.int8()).take(info_ids)
        memory = np.fromiter((i.memory for i in unique_infos), bool, len(unique_infos))
        memory_rows = np.flatnonzero(memory[info_ids.to_numpy()]) if n else np.zeros(0, np.int64)
        state_space, access_bytes = self._memory_columns(n, memory_rows, infos, operands)
        source_file, source_line = self._source_columns(n)
        label_index = np.fromiter((i for i, _ in self.label_marks), np.int64, len(self.label_marks))
        label_offsets = np.concatenate([[0], np.cumsum(np.bincount(label_index, minlength=n)[:n])])
        labels = pa.ListArray.from_arrays(pa.array(label_offsets, pa.int32()),
                                          pa.array([label for _, label in self.label_marks], pa.string()))
        return pa.Table.from_arrays(
            [kernel, pa.array(ordinal, pa.int32()), opcode, modifiers, state_space, type_, vector,
             access_bytes, self._operand_column(operands, function_of), pa.array(guard, pa.string()),
             pa.array(guard_negated, pa.bool_()), labels, source_file, source_line,
             pa.array(ptx_line, pa.int32()), pa.array(text, pa.string())],
            schema=INSTRUCTIONS)

    @staticmethod
    def _memory_columns(n: int, memory_rows: np.ndarray, infos, operands) -> tuple[pa.Array, pa.Array]:
        """state_space and access_bytes: a memory opcode counts only with an address operand."""
        state_space = [None] * n
        access_bytes = [0] * n
        for i in memory_rows.tolist():
            info, ops = infos[i], operands[i]
            if not any(op.kind == "address" for op in ops):
                continue   # cp.async.wait_group, mbarrier.pending_count ...
            state_space[i] = info.state_space
            nbytes = info.access_bytes
            if info.size_operand >= 0:
                size = ops[info.size_operand] if len(ops) > info.size_operand else None
                nbytes = size.value if size is not None and size.kind == "imm" else 0
            access_bytes[i] = nbytes
        return pa.array(state_space, pa.string()), pa.array(access_bytes, pa.int16())

    def _source_columns(self, n: int) -> tuple[pa.Array, pa.Array]:
        """source_file/source_line from the last .loc before each instruction (.file resolved now)."""
        marks = self.loc_marks
        starts = np.fromiter((m[0] for m in marks), np.int64, len(marks))
        which = np.searchsorted(starts, np.arange(n), side="right") - 1
        paths = [self.modules[module].files.get(index) for module, index in self.file_keys] + [None]
        keys = np.fromiter((m[1] for m in marks), np.int64, len(marks))
        keys[keys < 0] = len(paths) - 1
        source_file = pa.array(paths, pa.string()).take(pa.array(keys[which], pa.int64()))
        source_line = pa.array([m[2] for m in marks], pa.int32()).take(pa.array(which, pa.int64()))
        return source_file, source_line

    def _operand_column(self, operands, function_of: np.ndarray) -> pa.Array:
        """list<OPERAND_TYPE>: each distinct operand tuple is converted once; bare names are
        resolved per function (the same text may be a register in one and a symbol in another)."""
        distinct, rows = _distinct_objects(operands)
        named = np.fromiter((any(op.kind == "name" for op in ops) for ops in distinct), bool, len(distinct))
        unique = [ops for ops in distinct]
        if named.any():
            # A tuple with bare names gets one resolved copy per function that uses it.
            with_names = np.flatnonzero(named[rows])
            pairs, inverse = np.unique(np.stack([rows[with_names], function_of[with_names]]), axis=1,
                                       return_inverse=True)
            for tuple_row, function in pairs.T.tolist():
                scope = self.scopes[function]
                unique.append(tuple(op._replace(kind=scope.kind_of(op.name)) if op.kind == "name" else op
                                    for op in distinct[tuple_row]))
            rows = rows.copy()
            rows[with_names] = len(distinct) + inverse.reshape(-1)
        self._unique_operands, self._operand_rows, self._function_of = unique, rows, function_of
        lengths = np.fromiter((len(ops) for ops in unique), np.int32, len(unique))
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        values = pa.array([op for ops in unique for op in ops], OPERAND_TYPE)
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values).take(pa.array(rows, pa.int64()))

    def _kernels(self) -> pa.Table:
        self._attach_module_shared()
        rows = sorted(self.kernel_rows.values(), key=lambda r: r["_order"])
        for row in rows:
            module = self.modules[row["_module"]]
            row["ptx_version"] = module.version
            row["target"] = module.target
            row["address_size"] = module.effective_address_size
            row["shared"] = row["_shared"]
        columns = {f.name: [row[f.name] for row in rows] for f in KERNELS}
        return pa.Table.from_pydict(columns, schema=KERNELS)

    def _attach_module_shared(self) -> None:
        """Module-scope shared variables each definition references (declaration order)."""
        symbols = [{op.name for op in ops if op.kind == "symbol" or (op.kind == "address" and op.name
                                                                      and op.name[0] != "%")}
                   for ops in self._unique_operands]
        with_symbols = np.flatnonzero(np.fromiter((bool(s) for s in symbols), bool, len(symbols)))
        used = np.isin(self._operand_rows, with_symbols)
        pairs = np.unique(np.stack([self._function_of[used], self._operand_rows[used]]), axis=1)
        referenced: dict[int, set] = {}
        for function, row in pairs.T.tolist():
            referenced.setdefault(function, set()).update(symbols[row])
        for function, names in referenced.items():
            row = self.kernel_rows[self.defined_names[function]]
            module = self.modules[row["_module"]]
            module_shared = [_shared_var(v, "module") for v in module.variables
                             if v.space == "shared" and v.name in names]
            row["_shared"] = module_shared + row["_shared"]


def _distinct_objects(objects) -> tuple[list, np.ndarray]:
    """Distinct objects by identity (cached records are shared) and each element's index among them."""
    if not objects:
        return [], np.zeros(0, np.int64)
    ids = np.fromiter(map(id, objects), np.int64, len(objects))
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    return [objects[i] for i in first.tolist()], inverse.reshape(-1)


def _shared_var(variable: Variable, scope: str) -> dict:
    return {"name": variable.name, "type": variable.type, "bytes": variable.bytes, "align": variable.align,
            "extern": "extern" in variable.linkage, "scope": scope}
