"""Static SIMT emulation of PTX: every shared-memory access of every warp of a launch, without a GPU.

``emulate(module, kernel, launch)`` links the kernel (``.func`` bodies
inlined, :mod:`.program`), lays out its shared variables (:mod:`.layout`),
compiles each instruction once into a numpy closure (:mod:`.alu`,
:mod:`.memory`, :mod:`.warp`) and runs all threads of a chunk of CTAs
together (:mod:`.simt`), tracking where every value came from
(:mod:`.taint`).  :mod:`.driver` decides which CTAs must run and how the
counts scale to the whole launch.
"""


__all__ = ["EmulationResult", "Launch", "emulate"]


def __getattr__(name: str):
    # imported on first use: a command that only reads a launch option (the CLI at start-up) does not pay for
    # the emulator's modules
    if name in ("EmulationResult", "emulate"):
        from traceconf.emulate import driver
        return getattr(driver, name)
    if name == "Launch":
        from traceconf.emulate.launch import Launch
        return Launch
    raise AttributeError(f"module 'traceconf.emulate' has no attribute {name!r}")
