"""A Triton kernel and the arguments of one launch → the cubin Triton builds for it, without a GPU.

The launch is read as Triton's launcher reads it: the arguments go through
Triton's own binder (``create_function_from_signature`` with the backend of
the target), so every argument is typed and specialised exactly as
``fn[grid](*args)`` would on that GPU: integers become i32 or i64, ``1``
becomes a constant, values and pointers divisible by 16 get
``tt.divisibility``, floats are fp32, and constexprs are folded.  The binder
asks a pointer argument only for ``dtype`` and ``data_ptr()``: arrays (numpy,
or torch tensors on any device, ``meta`` included) are handed over as such a
stand-in.  A new allocation is 16-byte aligned on a GPU, as Triton assumes for
its mock tensors; a torch view keeps its storage offset.

The PTX parameters are the arguments Triton did not fold into constants, in
order, then the scratch pointers it appends (global and profile scratch,
null unless the kernel asks for scratch memory, which it then allocates).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from traceconf.errors import InputError

#: Pointer values for buffers without contents: distinct, allocation-aligned addresses (only global
#: addresses depend on them).
POINTER_BASE = 0x7F00_0000_0000
POINTER_SPACING = 1 << 32


@dataclass
class Pointer:
    """What Triton's binder reads of a pointer argument."""

    dtype: str
    offset_bytes: int = 0

    def data_ptr(self) -> int:
        return self.offset_bytes


@dataclass
class ArraySpec:
    """An array argument known by its element type and shape only (the command line's ``f32[1024,1024]``):
    a pointer without contents, like a ``meta`` tensor."""

    dtype: str                   # numpy name (float32, bfloat16 ...)
    shape: tuple[int, ...]


@dataclass
class CompiledLaunch:
    """One launch of a compiled Triton kernel, in the terms of a SASS analysis."""

    name: str
    hash: str                                      # Triton's kernel hash (its cache metadata's "hash")
    cubin: bytes
    ptx: str
    num_warps: int
    shared_bytes: int
    grid: tuple[int, int, int]
    params: dict[int, int]                         # PTX parameter index -> value (bits)
    data: dict[int, np.ndarray] = field(default_factory=dict)    # PTX parameter index -> buffer contents
    signature: dict[str, str] = field(default_factory=dict)
    triton_version: str = ""
    source_file: str = ""

    @property
    def block(self) -> tuple[int, int, int]:
        return (32 * self.num_warps, 1, 1)

    def facts(self) -> dict:
        return {"kernel": self.name, "grid": list(self.grid), "block": list(self.block),
                "num_warps": self.num_warps, "shared_bytes": self.shared_bytes, "signature": self.signature,
                "triton_version": self.triton_version, "source_file": self.source_file}


def triton_module():
    try:
        import triton
    except ImportError as error:
        raise InputError(f"Triton is not installed ({error}); pip install 'traceconf[triton]'") from None
    return triton


def capability(arch: str) -> int:
    """sm_90 → 90 (the Triton target of a rule set's architecture)."""
    digits = arch.removeprefix("sm_").rstrip("abf")
    if not digits.isdigit():
        raise InputError(f"device {arch}: Triton compiles for NVIDIA architectures (sm_80, sm_90 ...)")
    return int(digits)


def jit_function(fn):
    """The JITFunction of ``fn``; autotuned or heuristic wrappers need their configuration spelled out."""
    from triton.runtime.jit import JITFunction
    if isinstance(fn, JITFunction):
        return fn
    if isinstance(getattr(fn, "fn", None), JITFunction) or hasattr(fn, "configs"):
        raise InputError(f"{getattr(fn, '__name__', fn)!r} is wrapped by triton.autotune/heuristics: pass the "
                         "kernel itself (its .fn) with the chosen configuration's constexprs, num_warps and "
                         "num_stages")
    raise InputError(f"{fn!r} is not a @triton.jit function")


def _torch_tensor(value) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "data_ptr") and hasattr(value, "dtype")


