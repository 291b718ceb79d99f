"""What memory holds: shared memory per CTA, and the global buffers the user gave with ``--data``.

Both keep bytes together with a per-byte taint, so a value read back is
exactly as known as the value that was stored (a shared word written from
``%ctaid`` still says it depends on the CTA; a never-written word is
unknown).  Byte taints are the low eight taint bits; a missing-parameter
bit is kept as "not modelled" (the value is still unknown, the parameter's
name is lost).

Several lanes of one instruction storing different values to the same bytes
leave them unknown: the hardware keeps one of them, and which is not
specified.  Across warps and CTAs the emulator's schedule decides (warps in
order, CTAs in launch order); kernels that race across warps without a
barrier, or across CTAs (spin locks), get that one schedule's values.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from traceconf.emulate import taint
from traceconf.emulate.state import extent

U64 = np.uint64
BYTE_TAINT = np.uint64(0xFF)
#: Bits kept per byte: everything below the missing-parameter bits.
_KEPT = int(taint.LOADED | taint.FLOAT | taint.UNMODELLED | taint.CTA | taint.SHARED_WINDOW | taint.BRANCH)
_UNSET = np.uint8(int(taint.UNMODELLED))
#: Bits a byte does not keep as they are: missing parameters, the CTA-class refinements.
_REFINED = int(taint.PARAMS | taint.CTA_DECIDED | taint.CTA_OPAQUE)


def compress(bits: np.ndarray) -> np.ndarray:
    """Per-byte form of value taints (missing parameters become 'not modelled'; the CTA-class refinements
    become plain CTA dependence, which a load turns opaque while classes are sought: see emulate/classes)."""
    bits = np.asarray(bits, dtype=np.uint64)
    if not bits.ndim:
        return np.asarray(compress_one(int(bits)), dtype=np.uint8)
    if not int(np.bitwise_or.reduce(bits, axis=None)) & _REFINED:
        return (bits & U64(_KEPT)).astype(np.uint8)      # nothing to turn into 'not modelled' or plain CTA
    lost = (bits & taint.PARAMS) != 0
    cta = (bits & taint.CTA_ANY) != 0
    return ((bits & U64(_KEPT)) | lost * taint.UNMODELLED | cta * taint.CTA).astype(np.uint8)


@functools.lru_cache(maxsize=1024)
def compress_one(bits: int) -> int:
    """:func:`compress` of one taint, as a Python int (a store of one taint for every lane, the common case)."""
    return (bits & _KEPT) | (int(taint.UNMODELLED) if bits & int(taint.PARAMS) else 0) | \
        (int(taint.CTA) if bits & int(taint.CTA_ANY) else 0)


def one_byte_taint(bits) -> int | None:
    """The byte taint (:func:`compress`) every value of ``bits`` stores, or None where they differ."""
    if type(bits) is not np.ndarray or not bits.ndim:
        return compress_one(int(bits))
    if not len(bits):
        return 0
    low = int(bits.min())
    return compress_one(low) if low == int(bits.max()) else None


_WORD = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_SHIFT = {1: 0, 2: 1, 4: 2, 8: 3}
_SPREAD = {1: 0x1, 2: 0x0101, 4: 0x0101_0101, 8: 0x0101_0101_0101_0101}


def _aligned(data: np.ndarray, start: np.ndarray, size: int) -> bool:
    """Whether the accesses can go through a word view (the common case: naturally aligned elements)."""
    return size in _WORD and len(data) % 8 == 0 and not (start & (size - 1)).any()


def _fold(bits: np.ndarray, size: int) -> np.ndarray:
    """OR of the ``size`` byte taints packed in each word."""
    bits = bits.astype(np.uint64)
    for shift in (32, 16, 8)[3 - (size.bit_length() - 1):] if size > 1 else ():
        bits = bits | (bits >> U64(shift))
    return bits & BYTE_TAINT


def gather(data: np.ndarray, byte_taint: np.ndarray, start: np.ndarray, size: int, one_taint: bool = False
           ) -> tuple[np.ndarray, np.ndarray]:
    """Little-endian values of ``size`` bytes at ``start`` (int64 byte indices) and the OR of their taints
    (``one_taint``: one scalar where every word read has the same byte taints, the common case)."""
    if _aligned(data, start, size):
        return gather_words(data, byte_taint, start >> _SHIFT[size] if size > 1 else start, size, one_taint)
    index = start[:, None] + np.arange(size, dtype=np.int64)
    raw = np.zeros((len(start), 8), dtype=np.uint8)
    raw[:, :size] = data[index]
    bits = np.bitwise_or.reduce(byte_taint[index], axis=1).astype(np.uint64)
    return raw.view("<u8").reshape(-1), bits


def gather_words(data: np.ndarray, byte_taint: np.ndarray, word: np.ndarray, size: int, one_taint: bool = False,
                 inside: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """:func:`gather` of the ``size``-byte words ``word`` (indices in that word view; ``inside``: known to lie
    inside it, see :func:`_packed`)."""
    values, taints = _packed(data, byte_taint, word, size, inside)
    return values, _folded(taints, size) if one_taint else _fold(taints, size)


def _packed(data: np.ndarray, byte_taint: np.ndarray, word: np.ndarray, size: int, inside: bool = False
            ) -> tuple[np.ndarray, np.ndarray]:
    """The ``size``-byte words ``word`` as uint64 values, and their byte taints packed as they lie.  ``inside``:
    every index is known to lie in the word view (SharedContents.word_index checked it), so take's "wrap" mode,
    which then never wraps, gathers without its per-index bounds check (a quarter less CPU)."""
    kind = _WORD[size]
    mode = "wrap" if inside else "raise"
    # np.take: the gather fancy indexing does, without its general index machinery (a fifth less CPU here)
    return np.take(data.view(kind), word, mode=mode).astype(np.uint64), np.take(byte_taint.view(kind), word, mode=mode)


def _folded(taints: np.ndarray, size: int):
    """:func:`_fold` of the packed byte taints ``taints``: one scalar where they are all the same."""
    if len(taints):
        low = taints.min()
        if low == taints.max():
            return U64(_fold_one(int(low), size))
    return _fold(taints, size)


def _fold_one(packed: int, size: int) -> int:
    """:func:`_fold` of one word's byte taints."""
    for shift in (32, 16, 8)[3 - (size.bit_length() - 1):] if size > 1 else ():
        packed |= packed >> shift
    return packed & 0xFF


