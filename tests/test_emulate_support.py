"""Helpers for the emulator tests: a module built from PTX text.

``module_from_ptx`` uses the real parser (:mod:`traceconf.ptx`).  Small
hand-written kernels keep each test about one behaviour; their instructions
are plain PTX so they read like the programs users feed the tool.
"""

from __future__ import annotations

import numpy as np

from traceconf.accesses import INACTIVE
from traceconf.emulate import Launch, emulate
from traceconf.emulate.launch import resolve_launch
from traceconf.ptx import parse_file, parse_ptx


def parse(text: str, name: str = "test.ptx"):
    return parse_ptx(text, name)


def parse_path(path):
    return parse_file(str(path))


HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"


def kernel_text(body: str, params: str = "", shared: str = "", name: str = "k", extra: str = "") -> str:
    """The PTX of a one-kernel module: ``body`` is the kernel's PTX (registers declared generously)."""
    return (HEADER + extra + f".visible .entry {name}({params})\n{{\n"
            ".reg .pred %p<16>;\n.reg .b16 %rs<16>;\n.reg .b32 %r<64>;\n.reg .b64 %rd<32>;\n.reg .f32 %f<16>;\n"
            + shared + body + "\n}\n")


def kernel_module(body: str, params: str = "", shared: str = "", name: str = "k", extra: str = ""):
    """A one-kernel module, parsed (see :func:`kernel_text`)."""
    return parse(kernel_text(body, params, shared, name, extra))


def run(module, kernel: str = "k", **launch):
    launch.setdefault("block", (32, 1, 1))
    return emulate(module, kernel, resolve_launch(Launch(**launch), module.kernel(kernel)))


def values(body: str, register: str = "%r10", **launch) -> np.ndarray:
    """Per-thread value of ``register`` after ``body``, read back as the address of a shared store."""
    module = kernel_module(body + f"\nst.shared.u32 [{register}], 0;\nret;",
                           shared=".shared .align 4 .b8 pad[4];\n")
    result = run(module, **launch)
    marker = result.accesses
    return marker.address[marker.instruction == marker.instruction.max()].reshape(-1)


def lanes_of(result, instruction_text: str, module) -> np.ndarray:
    """Addresses (executions x lanes) recorded for the instruction whose text contains ``instruction_text``."""
    rows = [r for r in module.instructions.to_pylist() if instruction_text in r["text"]]
    assert rows, f"no instruction contains {instruction_text!r}"
    ids = {r["instruction"] for r in rows}
    accesses = result.accesses
    return accesses.address[np.isin(accesses.instruction, list(ids))]


def active(addresses: np.ndarray) -> np.ndarray:
    return addresses != INACTIVE


def test_a_known_deciding_side_decides_and_or_alone_but_never_xor():
    from traceconf.emulate import taint
    x, y = np.array([0, 1, 0, 1], dtype=np.uint64), np.array([1, 1, 0, 0], dtype=np.uint64)
    x_bits = np.full(4, taint.ZERO, dtype=np.uint64)
    y_bits = np.full(4, taint.LOADED, dtype=np.uint64)
    # false AND anything, true OR anything: x alone; otherwise (and always for XOR) both sides' taint
    assert taint.of_logic("and", x, x_bits, y, y_bits).tolist() == [taint.ZERO, taint.LOADED, taint.ZERO, taint.LOADED]
    assert taint.of_logic("or", x, x_bits, y, y_bits).tolist() == [taint.LOADED, taint.ZERO, taint.LOADED, taint.ZERO]
    assert taint.of_logic("xor", x, x_bits, y, y_bits).tolist() == [taint.LOADED] * 4


def test_a_taint_is_uniform_when_one_value_stands_for_every_thread():
    from traceconf.emulate.state import is_uniform
    assert is_uniform(np.uint64(3)) and is_uniform(np.broadcast_to(np.uint64(3), (64,)))
    assert not is_uniform(np.full(64, 3, dtype=np.uint64))      # equal values, but one per thread
