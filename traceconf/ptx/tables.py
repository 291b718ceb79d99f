"""Records → the KERNELS and INSTRUCTIONS Arrow tables (schemas in :mod:`traceconf.schemas`).

One pass over the module-level records collects modules and functions; the
function bodies (:mod:`traceconf.ptx.bodies`) become columns with array
operations, per distinct instruction then taken per row; everything that needs
the whole module (``.file`` tables that debug PTX emits after the code, whether
a bare name is a register, a label or a symbol, which module-scope shared
variables a function references) is resolved afterwards on arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from traceconf.errors import InputError
from traceconf.ptx.bodies import INSTRUCTION, LABEL, LOC, VARIABLE, Bodies
from traceconf.ptx.records import AddressSize, DumpLine, FileDecl, Function, Operand, Target, Variable, Version
from traceconf.ptx.registers import DeclaredRegisters
from traceconf.ptx.scopes import rename_scoped_registers
from traceconf.schemas import INSTRUCTIONS, KERNELS, OPERAND_TYPE
from traceconf.sources import toolkit_header

#: A header line that starts a new module in a ``cuobjdump -ptx`` dump.
DUMP_MODULE_START = "Fatbin ptx code:"


@dataclass
class ModuleHeader:
    """Module-level facts of one PTX module (a dump can hold several)."""

    version: str | None = None
    target: str | None = None
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
    registers: DeclaredRegisters = field(default_factory=DeclaredRegisters)
    labels: set = field(default_factory=set)

    def kind_of(self, name: str) -> str:
        if name in self.labels:
            return "label"
        return "reg" if self.registers.declares(name) else "symbol"


class TableBuilder:
    """Accumulates the records of one PTX file (one or more modules)."""

    def __init__(self, path: str, bodies: Bodies):
        self.path = path
        self.bodies = bodies
        self.modules: list[ModuleHeader] = []
        self.kernel_rows: dict[str, dict] = {}
        # one per definition, in INSTRUCTIONS order: (KERNELS row, module index, items of its body)
        self.definitions: list[tuple[dict, int, range]] = []
        self.scopes: list[_FunctionScope] = []
        self.defined_names: list[str] = []
        self.counts: list[int] = []                  # instructions per definition (known after tables())
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
            self.definitions.append((row, module_index, function.body))
            self.scopes.append(_FunctionScope(module_index))
            self.defined_names.append(name)

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

    # ------------------------------------------------------------ tables
    def tables(self) -> tuple[pa.Table, pa.Table]:
        """(KERNELS, INSTRUCTIONS)."""
        instructions = self._instructions()
        return self._kernels(), instructions

    def _body_atoms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(atom id, PTX line, definition index) of every atom of every definition, in order."""
        atoms, lines, item_starts = self.bodies.expanded()
        starts = item_starts[np.fromiter((b.start for _, _, b in self.definitions), np.int64, len(self.definitions))]
        stops = item_starts[np.fromiter((b.stop for _, _, b in self.definitions), np.int64, len(self.definitions))]
        lengths = stops - starts
        function_of = np.repeat(np.arange(len(lengths)), lengths)
        index = np.arange(int(lengths.sum())) + np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        return atoms[index], lines[index], function_of

    def _instructions(self) -> pa.Table:
        atoms, atom_lines, atom_function = self._body_atoms()
        atoms = rename_scoped_registers(self.bodies, atoms, atom_function)
        payloads = self.bodies.atoms
        kinds = np.asarray(self.bodies.kinds, dtype=np.int8)[atoms]
        is_instruction = kinds == INSTRUCTION
        rows = np.flatnonzero(is_instruction)             # atom position of every instruction
        n = len(rows)
        function_of = atom_function[rows]
        counts = np.bincount(function_of, minlength=len(self.definitions))
        self.counts = counts.tolist()
        self._declarations(atoms, kinds, atom_function)
        # Per distinct instruction atom (the statement cache shares them between lines), then taken.
        distinct, which = np.unique(atoms[rows], return_inverse=True)
        fields = [payloads[a] for a in distinct.tolist()]
        which = pa.array(which.reshape(-1), pa.int64())
        guard, guard_negated, infos, operands, text = zip(*fields) if fields else ((),) * 5
        kernel = pa.array(self.defined_names, pa.string()).take(pa.array(function_of, pa.int64()))
        ordinal = np.arange(n, dtype=np.int64)  # module-wide: ids stay unique across called .func bodies
        # Per distinct opcode (instructions share their OpcodeInfo), then per row.
        opcodes, info_of = _distinct_objects(infos)
        info_of = pa.array(info_of[which.to_numpy()], pa.int64())
        opcode = pa.array([i.opcode for i in opcodes], pa.string()).take(info_of)
        modifiers = pa.array([list(i.modifiers) for i in opcodes], pa.list_(pa.string())).take(info_of)
        type_ = pa.array([i.type for i in opcodes], pa.string()).take(info_of)
        vector = pa.array([i.vector for i in opcodes], pa.int8()).take(info_of)
        state_space, access_bytes = self._memory_columns(infos, operands)
        source_file, source_line = self._source_columns(atoms, kinds, atom_function, rows)
        labels = self._label_column(atoms, kinds, atom_function, np.cumsum(counts))
        return pa.Table.from_arrays(
            [kernel, pa.array(ordinal, pa.int32()), opcode, modifiers, state_space.take(which), type_, vector,
             access_bytes.take(which), self._operand_column(operands, which.to_numpy(), function_of),
             pa.array(guard, pa.string()).take(which), pa.array(guard_negated, pa.bool_()).take(which), labels,
             source_file, source_line, pa.array(atom_lines[rows], pa.int32()),
             pa.array(text, pa.string()).take(which)],
            schema=INSTRUCTIONS)

    def _declarations(self, atoms: np.ndarray, kinds: np.ndarray, atom_function: np.ndarray) -> None:
        """Registers, function-scope shared variables and labels of every definition."""
        payloads = self.bodies.atoms
        scopes = self.scopes
        labels = np.flatnonzero(kinds == LABEL)
        for function, atom in zip(atom_function[labels].tolist(), atoms[labels].tolist()):
            scopes[function].labels.add(payloads[atom].name)
        variables = np.flatnonzero(kinds == VARIABLE)
        for function, atom in zip(atom_function[variables].tolist(), atoms[variables].tolist()):
            record = payloads[atom]
            row, scope = self.definitions[function][0], scopes[function]
            if record.space == "reg":
                row["registers"].append({"name": record.name, "type": record.type, "count": record.count})
                scope.registers.declare(record.name, record.type, record.count)
            elif record.space == "shared":
                row["_shared"].append(_shared_var(record, "function"))

    def _label_column(self, atoms: np.ndarray, kinds: np.ndarray, atom_function: np.ndarray,
                      function_ends: np.ndarray) -> pa.Array:
        """The labels just before each instruction (labels after a body's last instruction mark nothing)."""
        payloads = self.bodies.atoms
        positions = np.flatnonzero(kinds == LABEL)
        marks = np.cumsum(kinds == INSTRUCTION)[positions]   # instructions before the label: the next one's row
        kept = marks < function_ends[atom_function[positions]]
        positions, marks = positions[kept], marks[kept]
        n = int(function_ends[-1]) if len(function_ends) else 0
        offsets = np.concatenate([[0], np.cumsum(np.bincount(marks, minlength=n)[:n])])
        names = [payloads[a].name for a in atoms[positions].tolist()]
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(names, pa.string()))

    @staticmethod
    def _memory_columns(infos, operands) -> tuple[pa.Array, pa.Array]:
        """state_space and access_bytes per distinct instruction: a memory opcode counts only
        with an address operand."""
        state_space = [None] * len(infos)
        access_bytes = [0] * len(infos)
        for i, (info, ops) in enumerate(zip(infos, operands)):
            if not info.memory or not any(op.kind == "address" for op in ops):
                continue   # cp.async.wait_group, mbarrier.pending_count ...
            state_space[i] = info.state_space
            nbytes = info.access_bytes
            if info.size_operand >= 0:
                size = ops[info.size_operand] if len(ops) > info.size_operand else None
                nbytes = size.value if size is not None and size.kind == "imm" else 0
            access_bytes[i] = nbytes
        return pa.array(state_space, pa.string()), pa.array(access_bytes, pa.int16())

    def _source_columns(self, atoms: np.ndarray, kinds: np.ndarray, atom_function: np.ndarray,
                        rows: np.ndarray) -> tuple[pa.Array, pa.Array]:
        """source_file/source_line from the last .loc before each instruction in its function
        (.file resolved now: debug PTX declares files after the code)."""
        payloads = self.bodies.atoms
        modules = np.fromiter((m for _, m, _ in self.definitions), np.int64, len(self.definitions))
        loc_index = np.flatnonzero(kinds == LOC)
        # each .loc's place as the user wrote it, and whether even that is inside the toolkit's headers (code
        # inlined through several of their functions, cp.async through cuda_pipeline's): such an instruction
        # takes the last .loc of the user's own files before it in its function
        loc_module = modules[atom_function[loc_index]]
        pairs, pair_of = np.unique(np.stack([atoms[loc_index], loc_module]), axis=1, return_inverse=True)
        pair_of = pair_of.reshape(-1)
        pair_place = [_user_place(payloads[atom], self.modules[module].files) for atom, module in pairs.T.tolist()]
        pair_header = np.fromiter((toolkit_header(self.modules[module].files.get(file))
                                   for (file, _), module in zip(pair_place, pairs[1].tolist())), bool, len(pair_place))
        place_of = [pair_place[k] for k in pair_of.tolist()]
        in_header = pair_header[pair_of] if len(loc_index) else np.zeros(0, dtype=bool)
        last = np.maximum.accumulate(np.where(kinds == LOC, np.arange(len(atoms)), -1))[rows]
        user = np.full(len(atoms), -1, dtype=np.int64)
        user[loc_index[~in_header]] = loc_index[~in_header]
        last_user = np.maximum.accumulate(user)[rows]
        header_row = np.isin(last, loc_index[in_header])
        same_function = (last_user >= 0) & (atom_function[np.maximum(last_user, 0)] == atom_function[rows])
        last = np.where(header_row & same_function, last_user, last)
        valid = (last >= 0) & (atom_function[np.maximum(last, 0)] == atom_function[rows])
        # Per distinct .loc atom, then per distinct (module, .file index).
        position = dict(zip(loc_index.tolist(), range(len(loc_index))))
        chosen, loc_of = np.unique(last[valid], return_inverse=True)
        places = [place_of[position[i]] for i in chosen.tolist()]
        loc_file = np.fromiter((f for f, _ in places), np.int64, len(places))[loc_of.reshape(-1)]
        loc_line = np.fromiter((line for _, line in places), np.int64, len(places))[loc_of.reshape(-1)]
        stride = int(loc_file.max()) + 1 if len(loc_file) else 1
        keys, key_of = np.unique(modules[atom_function[rows[valid]]] * stride + loc_file, return_inverse=True)
        paths = [self.modules[key // stride].files.get(key % stride) for key in keys.tolist()] + [None]
        file_of = np.full(len(rows), len(paths) - 1, dtype=np.int64)
        file_of[valid] = key_of.reshape(-1)
        lines = np.zeros(len(rows), dtype=np.int64)
        lines[valid] = loc_line
        source_file = pa.array(paths, pa.string()).take(pa.array(file_of, pa.int64()))
        return source_file, pa.array(lines, pa.int32(), mask=~valid)

    def _operand_column(self, operands: tuple, rows: np.ndarray, function_of: np.ndarray) -> pa.Array:
        """list<OPERAND_TYPE>: each distinct operand is converted once; a bare name is resolved
        once per (operand, function) that uses it (the same text may be a register in one
        function and a symbol in another)."""
        distinct, tuple_of = _distinct_objects(operands)
        lengths = np.fromiter(map(len, distinct), np.int64, len(distinct))
        values, value_of = _distinct_objects([op for ops in distinct for op in ops])
        # Every operand of every instruction row: its flat position among the distinct tuples.
        row_tuple = tuple_of[rows]
        row_lengths = lengths[row_tuple]
        row_offsets = np.concatenate([[0], np.cumsum(row_lengths)])
        tuple_starts = np.cumsum(lengths) - lengths
        element_row = np.repeat(np.arange(len(rows)), row_lengths)
        element_value = value_of[tuple_starts[row_tuple][element_row] + np.arange(int(row_offsets[-1]))
                                 - row_offsets[:-1][element_row]]
        element_function = function_of[element_row]
        is_name = np.fromiter((op.kind == "name" for op in values), bool, len(values))
        named = np.flatnonzero(is_name[element_value])
        if len(named):
            functions = len(self.scopes)
            keys, inverse = np.unique(element_value[named] * functions + element_function[named],
                                      return_inverse=True)
            scopes = self.scopes
            resolved = [Operand(scopes[key % functions].kind_of(values[key // functions].name),
                                *values[key // functions][1:]) for key in keys.tolist()]
            element_value = element_value.copy()
            element_value[named] = len(values) + inverse.reshape(-1)
            values = values + resolved
        self._operand_values, self._element_value, self._element_function = values, element_value, element_function
        column = pa.array(values, OPERAND_TYPE).take(pa.array(element_value, pa.int64()))
        return pa.ListArray.from_arrays(pa.array(row_offsets, pa.int32()), column)

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
        symbols = [op.name if op.kind in ("symbol", "element") or (op.kind == "address" and op.name and op.name[0] != "%")
                   else None for op in self._operand_values]
        with_symbols = np.fromiter((name is not None for name in symbols), bool, len(symbols))
        used = with_symbols[self._element_value]
        values = len(symbols)
        referenced: dict[int, set] = {}
        for key in np.unique(self._element_function[used] * values + self._element_value[used]).tolist():
            referenced.setdefault(key // values, set()).add(symbols[key % values])
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


def _user_place(loc, files: dict) -> tuple[int, int]:
    """(file index, line) of a ``.loc`` as the user wrote it: code the toolkit's headers inlined (atomicAdd's
    ``device_atomic_functions.hpp:112``) is placed at its ``inlined_at`` call, the user's line."""
    inlined = loc.call_line and toolkit_header(files.get(loc.file))
    return (loc.call_file, loc.call_line) if inlined else (loc.file, loc.line)
