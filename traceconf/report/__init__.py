"""Reports: everything between the engine's per-instruction results and what a person reads.

* :mod:`~traceconf.analyses.results` — the per-instruction results table (one row per
  kernel × device × shared-memory instruction, with the instruction's text and
  source line), the one table every other report reads;
* :mod:`~traceconf.report.writers` — JSON document, CSV text, Parquet/CSV/JSON files;
* :mod:`~traceconf.report.hotspots` — the rich hotspot table (side-by-side devices);
* :mod:`~traceconf.report.explain` / :mod:`~traceconf.report.svg` — one warp execution, lane by lane;
* :mod:`~traceconf.report.html` / :mod:`~traceconf.report.html_source` / :mod:`~traceconf.report.html_ncu` —
  the one-file HTML report page (source view with heat, pictures, suggestions, compare-ncu), styles and
  script in ``assets/``;
* :mod:`~traceconf.report.suggest` — padding / swizzle what-ifs re-run through the engine;
* :mod:`~traceconf.analyses.ncu` — Nsight Compute source-page CSV, lined up with the prediction.
"""
