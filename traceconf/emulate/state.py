"""Register file and special registers of a chunk of CTAs, one array element per thread.

Threads are laid out CTA after CTA; each CTA is padded to whole warps (the
padding lanes never run), so ``reshape(-1, warp_size)`` gives the warps and
no warp spans two CTAs.  Warps are consecutive linear thread ids, x fastest.

Arrays are never modified in place once stored: a write builds a new array
(``np.where`` over the execution mask), so registers may share arrays freely.
"""

from __future__ import annotations

import numpy as np

from traceconf.emulate import taint

U64 = np.uint64
#: Scalars whose spread view (ThreadState.spread) is kept for the machine's life.
SPREAD_CACHE = 256
#: Arrays derived from a register's array (ThreadState.derived) kept at once: an address register feeds a load
#: and a store, a guard predicate every instruction it guards.
DERIVED_CACHE = 16


def select(mask: np.ndarray, new, old, ones: np.ndarray | None = None):
    """``np.where(mask, new, old)``; for uint64 values (arrays or scalars) and a bool mask, with no branch per
    lane: on an irregular mask (a guard that depends on data) np.where's branch costs several times the three
    bitwise passes used instead.  ``ones``: the mask as uint64 all-ones lanes, when already made."""
    new, old = np.asarray(new), np.asarray(old)
    if new.dtype != U64 or old.dtype != U64 or np.asarray(mask).dtype != np.bool_:
        return np.where(mask, new, old)
    out = old ^ new
    ones = np.negative(mask, dtype=U64) if ones is None else ones
    if out.ndim:
        out &= ones                     # in place: no temporaries to allocate
    else:
        out = ones & out
    out ^= old
    return out


def _ones(mask: np.ndarray) -> np.ndarray:
    """A bool mask as uint64 all-ones lanes (:func:`select`'s ``ones``)."""
    return np.negative(mask, dtype=U64)


def extent(values: np.ndarray) -> tuple[int, int]:
    """The smallest and the largest element of ``values`` (not empty)."""
    return int(values.min()), int(values.max())


def is_uniform(bits) -> bool:
    """Whether a taint is one value for every thread: a scalar, or one spread to all of them
    (:meth:`ThreadState.spread`)."""
    return type(bits) is not np.ndarray or not bits.ndim or bits.strides == (0,)


