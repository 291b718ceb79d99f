"""The declared type of a register, as the KERNELS table records the .reg declarations (traceconf.ptx.registers):
ranges, single names, components and inline asm's scoped blocks under their renamed names."""

from __future__ import annotations

import pytest

from test_emulate_support import kernel_module
from traceconf.ptx.registers import DeclaredRegisters

BODY = """
  .reg .b32 x<1>;
  .reg .u16 half;
  mov.u32 %r1, 1;
  { .reg .pred %r1; setp.ne.u32 %r1, x0, 0; }
  ret;"""


@pytest.mark.parametrize("name, declared", [
    ("%p0", "pred"), ("%p15", "pred"), ("%p16", None), ("%r63", "b32"), ("%rd1", "b64"), ("%r1.x", "b32"),
    ("x", "b32"), ("x0", "b32"), ("x1", None), ("half", "u16"), ("{1}%r1", "pred"), ("%r", None), ("%q1", None),
])
def test_a_register_has_the_type_its_scope_declares(name, declared):
    registers = DeclaredRegisters(kernel_module(BODY).kernel("k")["registers"])
    assert registers.type_of(name) == declared
    assert registers.declares(name) == (declared is not None)