def scatter(data: np.ndarray, byte_taint: np.ndarray, start: np.ndarray, size: int, values: np.ndarray,
            bits: np.ndarray) -> None:
    """Store ``values`` (uint64, little-endian ``size`` bytes) at ``start``, thread order; collisions between
    different values leave the bytes unknown.  ``bits``: per value, or one for all."""
    if not len(start):
        return
    if _aligned(data, start, size):
        scatter_words(data, byte_taint, start >> _SHIFT[size] if size > 1 else start, size, values, bits)
        return
    index = start[:, None] + np.arange(size, dtype=np.int64)
    raw = np.ascontiguousarray(values, dtype=np.uint64).view(np.uint8).reshape(-1, 8)[:, :size]
    data[index] = raw
    byte_taint[index] = np.broadcast_to(compress(bits)[..., None], index.shape)
    lost = (data[index] != raw).any(axis=1)
    if lost.any():
        byte_taint[index[lost]] |= _UNSET


def scatter_words(data: np.ndarray, byte_taint: np.ndarray, word: np.ndarray, size: int, values, bits) -> None:
    """:func:`scatter` to the ``size``-byte words ``word`` (indices in that word view)."""
    if not len(word):
        return
    kind = _WORD[size]
    words = data.view(kind)
    stored = np.asarray(values, dtype=np.uint64).astype(kind)
    words[word] = stored
    taints = byte_taint.view(kind)
    one = one_byte_taint(bits)
    if one is not None:         # one taint for every value: no per-lane taint to build
        taints[word] = kind(one * _SPREAD[size])
    else:
        taints[word] = compress(bits).astype(kind) * kind(_SPREAD[size])
    if len(word) > 1 and not (word[1:] > word[:-1]).all():      # (rising words cannot collide: no look back)
        lost = words[word] != stored
        if lost.any():
            taints[word[lost]] |= kind(_SPREAD[size] * int(_UNSET))


