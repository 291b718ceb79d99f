"""The shared-memory access kinds every stage names, in the order of their integer codes."""

from __future__ import annotations

#: Access kinds, in the order of their integer codes (see ``KIND_CODES``).
KINDS = ("ld", "st", "atom", "ldmatrix", "stmatrix", "cp_async")
KIND_CODES = {kind: code for code, kind in enumerate(KINDS)}
#: Operations of shared atomics as the hardware executes them.  ``popc_inc`` is ptxas's ATOMS.POPC.INC for an
#: ``atom.add`` of 1 whose result is unused.
ATOMIC_OPS = ("add", "popc_inc", "inc", "dec", "cas", "exch", "min", "max", "and", "or", "xor", "cas_spin")
#: Forms of cp.async (LDGSTS) the counts tell apart: ``bypass`` is cp.async.cg (LDGSTS.BYPASS, the L1 is
#: bypassed), ``bypass_zfill`` the same with a src-size operand (LDGSTS.BYPASS.ZFILL).  ``.ca`` is no operation.
COPY_OPS = ("bypass", "bypass_zfill")
#: Every operation an access can carry (ACCESSES column ``op``), in the order of their codes (0: none, or not
#: known); codes are stable: new operations are appended.
OPS = ("",) + ATOMIC_OPS + COPY_OPS
OP_CODES = {op: code for code, op in enumerate(OPS)}
#: The operations each kind can carry.
OPS_OF_KIND = {"atom": ATOMIC_OPS, "cp_async": COPY_OPS}

#: Shared-memory work that is no per-lane LSU access, so no wavefronts are counted for it: label → why.
#: (PTX and SASS opcodes map to these labels in traceconf.ptx.opcodes and traceconf.sass.opcodes.)
UNCOUNTED = {
    "tma": ("bulk/tensor asynchronous copy (TMA): the copy engine moves whole tiles, not per-lane LSU "
            "shared-memory accesses; not counted as wavefronts"),
    # Measured: Triton's wgmma matmul (tests/data/hw, tt_matmul) matches the LSU counters without these reads.
    "wgmma": ("wgmma reads its A/B operands from shared memory through matrix descriptors, on the tensor cores' "
              "path: not LSU wavefronts, not counted (not modelled)"),
}
