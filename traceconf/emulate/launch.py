"""Launch configuration of one emulated kernel, and its checks against the kernel's declaration."""

from __future__ import annotations

from dataclasses import dataclass, field

from traceconf.errors import InputError


@dataclass
class Launch:
    """How the kernel is launched.

    ``params`` maps a parameter name (as spelled in the PTX) or its 0-based
    index (int or digit string) to an integer value; wider parameters (structs)
    take the little-endian bytes of the integer.  ``ctas`` limits a launch whose
    shared accesses depend on the CTA index to that many CTAs, spread evenly
    over the grid (a stated sample).  ``block`` may be None when the kernel
    declares ``.reqntid``.  ``data`` maps a pointer parameter (name or index)
    to the :class:`~traceconf.emulate.data.DataBuffer` it points to.
    """

    block: tuple[int, ...] | None = None
    grid: tuple[int, ...] = (1, 1, 1)
    params: dict = field(default_factory=dict)
    dynamic_smem: int = 0
    warp_size: int = 32
    ctas: int | None = None
    max_steps: int = 10_000_000
    data: dict = field(default_factory=dict)


def _dims(values, what: str, kernel: str) -> tuple[int, int, int]:
    values = tuple(int(v) for v in values)
    if not 1 <= len(values) <= 3 or any(v < 1 for v in values):
        raise InputError(f"kernel {kernel}: {what} must be 1 to 3 positive sizes, got {values}")
    return values + (1,) * (3 - len(values))


def resolve_block(launch: Launch, kernel_row: dict) -> tuple[int, int, int]:
    kernel = kernel_row["kernel"]
    if launch.block is not None:
        block = _dims(launch.block, "the block", kernel)
        required = kernel_row.get("reqntid")
        if required and _dims(required, ".reqntid", kernel) != block:
            raise InputError(f"kernel {kernel} requires .reqntid {tuple(required)} but the launch block is {block}")
        return block
    if kernel_row.get("reqntid"):
        return _dims(kernel_row["reqntid"], ".reqntid", kernel)
    raise InputError(f"kernel {kernel} has no .reqntid: pass the block size with --block X[,Y[,Z]]")


def resolve_grid(launch: Launch, kernel_row: dict) -> tuple[int, int, int]:
    return _dims(launch.grid, "the grid", kernel_row["kernel"])


def parameter_name(key, kernel_row: dict, option: str = "--param") -> str:
    """The PTX name of the parameter a name or 0-based index stands for; unknown keys are errors."""
    names = [p["name"] for p in kernel_row.get("params") or []]
    if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
        index = int(key)
        if index >= len(names):
            raise InputError(f"kernel {kernel_row['kernel']} has {len(names)} parameter(s); "
                             f"{option} index {index} does not exist")
        return names[index]
    if key in names:
        return key
    listing = ", ".join(names) or "none"
    raise InputError(f"kernel {kernel_row['kernel']} has no parameter {key!r} (parameters: {listing}; "
                     f"an index 0..{len(names) - 1} also works)")


def resolve_data(launch: Launch, kernel_row: dict) -> dict:
    """Parameter name -> DataBuffer of ``--data``; the parameter must be a pointer-sized one."""
    found = {}
    for key, buffer in launch.data.items():
        name = parameter_name(key, kernel_row, "--data")
        row = next(p for p in kernel_row.get("params") or [] if p["name"] == name)
        if (row.get("bytes") or 8) not in (4, 8):
            raise InputError(f"--data {key}: parameter {name} of kernel {kernel_row['kernel']} is "
                             f"{row.get('bytes')} bytes, not a pointer")
        found[name] = buffer
    return found


def resolve_params(launch: Launch, kernel_row: dict) -> dict[str, int]:
    """Parameter name -> integer value, accepting names or indices; unknown keys are errors."""
    values = {}
    for key, value in launch.params.items():
        name = parameter_name(key, kernel_row)
        try:
            values[name] = int(value, 0) if isinstance(value, str) else int(value)
        except ValueError:
            raise InputError(f"--param {key}={value!r}: the value must be an integer") from None
    return values