def pointer_and_data(value) -> tuple[Pointer, np.ndarray | None] | None:
    """(binder stand-in, contents or None) of an array argument; None for anything else."""
    if isinstance(value, np.ndarray):
        return Pointer(value.dtype.name), np.ascontiguousarray(value)
    if isinstance(value, ArraySpec):
        return Pointer(value.dtype), None
    if _torch_tensor(value):
        stand_in = Pointer(str(value.dtype), int(value.storage_offset()) * int(value.element_size()))
        if value.device.type == "meta":
            return stand_in, None
        try:
            contents = value.detach().cpu().contiguous().numpy()
        except (TypeError, RuntimeError):           # bfloat16 and friends: numpy has no such dtype
            contents = None
        return stand_in, contents
    return None


def scalar_bits(kind: str, value) -> int:
    """A scalar parameter's bits as the launcher packs them."""
    if kind.startswith("fp") or kind.startswith("bf"):
        return struct.unpack("<I", struct.pack("<f", float(value)))[0] if kind == "fp32" else \
            struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    return int(value)


def resolve_grid(grid, bound: dict) -> tuple[int, int, int]:
    dims = grid(bound) if callable(grid) else grid
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if not 1 <= len(dims) <= 3 or any(int(d) < 1 for d in dims):
        raise InputError(f"grid must be 1 to 3 positive integers, got {dims!r}")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))        # type: ignore[return-value]


def compile_launch(fn, grid, args: tuple, options: dict, arch: str) -> CompiledLaunch:
    """Compile ``fn`` as ``fn[grid](*args, **options)`` would for ``arch`` and describe the launch."""
    import inspect

    triton = triton_module()
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    fn = jit_function(fn)
    target = GPUTarget("cuda", capability(arch), 32)
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    stand_ins, contents = [], {}
    for index, value in enumerate(args):
        found = pointer_and_data(value)
        stand_ins.append(found[0] if found else value)
        if found and found[1] is not None:
            contents[index] = found[1]
    named = {}
    for name, value in options.items():
        found = pointer_and_data(value)
        named[name] = found[0] if found else value
        if found and found[1] is not None:
            contents[fn.arg_names.index(name)] = found[1]
    # the options JITFunction.run adds before binding (a kernel declared @triton.jit(debug=True) compiles so)
    named["debug"] = named.get("debug", fn.debug) or triton.knobs.runtime.debug
    named["instrumentation_mode"] = triton.knobs.compilation.instrumentation_mode
    try:
        bound, specialization, opts = binder(*stand_ins, **named)
    except TypeError as error:          # Triton's binder is a generated function named dynamic_func
        raise InputError(f"{fn.__name__}: {str(error).replace('dynamic_func()', 'the kernel')}") from None
    dims = resolve_grid(grid, bound)
    try:
        compile_options, signature, constexprs, attrs = fn._pack_args(backend, named, bound, specialization, opts)
    except KeyError as error:
        raise InputError(f"{fn.__name__}: {error.args[0]}") from None
    compiled = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target,
                              options=compile_options.__dict__)
    params, data, ptx_index = {}, {}, 0
    for arg_index, (name, (kind, _)) in enumerate(zip(fn.arg_names, specialization)):
        if kind == "constexpr":
            continue
        if kind.startswith("*"):
            if arg_index in contents:
                data[ptx_index] = contents[arg_index]
            else:
                params[ptx_index] = POINTER_BASE + ptx_index * POINTER_SPACING
        else:
            params[ptx_index] = scalar_bits(kind, bound[name])
        ptx_index += 1
    metadata = compiled.metadata
    for offset, size in enumerate((metadata.global_scratch_size, metadata.profile_scratch_size)):
        params[ptx_index + offset] = POINTER_BASE - (offset + 1) * POINTER_SPACING if size else 0
    return CompiledLaunch(name=metadata.name, hash=metadata.hash, cubin=compiled.asm["cubin"], ptx=compiled.asm["ptx"],
                          num_warps=metadata.num_warps, shared_bytes=metadata.shared,
                          grid=dims, params=params, data=data, signature=signature,
                          triton_version=triton.__version__, source_file=inspect.getsourcefile(fn.fn) or "")
