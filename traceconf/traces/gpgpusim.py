"""GPGPU-Sim's per-PTX-line statistics file (``gpgpu_inst_stats.txt``).

Written by ``ptx_stats::ptx_file_line_stats_write_file`` (src/cuda-sim/ptx-stats.cc)
when ``-enable_ptx_file_line_stats 1`` (the default)::

    kernel line : count latency dram_traffic smem_bk_conflicts smem_warp gmem_access_generated gmem_warp exposed_latency warp_divergence
    _1.ptx 57 : 4096 0 0 64 32 0 0 0 0

The first field is the PTX *file* (despite the header's "kernel"), the second
the PTX line.  ``smem_bk_conflicts`` sums, over the warp instructions of that
line, GPGPU-Sim's n-way degree (max distinct 4-byte words in one bank, summed
over ``-gpgpu_shmem_warp_parts``); ``smem_warp`` counts those warp instructions,
so ``smem_bk_conflicts / smem_warp`` is the mean n-way degree.  ``count`` counts
threads, not warps.  It is a summary, not a trace: the lead shows it beside the
prediction for the same PTX.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa

from traceconf.errors import InputError
from traceconf.numbers import INT32_MAX, INT64_MAX, read_int
from traceconf.schemas import GPGPUSIM_COUNTERS, GPGPUSIM_STATS
from traceconf.traces.source import LineBlocks


_HEADER = "kernel line : " + " ".join(GPGPUSIM_COUNTERS)
_ROW = re.compile(r"(?P<file>.+?) (?P<line>\d+) : (?P<values>\d+(?: \d+){%d})\s*" % (len(GPGPUSIM_COUNTERS) - 1))


def read_gpgpusim_stats(path: str | Path) -> pa.Table:
    """The rows of a ``gpgpu_inst_stats.txt`` as a :data:`GPGPUSIM_STATS` table, sorted by file and line."""
    columns: dict[str, list] = {name: [] for name in GPGPUSIM_STATS.names}
    with LineBlocks(path) as blocks:
        header = blocks.readline()
        if header is None or header.decode("utf-8", "replace").strip() != _HEADER:
            raise InputError(f"expected the header line {_HEADER!r}", str(path), 1, 1,
                             None if header is None else header.decode("utf-8", "replace"))
        while (raw := blocks.readline()) is not None:
            text = raw.decode("utf-8", "replace")
            if not text.strip():
                continue
            match = _ROW.fullmatch(text.strip())
            if match is None:
                raise InputError("expected 'PTXFILE LINE : ' and 9 counters", str(path), blocks.line, 1, text)
            columns["ptx_file"].append(match["file"])
            columns["ptx_line"].append(read_int(match["line"], str(path), what="PTX line", high=INT32_MAX,
                                                line=blocks.line, column=match.start("line") + 1))
            for name, value in zip(GPGPUSIM_COUNTERS, match["values"].split()):
                columns[name].append(read_int(value, str(path), what=name, high=INT64_MAX, line=blocks.line))
    table = pa.table(columns, schema=GPGPUSIM_STATS)
    return table.sort_by([("ptx_file", "ascending"), ("ptx_line", "ascending")])