class ThreadState:
    def __init__(self, ctas: np.ndarray, block: tuple[int, int, int], grid: tuple[int, int, int],
                 warp_size: int, layout_sizes: tuple[int, int]):
        self.warp_size = warp_size
        self.block, self.grid = block, grid
        self.threads_per_cta = block[0] * block[1] * block[2]
        self.warps_per_cta = -(-self.threads_per_cta // warp_size)
        self.padded = self.warps_per_cta * warp_size
        self.ctas = np.asarray(ctas, dtype=np.int64)
        self.size = len(self.ctas) * self.padded
        local = np.tile(np.arange(self.padded, dtype=np.int64), len(self.ctas))
        self.valid = local < self.threads_per_cta
        self.cta_of_thread = np.repeat(self.ctas, self.padded)
        self.local_thread = local
        self.warp_in_cta = (local // warp_size).astype(np.int32)
        self.lane = local % warp_size
        self.regs: dict[str, np.ndarray] = {}
        self.taints: dict[str, np.ndarray] = {}
        self.params: dict[str, dict[int, tuple]] = {}   # param-space symbol -> offset -> (value, taint, bytes)
        self.carry = np.zeros(self.size, dtype=np.uint64)
        self.carry_taint = np.zeros(self.size, dtype=np.uint64)
        self.guard_taint = taint.ZERO
        # under a guard whose taint is one known value (simt.with_guard): the registers with_guard adds it to in
        # the threads the guard skips, and the mask of the threads it holds in
        self.guard_keys: tuple[str, ...] = ()
        self.guard_holds: np.ndarray | None = None
        self.guard_given: set[str] = set()      # those of guard_keys a write gave the guard's taint where it skips
        self._spread: dict[tuple, np.ndarray] = {}
        self._derived: dict[tuple, tuple] = {}
        self._zeros = np.zeros(self.size, dtype=np.uint64)
        self._undefined = np.full(self.size, taint.UNMODELLED, dtype=np.uint64)
        self.special = self._special_registers(layout_sizes)

    # -- special registers ---------------------------------------------------------------------
    def _special_registers(self, layout_sizes: tuple[int, int]) -> dict[str, tuple]:
        bx, by, bz = self.block
        gx, gy, gz = self.grid
        local, cta = self.local_thread, self.cta_of_thread
        static_bytes, dynamic_bytes = layout_sizes
        zero = taint.ZERO

        def const(value):
            return np.full(self.size, value, dtype=np.uint64), zero

        def per_thread(values, bits=taint.THREAD):
            return np.asarray(values, dtype=np.int64).view(np.uint64), bits

        ctaid = {"x": cta % gx, "y": (cta // gx) % gy, "z": cta // (gx * gy)}
        grid = {"x": gx, "y": gy, "z": gz}
        special = {
            "%tid.x": per_thread(local % bx), "%tid.y": per_thread((local // bx) % by),
            "%tid.z": per_thread(local // (bx * by)),
            "%ntid.x": const(bx), "%ntid.y": const(by), "%ntid.z": const(bz),
            "%nctaid.x": const(gx), "%nctaid.y": const(gy), "%nctaid.z": const(gz),
            "%laneid": per_thread(self.lane), "%warpid": per_thread(self.warp_in_cta),
            "%nwarpid": const(self.warps_per_cta), "WARP_SZ": const(self.warp_size),
            "%warpsize": const(self.warp_size),
            "%cluster_nctarank": const(1), "%cluster_ctarank": const(0), "%is_explicit_cluster": const(0),
            "%dynamic_smem_size": const(dynamic_bytes), "%total_smem_size": const(static_bytes + dynamic_bytes),
            "%aggr_smem_size": const(static_bytes + dynamic_bytes),
        }
        for axis in "xyz":
            # a CTA coordinate only distinguishes CTAs along an axis the grid really extends
            bits = taint.CTA if grid[axis] > 1 else zero
            special[f"%ctaid.{axis}"] = per_thread(ctaid[axis], bits)     # uniform in a warp: no THREAD bit
            # one CTA per cluster: the cluster grid is the CTA grid
            special[f"%clusterid.{axis}"] = per_thread(ctaid[axis], bits)
            special[f"%nclusterid.{axis}"] = const(grid[axis])
            special[f"%cluster_ctaid.{axis}"] = const(0)
            special[f"%cluster_nctaid.{axis}"] = const(1)
        lane = self.lane.astype(np.uint64)
        one = U64(1)
        below = (one << lane) - one
        width_mask = U64((1 << self.warp_size) - 1) if self.warp_size < 64 else U64(0xFFFF_FFFF_FFFF_FFFF)
        varying = taint.THREAD
        special["%lanemask_eq"] = (one << lane, varying)
        special["%lanemask_lt"] = (below, varying)
        special["%lanemask_le"] = (below | (one << lane), varying)
        special["%lanemask_ge"] = (~below & width_mask, varying)
        special["%lanemask_gt"] = (~(below | (one << lane)) & width_mask, varying)
        return special

    # -- registers -------------------------------------------------------------------------------
    def read(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        value = self.regs.get(key)
        if value is None:
            return self._zeros, self._undefined
        return value, self.taints[key]

    def write(self, key: str, value, bits, mask: np.ndarray | None) -> None:
        """Store ``value`` (uint64, array or scalar) where ``mask`` is set (None: every thread).  A taint the
        same in every thread stays one scalar (most are: the ALU's work on taints is then scalar too)."""
        bits = bits | self.guard_taint
        if type(bits) is np.ndarray and bits.ndim and bits.min() == bits.max():
            bits = U64(bits[0])                 # a loaded value's taint, the same everywhere
        if mask is None:
            self.regs[key] = self.full(value)
            self.taints[key] = U64(bits) if np.ndim(bits) == 0 else self.full(bits)
            return
        old, old_bits = self.read(key)
        ones = self.lane_ones(mask) if type(mask) is np.ndarray and mask.dtype == np.bool_ else None
        self.regs[key] = select(mask, value, old, ones)
        if key in self.guard_keys and mask is self.guard_holds:
            # with_guard gives the threads the guard skips the guard's taint too: given here, in the same pass
            self.guard_given.add(key)
            old_bits = old_bits | self.guard_taint
        if np.ndim(bits) == 0 and np.ndim(old_bits) == 0 and bits == old_bits:
            self.taints[key] = bits
            return
        self.taints[key] = select(mask, bits, old_bits, ones)

    def lane_ones(self, mask: np.ndarray) -> np.ndarray:
        """The bool ``mask`` as uint64 all-ones lanes (:func:`select`'s ``ones``), made once per mask array."""
        return self.derived(mask, "ones", _ones)

    def derived(self, source: np.ndarray, what, make, other: np.ndarray | None = None):
        """``make(source)``, remembered for the same ``source`` array (and ``other``, when it depends on that too;
        ``what`` names the derivation): arrays are never modified once stored (registers, masks), so one computed
        from a register's array stays right while the register holds it.  The entry keeps the arrays alive, so
        that their ids are not reused meanwhile."""
        key = (id(source), id(other), what)
        hit = self._derived.get(key)
        if hit is not None and hit[0] is source and hit[1] is other:
            return hit[2]
        made = make(source)
        if len(self._derived) >= DERIVED_CACHE:
            del self._derived[next(iter(self._derived))]
        self._derived[key] = (source, other, made)
        return made

    def extent(self, values: np.ndarray) -> tuple[int, int]:
        """:func:`extent` of ``values``, made once per array: an offsets array serves a load and a store, whose
        region checks, word views and address rows each look at its bounds."""
        return self.derived(values, "extent", extent)

    def spread(self, value) -> np.ndarray:
        """``value`` with one (read-only) element per thread: an array already so is itself, a scalar a view (the
        same view for the same scalar: a guard or an address taint spreads a few values thousands of times)."""
        if type(value) is np.ndarray and value.shape == (self.size,):
            return value
        array = np.asarray(value)
        if array.ndim:
            return np.broadcast_to(array, (self.size,))
        key = (array.dtype.char, array.item())
        view = self._spread.get(key)
        if view is None:
            view = np.broadcast_to(array, (self.size,))
            if len(self._spread) < SPREAD_CACHE:
                self._spread[key] = view
        return view

    def full(self, value) -> np.ndarray:
        """``value`` as a uint64 array with one element per thread (scalars are spread)."""
        if type(value) is np.ndarray and value.shape == (self.size,):
            return value
        return np.full(self.size, value, dtype=np.uint64)

    # -- parameter space ---------------------------------------------------------------------
    def store_param(self, symbol: str, offset: int, value, bits, size: int, mask) -> None:
        slots = self.params.setdefault(symbol, {})
        old = slots.get(offset)
        if mask is not None and old is not None:
            value = np.where(mask, value, old[0])
            bits = np.where(mask, bits, old[1])
        elif mask is not None:
            bits = np.where(mask, bits, taint.UNMODELLED)
        slots[offset] = (self.full(value), self.full(bits | self.guard_taint), size)

    def load_param(self, symbol: str, offset: int, size: int):
        """Value stored in the parameter space at symbol+offset (a part of a wider store works too)."""
        for start, (value, bits, stored) in self.params.get(symbol, {}).items():
            if start <= offset and offset + size <= start + stored:
                shift = U64(8 * (offset - start))
                return value >> shift, bits
        return self._zeros, self._undefined
