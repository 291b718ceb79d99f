"""The contents of a buffer a pointer parameter points to (``--data NAME_OR_INDEX=SOURCE``).

SOURCE is one of

* ``FILE.npy``: a numpy array (any shape; its bytes in C order);
* ``FILE:DTYPE`` (e.g. ``keys.bin:uint16``): raw little-endian elements;
* ``random:DTYPE:COUNT[:LOW:HIGH]``: a sample input from ``numpy.random.default_rng(seed)``:
  integers in [LOW, HIGH) (default: the dtype's whole range), floats uniform in [LOW, HIGH)
  (default [0, 1)).

DTYPE is a numpy name (``uint8``, ``int32``, ``float32`` ...) or a PTX one (``u8``, ``s32``, ``f32`` ...).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from tokenize import TokenError

import numpy as np

from traceconf.errors import InputError, data_error_message, data_errors, reading
from traceconf.numbers import read_int

PTX_DTYPES = {"u8": "uint8", "s8": "int8", "b8": "uint8", "u16": "uint16", "s16": "int16", "b16": "uint16",
              "u32": "uint32", "s32": "int32", "b32": "uint32", "u64": "uint64", "s64": "int64", "b64": "uint64",
              "f16": "float16", "f32": "float32", "f64": "float64"}
#: The most elements one buffer may hold (4 Gi: more than any 32-bit index reaches).
MAX_ELEMENTS = 1 << 32
ALLOWED = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32",
           "float64")


@dataclass
class DataBuffer:
    """A buffer's elements and how to say where they came from (a sample input names its seed)."""

    array: np.ndarray
    description: str


def parse_dtype(text: str, option: str) -> np.dtype:
    name = PTX_DTYPES.get(text.strip().lower(), text.strip().lower())
    if name not in ALLOWED:
        raise InputError(f"unknown dtype {text!r} (use one of {', '.join(ALLOWED)} or u8/s32/f32 ...)",
                         file=option)
    return np.dtype(name).newbyteorder("<")


def _number(text: str, dtype: np.dtype, option: str):
    if dtype.kind != "f":
        return read_int(text, option, what="bound")
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{text!r} is not a number", file=option) from None


def _check_size(nbytes: int, max_bytes: int | None, option: str, file: str | None = None) -> None:
    """Refuse, before allocating, a buffer of more bytes than the run may hold (--memory-limit)."""
    if max_bytes is not None and nbytes > max_bytes:
        where = f" ({file})" if file else ""
        raise InputError(f"the buffer{where} needs {nbytes:,} bytes, more than the memory limit of {max_bytes:,} "
                         "(raise it with --memory-limit)", file=option)


def _random(parts: list[str], seed: int, option: str, max_bytes: int | None = None) -> DataBuffer:
    if len(parts) not in (2, 4):
        raise InputError(f"expected random:DTYPE:COUNT[:LOW:HIGH], got {':'.join(['random'] + parts)!r}",
                         file=option)
    dtype = parse_dtype(parts[0], option)
    count = read_int(parts[1], option, what="COUNT", low=1, high=MAX_ELEMENTS)
    _check_size(count * 16, max_bytes, option)          # drawn as 64-bit values, then cast
    rng = np.random.default_rng(seed)
    if dtype.kind == "f":
        low, high = (_number(parts[2], dtype, option), _number(parts[3], dtype, option)) if len(parts) == 4 \
            else (0.0, 1.0)
        largest = float(np.finfo(dtype).max)
        if not -largest <= low <= high <= largest or not np.isfinite(high - low):
            raise InputError(f"range [{low}, {high}) is empty or does not fit {dtype.name}", file=option)
        array = rng.uniform(low, high, count).astype(dtype)
    else:
        info = np.iinfo(dtype)
        low, high = (_number(parts[2], dtype, option), _number(parts[3], dtype, option)) if len(parts) == 4 \
            else (int(info.min), int(info.max) + 1)
        if not info.min <= low < high <= info.max + 1:
            raise InputError(f"range [{low}, {high}) is empty or does not fit {dtype.name}", file=option)
        array = rng.integers(low, high, count, dtype=np.int64 if dtype.kind == "i" or high <= 2**63 else np.uint64)
        array = array.astype(dtype)
    bounds = f":{parts[2]}:{parts[3]}" if len(parts) == 4 else ""
    return DataBuffer(array, f"sample input random:{dtype.name}:{count}{bounds} with --seed {seed}")


def load_source(source: str, seed: int, option: str, max_bytes: int | None = None) -> DataBuffer:
    """Read SOURCE (see the module docstring); every problem is one InputError naming the option or file.
    ``max_bytes``: the most one buffer may take (a larger one is refused before it is allocated)."""
    text = source.strip()
    if text.startswith("random:"):
        with reading(option):
            return _random(text.split(":")[1:], seed, option, max_bytes)
    if text.lower().endswith(".npy"):
        return _npy(Path(text), option, max_bytes)
    name, sep, kind = text.rpartition(":")
    if not sep or not name:
        raise InputError(f"expected FILE.npy, FILE:DTYPE or random:DTYPE:COUNT[:LOW:HIGH], got {text!r}",
                         file=option)
    dtype = parse_dtype(kind, option)
    path = Path(name)
    if not path.is_file():
        raise InputError(f"{option}: no such file", file=name)
    with reading(name):
        _check_size(path.stat().st_size, max_bytes, option, name)
        raw = path.read_bytes()
    if len(raw) % dtype.itemsize:
        raise InputError(f"{option}: {len(raw)} bytes is not a whole number of {dtype.name} elements", file=name)
    array = np.frombuffer(raw, dtype=dtype).copy()
    return DataBuffer(array, f"{name} ({dtype.name}, {array.size})")


def _npy(path: Path, option: str, max_bytes: int | None = None) -> DataBuffer:
    """A ``.npy`` file's elements in the machine's byte order: a big-endian array (``>i4``) means the same
    numbers as its little-endian twin, so it is converted, and the description says so."""
    if not path.is_file():
        raise InputError(f"{option}: no such file", file=str(path))
    _check_size(2 * path.stat().st_size, max_bytes, option, str(path))     # read, then converted or copied
    try:
        array = np.load(path, allow_pickle=False, mmap_mode=None)
    except (*data_errors(), SyntaxError, TokenError) as error:    # a damaged header is read as Python tokens
        raise InputError(f"{option}: not a readable .npy file ({data_error_message(error)})", file=str(path)) \
            from None
    if array.dtype.fields is not None or array.dtype.name not in ALLOWED:
        raise InputError(f"{option}: the array's dtype {array.dtype} cannot be kernel data (use one of "
                         f"{', '.join(ALLOWED)})", file=str(path))
    order = ""
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and sys.byteorder == "big"):
        order = ", big-endian, converted"                   # GPU memory is little-endian
        array = array.astype(array.dtype.newbyteorder("<"))
    return DataBuffer(np.ascontiguousarray(array).reshape(-1), f"{path} ({array.dtype.name}{order}, {array.size})")