class SharedContents:
    """Shared memory of the CTAs of one chunk: ``bytes_per_cta`` bytes each, flat."""

    def __init__(self, ctas: int, bytes_per_cta: int):
        self.bytes_per_cta = bytes_per_cta
        total = -(-ctas * bytes_per_cta // 8) * 8          # whole 64-bit words: word views always fit
        self.data = np.zeros(total, dtype=np.uint8)
        self.taint = np.full(total, _UNSET, dtype=np.uint8)

    def word_index(self, cta_base: np.ndarray, offsets: np.ndarray, size: int,
                   extent_of: Callable[[np.ndarray], tuple[int, int]] = extent) -> np.ndarray | None:
        """Per thread, the index of its access in the ``size``-byte word view, when every thread's (running or
        not) lies inside its CTA's shared memory, aligned (the common case: then :meth:`load_words` and
        :meth:`store_words` need no per-lane check); else None.  ``extent_of(offsets)``: their smallest and
        largest (a machine remembers it per array: ThreadState.extent)."""
        if size not in _WORD or self.bytes_per_cta % size or not len(offsets):
            return None
        low, high = extent_of(offsets)
        if low < 0 or high > self.bytes_per_cta - size or \
                int(np.bitwise_or.reduce(offsets)) & (size - 1):
            return None
        word = cta_base + offsets
        if size > 1:
            word >>= _SHIFT[size]       # in place: no second array
        return word

    def load_words(self, word: np.ndarray, size: int, chosen=None):
        """:meth:`load_lanes` at a :meth:`word_index`: the values and the taint (one where all agree).  ``chosen``:
        the taint is that of the threads ``chosen()`` gives (the others may read any word of their CTA): one where
        theirs agree, else theirs with 0 elsewhere."""
        if chosen is None:
            return gather_words(self.data, self.taint, word, size, one_taint=True, inside=True)
        values, taints = _packed(self.data, self.taint, word, size, inside=True)
        if len(taints) and taints.min() == taints.max():
            return values, U64(_fold_one(int(taints[0]), size))
        threads = chosen()          # the threads not running read other taints
        running = _folded(taints[threads], size)
        if not np.ndim(running):
            return values, running
        bits = np.zeros(len(word), dtype=np.uint64)
        bits[threads] = running
        return values, bits

    def store_words(self, word: np.ndarray, size: int, values, bits, chosen: np.ndarray | None = None) -> None:
        """:meth:`store` at a :meth:`word_index` (``chosen`` None: every thread stores), or at the words ``word`` of
        the threads ``chosen``; ``values`` and ``bits`` per thread or one for all."""
        if chosen is not None:
            values = values[chosen] if np.ndim(values) else values
            bits = bits[chosen] if np.ndim(bits) else bits
        scatter_words(self.data, self.taint, word, size, values, bits)

    def place(self, cta_index: np.ndarray, offsets: np.ndarray, size: int, lanes: np.ndarray):
        """(threads, byte index) of the lanes whose access lies inside their CTA's shared memory."""
        chosen = np.flatnonzero(lanes)
        offset = offsets[chosen]
        inside = (offset >= 0) & (offset + size <= self.bytes_per_cta)
        if not inside.all():
            chosen, offset = chosen[inside], offset[inside]
        return chosen, cta_index[chosen] * self.bytes_per_cta + offset

    def load_every(self, cta_base: np.ndarray, offsets: np.ndarray, size: int):
        """Values and taints for every thread when each one's aligned access lies inside its CTA's shared
        memory (the common case, with no per-lane selection), else None."""
        if int(offsets.min()) < 0 or int(offsets.max()) + size > self.bytes_per_cta:
            return None
        start = cta_base + offsets
        if not _aligned(self.data, start, size):
            return None
        return gather(self.data, self.taint, start, size)

    def load_lanes(self, cta_base: np.ndarray, offsets: np.ndarray, size: int, lanes: np.ndarray):
        """Values and taints per thread, as :meth:`load` gives them at ``lanes`` (anything elsewhere): read for
        every thread at once, no per-lane selection; the taint may be one scalar for all (gather)."""
        if int(offsets.min()) >= 0 and int(offsets.max()) <= self.bytes_per_cta - size and \
                (size not in _WORD or not (offsets & (size - 1)).any()):
            return gather(self.data, self.taint, cta_base + offsets, size, one_taint=True)   # all inside
        # threads outside, or not running (their address register holds anything, maybe a misaligned value that
        # would send every thread through gather's byte-wise path), read what the first lane reads: a product,
        # not np.where, whose per-lane branch costs on an irregular mask
        inside = (offsets >= 0) & (offsets <= self.bytes_per_cta - size)
        read = inside & lanes
        first = offsets[np.argmax(read)] if read.any() else 0
        values, bits = gather(self.data, self.taint, cta_base + first + (offsets - first) * read, size,
                              one_taint=True)
        outside = lanes & ~inside
        if outside.any():       # unknown there, as load() has it
            return np.where(outside, U64(0), values), np.where(outside, taint.UNMODELLED, bits)
        return values, bits

    def load(self, cta_index, offsets, size, lanes) -> tuple[np.ndarray, np.ndarray]:
        """Values and taints per thread (unknown where outside the CTA's shared memory or not a lane)."""
        values = np.zeros(len(offsets), dtype=np.uint64)
        bits = np.full(len(offsets), taint.UNMODELLED, dtype=np.uint64)
        chosen, start = self.place(cta_index, offsets, size, lanes)
        if len(chosen):
            values[chosen], bits[chosen] = gather(self.data, self.taint, start, size)
        return values, bits

    def store(self, cta_index, offsets, size, values, bits, lanes) -> None:
        chosen, start = self.place(cta_index, offsets, size, lanes)
        # one taint for every lane stays one (scatter spreads it)
        scatter(self.data, self.taint, start, size, np.broadcast_to(values, (len(offsets),))[chosen],
                bits if not np.ndim(bits) else np.broadcast_to(bits, (len(offsets),))[chosen])

    def forget(self, ctas: np.ndarray) -> None:
        """Every byte of these CTAs (indices in the chunk) becomes unknown."""
        for cta in np.unique(ctas).tolist():
            self.taint[cta * self.bytes_per_cta:(cta + 1) * self.bytes_per_cta] |= np.uint8(int(taint.BRANCH))


@dataclass
class Buffer:
    """One ``--data`` buffer: the parameter pointing to it, its base address and its bytes."""

    name: str
    base: int
    data: np.ndarray           # uint8, modified by stores
    taint: np.ndarray          # uint8 per byte
    dtype: np.dtype
    description: str


#: Pointer parameters with data are given addresses this far apart, from GLOBAL_BASE, unless --param sets them.
BUFFER_SPACING = 1 << 36
GLOBAL_BASE = 1 << 48
#: The dtype of a module global's buffer: raw bytes, read as whatever its instructions read.
RAW_BYTES = np.dtype("V1")


def module_global_addresses(variables: list[dict]) -> dict[str, int]:
    """Address of each module global (``__device__`` variable, PTX ``.global`` at module scope, a symbol of the
    cubin's ``.nv.global``/``.nv.global.init``), the same at both levels: below GLOBAL_BASE, BUFFER_SPACING
    apart, in name order."""
    names = sorted(variable["name"] for variable in variables)
    return {name: GLOBAL_BASE - (index + 1) * BUFFER_SPACING for index, name in enumerate(names)}


def module_globals_holding(addresses: dict[str, int], address: np.ndarray) -> list[str]:
    """The module globals (``addresses``: :func:`module_global_addresses`) some of ``address`` lies in: each owns
    BUFFER_SPACING bytes from its address."""
    return [name for name, base in addresses.items()
            if ((address >= U64(base)) & (address < U64(base + BUFFER_SPACING))).any()]


def module_global_buffers(variables: list[dict]) -> list[Buffer]:
    """The module globals as buffers with their initial contents: the initialiser's bytes, zeros without one."""
    addresses = module_global_addresses(variables)
    buffers = []
    for variable in variables:
        data = np.zeros(variable["bytes"], dtype=np.uint8)
        initial = variable.get("init")
        if initial:
            data[:len(initial)] = np.frombuffer(initial[:len(data)], dtype=np.uint8)
        how = "its initialiser" if initial else "zero-initialised"
        unknown = variable.get("unknown", False)
        if unknown:
            how = "initialised with addresses, not modelled"
        buffers.append(Buffer(name=variable["name"], base=addresses[variable["name"]], data=data,
                              taint=np.full(len(data), compress(np.array([taint.UNMODELLED if unknown else
                                                                          taint.ZERO]))[0], dtype=np.uint8),
                              dtype=RAW_BYTES, description=f"__device__ variable, {variable['bytes']} bytes, {how}"))
    return buffers


class CrossCtaTraffic(Exception):
    """Two CTAs of one batch touched the same global bytes, one of them writing: launch order matters."""


class GlobalContents:
    """The global buffers of one launch, shared by every chunk (CTAs run in launch order).

    A batch of several CTAs runs as if in launch order while no CTA of it reads, updates or writes bytes
    another CTA of the batch wrote (or reads them before the other writes them): :meth:`watch` tracks, per
    byte, the one CTA of the batch that wrote it and the one that read it (or several), and raises
    :class:`CrossCtaTraffic` at the first access that breaks this; the scheduler then puts the memory back
    (:meth:`saved`, :meth:`restore`) and runs the CTAs in smaller batches."""

    def __init__(self, buffers: list[Buffer], written: bool = True):
        self.buffers = buffers
        self.unserved: dict[int, str] = {}       # instruction -> why a load through it stayed unknown
        # a kernel that writes global memory lets one CTA see what an earlier one stored: what it
        # loads may then differ between CTAs even at the same address (one CTA cannot stand for all)
        self.written = written
        self._lane_cta: np.ndarray | None = None         # per lane of the running batch: its CTA's index in it
        self._writer: list[np.ndarray] = []               # per buffer and byte: the CTA that wrote it, or -1
        self._reader: list[np.ndarray] = []               # ... the CTA that read it, -1 none, -2 several
        self._touched: list[tuple[int, np.ndarray]] = []  # (buffer, byte indices) marked in this batch
        self._reads_watched = True

    def watch(self, lane_cta: np.ndarray | None, reads: bool = True) -> None:
        """Check the accesses of a batch whose lanes belong to CTAs ``lane_cta`` (None: one CTA, nothing to
        check); ``reads`` False: nothing of the batch writes global memory (a store that would stops it first),
        so its reads need no marks (a :meth:`forget` still stops it)."""
        self._lane_cta = lane_cta
        self._reads_watched = reads
        if not self._writer:
            self._writer = [np.full(len(b.data), -1, dtype=np.int32) for b in self.buffers]
            self._reader = [np.full(len(b.data), -1, dtype=np.int32) for b in self.buffers]
        for index, at in self._touched:          # the last batch's marks (cheaper than clearing every byte)
            self._writer[index][at] = -1
            self._reader[index][at] = -1
        self._touched = []

    def saved(self) -> tuple:
        return [(b.data.copy(), b.taint.copy()) for b in self.buffers], dict(self.unserved)

    def restore(self, saved: tuple) -> None:
        contents, unserved = saved
        for buffer, (data, byte_taint) in zip(self.buffers, contents):
            buffer.data[:] = data
            buffer.taint[:] = byte_taint
        self.unserved = dict(unserved)

    def note(self, index: int, offset: np.ndarray, size: int, chosen: np.ndarray, writes: bool) -> None:
        """Lanes ``chosen`` access ``size`` bytes at ``offset`` of buffer ``index`` (an atomic ``writes`` too):
        raise :class:`CrossCtaTraffic` if another CTA of the watched batch wrote them, or, for a write, read
        them."""
        if self._lane_cta is None or not len(chosen) or not (writes or self._reads_watched):
            return
        at = (offset[:, None] + np.arange(size)).reshape(-1)
        self._touched.append((index, at))
        who = np.repeat(self._lane_cta[chosen].astype(np.int32), size)
        writer, reader = self._writer[index], self._reader[index]
        earlier = writer[at]
        if ((earlier >= 0) & (earlier != who)).any():
            raise CrossCtaTraffic
        if writes:
            seen = reader[at]
            writer[at] = who
            if (seen == -2).any() or ((seen >= 0) & (seen != who)).any() or (writer[at] != who).any():
                raise CrossCtaTraffic
            return
        seen = reader[at]
        reader[at] = np.where(seen == -1, who, seen)
        mixed = reader[at] != who
        reader[at[mixed]] = -2

    def owner(self, address: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(buffer index or -1, offset in it) per address; a buffer owns BUFFER_SPACING bytes from its base."""
        which = np.full(len(address), -1, dtype=np.int64)
        offset = np.zeros(len(address), dtype=np.int64)
        for index, buffer in enumerate(self.buffers):
            delta = address - U64(buffer.base)          # wraps below the base: huge, outside
            mine = delta < U64(BUFFER_SPACING)
            which[mine] = index
            offset[mine] = delta[mine].astype(np.int64)
        return which, offset

    def mismatch(self, address: np.ndarray, lanes: np.ndarray, type_name: str, exact_type: bool = True
                 ) -> Buffer | None:
        """A buffer the lanes read whose dtype cannot be what a ``type_name`` load reads (None: all can).

        ``b`` types read raw bits from anything; otherwise floats must be read as floats and integers as
        integers, and a load may read several whole elements (packed) but not part of one.  Without
        ``exact_type`` only the width is the load's (SASS ``LDG.E.U16`` reads a short or a half alike): it
        must not read part of an element."""
        if type_name.startswith("b"):
            return None
        from traceconf.emulate.intops import TYPE_BITS
        size = TYPE_BITS.get(type_name, 32) // 8
        is_float = type_name.startswith(("f", "bf", "tf", "e4", "e5"))
        which, _ = self.owner(address)
        for index in np.unique(which[lanes & (which >= 0)]).tolist():
            buffer = self.buffers[index]
            if buffer.dtype == RAW_BYTES:
                continue
            if size < buffer.dtype.itemsize or (exact_type and ((buffer.dtype.kind == "f") != is_float or
                                                                (is_float and size != buffer.dtype.itemsize))):
                return buffer
        return None

    def load(self, address: np.ndarray, size: int, lanes: np.ndarray):
        """(values, byte taints, served lanes, (buffer, offset) of the first lane past its buffer's end)."""
        values = np.zeros(len(address), dtype=np.uint64)
        bits = np.zeros(len(address), dtype=np.uint64)
        served = np.zeros(len(address), dtype=bool)
        which, offset = self.owner(address)
        past = None
        for index, buffer in enumerate(self.buffers):
            mine = lanes & (which == index)
            if not mine.any():
                continue
            fits = mine & (offset + size <= len(buffer.data)) & (offset >= 0)
            if (mine & ~fits).any() and past is None:
                lane = int(np.flatnonzero(mine & ~fits)[0])
                past = (buffer, int(offset[lane]))
            chosen = np.flatnonzero(fits)
            self.note(index, offset[chosen], size, chosen, writes=False)
            values[chosen], bits[chosen] = gather(buffer.data, buffer.taint, offset[chosen], size)
            served |= fits
        return values, bits, served, past

    def store(self, address: np.ndarray, size: int, values, bits, lanes: np.ndarray) -> None:
        which, offset = self.owner(address)
        values = np.broadcast_to(values, (len(address),))
        bits = np.broadcast_to(bits, (len(address),))
        for index, buffer in enumerate(self.buffers):
            chosen = np.flatnonzero(lanes & (which == index) & (offset >= 0) & (offset + size <= len(buffer.data)))
            self.note(index, offset[chosen], size, chosen, writes=True)
            scatter(buffer.data, buffer.taint, offset[chosen], size, values[chosen], bits[chosen])

    def forget(self) -> None:
        if self._lane_cta is not None:       # a store anywhere: the other CTAs of the batch may read it
            raise CrossCtaTraffic
        for buffer in self.buffers:
            buffer.taint |= np.uint8(int(taint.BRANCH))


# --------------------------------------------------------------------------- atomics

ATOMIC_OPS = ("add", "inc", "dec", "cas", "exch", "min", "max", "and", "or", "xor")
_FLOATS = {16: np.float16, 32: np.float32, 64: np.float64}


def _combine(op: str, old: np.ndarray, b: np.ndarray, c: np.ndarray, width: int, is_signed: bool,
             is_float: bool) -> np.ndarray:
    """New memory value of one atomic lane, PTX semantics, as uint64 bit patterns of ``width`` bits."""
    from traceconf.emulate import intops
    if is_float and op in ("add", "min", "max"):
        kind = _FLOATS[width]
        unsigned = {16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
        x = intops.truncate(old, width).astype(unsigned).view(kind)
        y = intops.truncate(b, width).astype(unsigned).view(kind)
        with np.errstate(all="ignore"):
            result = x + y if op == "add" else np.fmin(x, y) if op == "min" else np.fmax(x, y)
        return result.astype(kind).view(unsigned).astype(np.uint64)
    if op == "add":
        return intops.truncate(old + b, width)
    if op == "inc":       # ((old >= b) ? 0 : old + 1), unsigned
        return np.where(intops.unsigned(old, width) >= intops.unsigned(b, width), U64(0),
                        intops.truncate(old + U64(1), width))
    if op == "dec":       # (((old == 0) | (old > b)) ? b : old - 1)
        o, limit = intops.unsigned(old, width), intops.unsigned(b, width)
        return np.where((o == 0) | (o > limit), limit, intops.truncate(old - U64(1), width))
    if op == "cas":
        return np.where(intops.unsigned(old, width) == intops.unsigned(b, width), intops.truncate(c, width),
                        intops.truncate(old, width))
    if op == "exch":
        return intops.truncate(b, width)
    if op == "min":
        return intops.minimum(old, b, width, is_signed)
    if op == "max":
        return intops.maximum(old, b, width, is_signed)
    return intops.truncate({"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op](old, b), width)


def atomic(data: np.ndarray, byte_taint: np.ndarray, start: np.ndarray, op: str, width: int, is_signed: bool,
           is_float: bool, b, b_bits, c, c_bits) -> tuple[np.ndarray, np.ndarray]:
    """Apply one atomic per element of ``start`` (byte indices, in thread order) and return the old values
    and their taints.  Lanes on the same location take turns in thread order; integer adds are done at
    once with prefix sums, every other operation in rounds (the k-th lane of every location in round k)."""
    size = width // 8
    n = len(start)
    old = np.zeros(n, dtype=np.uint64)
    old_bits = np.zeros(n, dtype=np.uint64)
    if not n:
        return old, old_bits
    b, b_bits = np.broadcast_to(b, (n,)), np.broadcast_to(b_bits, (n,))
    c, c_bits = np.broadcast_to(c, (n,)), np.broadcast_to(c_bits, (n,))
    order = np.argsort(start, kind="stable")
    sorted_start = start[order]
    first = np.ones(n, dtype=bool)
    first[1:] = sorted_start[1:] != sorted_start[:-1]
    group_start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - group_start
    if op == "add" and not is_float:
        heads = order[first]
        memory, memory_bits = gather(data, byte_taint, start[heads], size)
        values = b[order]
        running = np.cumsum(values, dtype=np.uint64)                 # wraps modulo 2**64, like the hardware
        before = running - values
        base = before[first][np.cumsum(first) - 1]                   # prefix at the group's first lane
        group = np.cumsum(first) - 1
        bits_sorted = b_bits[order]
        group_bits = np.zeros(int(group[-1]) + 1, dtype=np.uint64)
        np.bitwise_or.at(group_bits, group, bits_sorted)
        from traceconf.emulate import intops
        old[order] = intops.truncate(memory[group] + (before - base), width)
        old_bits[order] = memory_bits[group] | np.where(rank[order] > 0, group_bits[group], taint.ZERO)
        last = np.append(first[1:], True)
        total = running[last] - base[last]
        scatter(data, byte_taint, start[heads], size, intops.truncate(memory + total, width),
                memory_bits | group_bits)
        return old, old_bits
    for round_ in range(int(rank.max()) + 1):
        lanes = np.flatnonzero(rank == round_)
        current, current_bits = gather(data, byte_taint, start[lanes], size)
        old[lanes], old_bits[lanes] = current, current_bits
        new = _combine(op, current, b[lanes], c[lanes], width, is_signed, is_float)
        scatter(data, byte_taint, start[lanes], size, new, current_bits | b_bits[lanes] | c_bits[lanes])
    return old, old_bits
