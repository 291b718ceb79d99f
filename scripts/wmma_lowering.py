"""Regenerate traceconf/ptx/wmma_lowering.json: what ptxas makes of every wmma.load / wmma.store.

The PTX ISA leaves the mapping of a wmma fragment to lanes unspecified; what the GPU runs (and what Nsight
counts) is what ptxas lowers the instruction to: LDSM for 16-bit A/B fragments in shared memory, LDS/STS of
32, 64 or 128 bits per lane for the rest, generic LD/ST when the instruction names no state space.  For every
shape, layout, type and space this script writes one kernel holding only that wmma instruction, assembles
them with ptxas, runs traceconf's SASS emulator on each and records the shared accesses it makes: per lowered
access its kind, bytes per lane, 8x8 matrices (LDSM) and, per lane, (row, byte): the address is
``base + row * ldm * bits / 8 + byte`` (``row`` counts strides, for either layout).

    python scripts/wmma_lowering.py [--arch sm_90]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from traceconf.emulate import Launch  # noqa: E402
from traceconf.emulate.launch import resolve_launch  # noqa: E402
from traceconf.ptx.wmma import LOWERING_PATH, TYPE_BITS, fragment_registers, lowering_key  # noqa: E402
from traceconf.programs.sass import assemble_ptx  # noqa: E402
from traceconf.sass.emulate import emulate_sass  # noqa: E402
from traceconf.schemas import KINDS  # noqa: E402

#: (shapes, A/B type, accumulator types) of every wmma family of the PTX ISA.
FAMILIES = [
    (("m16n16k16", "m32n8k16", "m8n32k16"), "f16", ("f16", "f32")),
    (("m16n16k16", "m32n8k16", "m8n32k16"), "bf16", ("f32",)),
    (("m16n16k16", "m32n8k16", "m8n32k16"), "s8", ("s32",)),
    (("m16n16k16", "m32n8k16", "m8n32k16"), "u8", ("s32",)),
    (("m16n16k8",), "tf32", ("f32",)),
    (("m8n8k4",), "f64", ("f64",)),
    (("m8n8k32",), "s4", ("s32",)),
    (("m8n8k32",), "u4", ("s32",)),
    (("m8n8k128",), "b1", ("s32",)),
]
#: Sub-byte A/B fragments exist only as row-major A and column-major B.
ONLY_LAYOUT = {("a", "s4"): "row", ("b", "s4"): "col", ("a", "u4"): "row", ("b", "u4"): "col",
               ("a", "b1"): "row", ("b", "b1"): "col"}
ROW_BYTES = 256          # the stride used here: every fragment row fits in it, so (row, byte) decode uniquely
REGISTER = {"f32": ("f", "f32"), "f64": ("fd", "f64")}


def configurations():
    for shapes, ab_type, accumulators in FAMILIES:
        for shape in shapes:
            for matrix in ("a", "b"):
                for layout in ("row", "col"):
                    if ONLY_LAYOUT.get((matrix, ab_type), layout) == layout:
                        yield matrix, layout, shape, ab_type
            for c_type in accumulators:
                for matrix in ("c", "d"):
                    for layout in ("row", "col"):
                        yield matrix, layout, shape, c_type


def kernel(name: str, matrix: str, layout: str, shape: str, type_: str, space: str) -> str:
    count = fragment_registers(matrix, shape, type_)
    prefix, reg_type = REGISTER.get(type_, ("r", "b32"))
    width = 8 if reg_type == "f64" else 4
    registers = ", ".join(f"%{prefix}{10 + i}" for i in range(count))
    lines = [f".visible .entry {name}(.param .u64 out, .param .u32 ldm)", "{",
             ".reg .b32 %r<64>;", ".reg .b64 %rd<8>;", ".reg .f32 %f<64>;", ".reg .f64 %fd<64>;",
             ".shared .align 256 .b8 buf[16384];",
             "ld.param.u64 %rd1, [out];", "ld.param.u32 %r1, [ldm];"]
    if space == "shared":
        lines.append("mov.u32 %r2, buf;")
        address, state = "[%r2]", ".shared"
    else:
        lines += ["mov.u64 %rd2, buf;", "cvta.shared.u64 %rd3, %rd2;"]
        address, state = "[%rd3]", ""
    element = "b1" if type_ == "b1" else type_
    opcode = f"wmma.{'store' if matrix == 'd' else 'load'}.{matrix}.sync.aligned.{layout}.{shape}{state}.{element}"
    if matrix == "d":
        lines += [f"ld.global.{reg_type} %{prefix}{10 + i}, [%rd1+{width * i}];" for i in range(count)]
        lines.append(f"{opcode} {address}, {{{registers}}}, %r1;")
    else:
        lines.append(f"{opcode} {{{registers}}}, {address}, %r1;")
        lines += [f"st.global.{reg_type} [%rd1+{width * i}], %{prefix}{10 + i};" for i in range(count)]
    return "\n".join(lines + ["ret;", "}"])


def lowered_accesses(module, ptx, name: str, ldm: int) -> list:
    params = [p["name"] for p in ptx.kernel(name)["params"]]
    launch = resolve_launch(Launch(block=(32, 1, 1), params={params[1]: ldm}), module.kernel(name))
    accesses = emulate_sass(module, name, launch).accesses
    out = []
    for index in range(len(accesses)):
        address = accesses.address[index]
        active = address >= 0
        rows = np.where(active, address // ROW_BYTES, -1)
        offsets = np.where(active, address % ROW_BYTES, -1)
        out.append({"kind": KINDS[int(accesses.kind[index])], "bytes": int(accesses.bytes[index]),
                    "matrices": int(accesses.matrices[index]),
                    "row": rows.tolist(), "byte": offsets.tolist(), "pc": int(accesses.instruction[index])})
    out.sort(key=lambda access: access.pop("pc"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="sm_90")
    arch = parser.parse_args().arch
    kernels, keys = [], {}
    for number, (matrix, layout, shape, type_) in enumerate(configurations()):
        for space in ("shared", "generic"):
            name = f"k{number}_{space}"
            kernels.append(kernel(name, matrix, layout, shape, type_, space))
            keys[name] = (lowering_key(matrix, layout, shape, type_, space), TYPE_BITS[type_])
    source = ".version 8.0\n.target " + arch + "\n.address_size 64\n\n" + "\n\n".join(kernels) + "\n"
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "wmma_lowering.ptx"
        path.write_text(source)
        module, ptx = assemble_ptx(path, arch)
        table = {key: lowered_accesses(module, ptx, name, ROW_BYTES * 8 // bits)
                 for name, (key, bits) in keys.items()}
    document = {"arch": arch, "row_bytes": ROW_BYTES, "lowering": table}
    LOWERING_PATH.write_text(json.dumps(document, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"{LOWERING_PATH.relative_to(REPO)}: {len(table)} wmma instructions")


if __name__ == "__main__":
    main()
