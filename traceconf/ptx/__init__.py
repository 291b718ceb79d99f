"""PTX front end: grammar (``grammars/ptx.lark``) → records → KERNELS + INSTRUCTIONS tables.

>>> from traceconf.ptx import parse_file
>>> module = parse_file("k.ptx")            # doctest: +SKIP
>>> module.kernel_names()                   # doctest: +SKIP
"""

from traceconf.ptx.parse import PtxModule, parse_file, parse_ptx

__all__ = ["PtxModule", "parse_file", "parse_ptx"]
