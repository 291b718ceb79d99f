"""Device rule sets: shared-memory bank rules as data, one TOML file per device.

Every device is described by a small table of facts (bank geometry, lane
groups per access width, load pairing, the matrix rule of ldmatrix/stmatrix)
that ONE engine (:mod:`traceconf.engine`) and one scalar reference
(:mod:`traceconf.reference`) interpret; there is no class per GPU.  The file
format and the evidence behind every builtin rule set are documented in
``docs/rules.md``.

>>> rules = load_rule_set("sm_90")              # builtin, by name
>>> rules = load_rule_set("./my_gpu.toml")      # a user file, same schema
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from traceconf.errors import InputError
from traceconf.kinds import ATOMIC_OPS, COPY_OPS, KINDS, OP_CODES, OPS_OF_KIND
from traceconf.tomlfile import key_line, parse_toml

__all__ = ["RuleSet", "LaunchLimits", "RuleFileError", "LaneGroupRule", "PairingRule", "MatrixRule",
           "load_rule_set", "list_rule_sets", "builtin_names", "EVIDENCE", "BROADCAST", "WRITE_KINDS"]

#: How a rule set's claims are backed, strongest first.
EVIDENCE = ("measured", "documented", "inferred", "unverified")
#: ``multicast``: any number of words per pass go to every lane that wants them (2.x+, AMD);
#: ``single_word``: one broadcast word per pass, CC 1.x §1.1 iterative procedure.
BROADCAST = ("multicast", "single_word")
#: ``groups``: an execution's ideal is its active lane groups; ``bytes``: the wavefronts its active lanes' bytes
#: fill, ceil(active lanes x width / (banks x bank_bytes)), never more than it took (Nsight's ideal on sm_90).
IDEAL = ("groups", "bytes")
#: Kinds that write shared memory (``merge_stores`` decides whether same-address writes conflict).
WRITE_KINDS = frozenset({"st", "atom", "stmatrix", "cp_async"})
MATRIX_KINDS = frozenset({"ldmatrix", "stmatrix"})
LANE_KINDS = frozenset(KINDS) - MATRIX_KINDS
WIDTHS = (1, 2, 4, 8, 16)

_MISSING = object()
_TOP_KEYS = {"name", "title", "products", "vendor", "arch", "evidence", "notes", "alias_of", "warp_size", "banks", "bank_bytes",
             "row_bytes", "broadcast", "ideal", "split_bytes", "merge_stores", "merge_same_word", "lane_groups",
             "pairing", "matrix", "atomic_ops", "copy_ops", "limits"}
#: Keys that do not change the bank rules (an alias setting only these repeats its base's rules).
_DESCRIPTIVE_KEYS = {"name", "title", "products", "vendor", "arch", "evidence", "notes", "alias_of", "limits"}
_LIMIT_KEYS = {"threads_per_block", "block", "grid", "shared_bytes_per_block", "source"}
_REQUIRED = ("name", "title", "vendor", "evidence", "warp_size", "banks", "bank_bytes", "row_bytes",
             "lane_groups")


class RuleFileError(InputError):
    """A rule file that cannot be read or breaks the schema (names the file, the key and the problem)."""


@dataclass(frozen=True)
class LaneGroupRule:
    """Which lanes are scheduled together ("phases") for accesses of some widths/kinds."""

    bytes: frozenset[int]
    kinds: frozenset[str] | None           # None: every non-matrix kind
    groups: tuple[tuple[int, ...], ...]    # partition of the warp's lanes, equal sizes
    extra_wavefronts: int = 0              # passes added to every active group (Fermi 128-bit "add 1")

    def matches(self, kind: str, nbytes: int) -> bool:
        return nbytes in self.bytes and (self.kinds is None or kind in self.kinds)


#: How the passes of a lane group are counted: ``banks``, the busiest bank's distinct rows (every access);
#: ``placements``, the distinct (row, chunk XOR lane position) of the group's distinct destinations (an
#: LDGSTS.BYPASS fill on sm_90: docs/rules.md); ``one``, one pass per active group (a spin CAS serves a
#: conflict-free subset of its lanes per pass and the loop retries the others: ATOMS.CAST.SPIN on sm_90).
GROUP_PASSES = ("banks", "placements", "one")
#: How a copy whose lanes' global sources are known (ACCESSES ``source``) is counted instead: ``lines``, by
#: the sources' 128-byte lines and 32-byte sectors against the destinations (LDGSTS.BYPASS on sm_90: the
#: ldgsts_probe pages, docs/rules.md "Copies from their sources"); "" (the default): the sources are not used.
SOURCE_PASSES = ("", "lines")
#: The pass such a copy adds where some of its lanes zero-fill (ACCESSES ``src_size`` below the copy's bytes):
#: ``runs``, per quarter-warp the contiguous source runs of its reading lanes, or 1 where none reads (LDGSTS.BYPASS
#: with the ignore-src operand or .ZFILL on sm_90: the ldgsts_ignore_src pages, docs/rules.md); "": none.
FILL_PASSES = ("", "runs")


@dataclass(frozen=True)
class OpRule:
    """``[atomic_ops.OP]`` / ``[copy_ops.OP]``: an operation served unlike its kind as a whole."""

    merge_same_word: bool | None = None    # None: as [merge_same_word] says for the kind
    passes: int = 1                        # the access is served this many times (wavefronts and ideal)
    group_passes: str = "banks"            # GROUP_PASSES: how a lane group's passes are counted
    plus_plain: bool = False               # served once more as the kind without this operation
    # why Nsight's Source page may count this operation otherwise than these rules can (what it depends on
    # that the accesses do not hold); every result of an instruction with this operation carries it
    model_note: str = ""
    source_passes: str = ""                # SOURCE_PASSES: the count of executions whose sources are known
    # the note of an instruction every execution of which was counted from its sources (source_passes)
    source_model_note: str = ""
    fill_passes: str = ""                  # FILL_PASSES: added to source_passes where a lane zero-fills
    fill_always: bool = False              # the fill pass in every copy of the operation (.ZFILL)

    @property
    def servings(self) -> tuple[str, ...]:
        """How each serving of the access counts its groups' passes, in order (docs/rules.md, step 4)."""
        return (self.group_passes, "banks") if self.plus_plain else (self.group_passes,)


PLAIN = OpRule()


@dataclass(frozen=True)
class PairingRule:
    """Load pairing: if every active lane n reads the address of lane n^x (or n^x is inactive), groups merge."""

    kinds: frozenset[str]
    min_bytes: int
    partners: tuple[int, ...]
    factor: int

    def applies(self, kind: str, nbytes: int) -> bool:
        return kind in self.kinds and nbytes >= self.min_bytes


@dataclass(frozen=True)
class MatrixRule:
    """ldmatrix/stmatrix: one group per 8x8 matrix, rows supplied by ``lanes`` consecutive lanes."""

    kinds: frozenset[str]
    lanes: int
    row_bytes: int


@dataclass(frozen=True)
class LaunchLimits:
    """What one launch may ask of the device (``[limits]``): a larger launch fails on the hardware."""

    threads_per_block: int
    block: tuple[int, int, int]            # largest block size per dimension
    grid: tuple[int, int, int] | None      # largest grid size per dimension; None where not stated
    shared_bytes_per_block: int            # static + dynamic shared memory one block may use (opt-in maximum)
    source: str                            # where the numbers come from

    def problem(self, device: str, block: tuple[int, int, int], grid: tuple[int, int, int],
                shared_bytes: int) -> str | None:
        """None, or why ``device`` cannot run this launch (the limit and where it comes from)."""
        where = f"{device} limit ({self.source})"
        threads = block[0] * block[1] * block[2]
        if threads > self.threads_per_block:
            return f"block {_dims_text(block)} is {threads:,} threads: more than {self.threads_per_block:,} per " \
                   f"block, the {where}"
        for axis, size, limit in zip("xyz", block, self.block):
            if size > limit:
                return f"block {axis} = {size:,} exceeds {limit:,}, the {where} of {_dims_text(self.block)}"
        for axis, size, limit in zip("xyz", grid, self.grid or ()):
            if size > limit:
                return f"grid {axis} = {size:,} exceeds {limit:,}, the {where} of {_dims_text(self.grid)}"
        if shared_bytes > self.shared_bytes_per_block:
            return f"the block needs {shared_bytes:,} bytes of shared memory (static + --dynamic-smem): more " \
                   f"than {self.shared_bytes_per_block:,}, the {where}"
        return None


def _dims_text(dims) -> str:
    return " x ".join(f"{d:,}" for d in dims)


@dataclass(frozen=True)
class RuleSet:
    """One device's shared-memory bank rules (see ``docs/rules.md`` for every field)."""

    name: str
    title: str
    vendor: str
    evidence: str
    notes: str
    alias_of: str | None
    warp_size: int
    banks: int
    bank_bytes: int
    row_bytes: int
    broadcast: str
    split_bytes: int
    merge_stores: bool
    unmerged_kinds: frozenset[str]         # kinds whose lanes on one bank word each cost a pass (no merging)
    lane_groups: tuple[LaneGroupRule, ...]
    pairing: PairingRule | None
    matrix: MatrixRule | None
    source: str = "builtin"
    same_rules_as: str | None = None       # the rule set whose rules this alias repeats unchanged
    ops: dict = field(default_factory=dict)  # op -> OpRule: how one atomic or copy operation is served
    products: tuple[str, ...] = ()         # product names that --device accepts for this rule set
    limits: LaunchLimits | None = None     # the launch limits of the device; None: not stated (unchecked)
    arch: str | None = None                # the ptxas architecture (sm_90) of the device; None: ptxas targets none
    ideal: str = "groups"                  # IDEAL: how an execution's ideal wavefronts are counted
    # the validated keys, aliases merged: what the scalar reference (traceconf.reference) reads on its own
    data: dict = field(default_factory=dict, compare=False, repr=False)


    def lane_group_rule(self, kind: str, nbytes: int) -> LaneGroupRule:
        """The first lane-group rule that covers ``kind`` accesses of ``nbytes`` bytes per lane."""
        for rule in self.lane_groups:
            if rule.matches(kind, nbytes):
                return rule
        raise InputError(f"rule set {self.name!r} has no lane-group rule for {nbytes}-byte {kind} accesses")

    def op_rule(self, kind: str, op: str = "") -> OpRule:
        """How an access of ``kind`` carrying operation ``op`` is served (:data:`PLAIN` when no rule names it;
        an operation of another kind is ignored)."""
        return self.ops.get(op, PLAIN) if op in OPS_OF_KIND.get(kind, ()) else PLAIN

    def model_notes(self) -> dict[int, str]:
        """ACCESSES ``op`` code -> the note every result of an access with that operation carries: why Nsight's
        Source page may count it otherwise (``model_note`` of ``[atomic_ops.OP]`` / ``[copy_ops.OP]``)."""
        return {OP_CODES[op]: rule.model_note for op, rule in self.ops.items() if rule.model_note}

    def source_model_notes(self) -> dict[int, str]:
        """ACCESSES ``op`` code -> the note of an instruction whose executions were all counted from their
        global sources (``source_model_note``; absent: the rule reproduces Nsight there, no note)."""
        return {OP_CODES[op]: rule.source_model_note for op, rule in self.ops.items() if rule.source_passes}

    def source_passes(self, kind: str, op: str = "") -> str:
        """How an access of this kind / op whose lanes' global sources are known is counted ("" : as without)."""
        return self.op_rule(kind, op).source_passes

    def merges(self, kind: str, op: str = "") -> bool:
        """Do lanes of one ``kind`` access (operation ``op``) that touch the same bank word share a pass?"""
        merge = self.op_rule(kind, op).merge_same_word
        return kind not in self.unmerged_kinds if merge is None else merge

    def passes(self, kind: str, op: str = "") -> int:
        """How many times an access of this kind / op is served (ATOMS.CAS: 2 on sm_90)."""
        return self.op_rule(kind, op).passes

    def supports(self, kind: str) -> bool:
        if kind in MATRIX_KINDS:
            return self.matrix is not None and kind in self.matrix.kinds
        return any(rule.kinds is None or kind in rule.kinds for rule in self.lane_groups)

    def describe(self) -> str:
        """One line: name, vendor/title, banks x bytes, warp size, evidence (``traceconf devices``)."""
        alias = f" (rules of {self.same_rules_as})" if self.same_rules_as else ""
        return (f"{self.name:<12} {self.vendor + ' ' + self.title:<52} {self.banks:>2} x {self.bank_bytes} B"
                f"  warp {self.warp_size:<2}  {self.evidence}{alias}")


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------

def builtin_names() -> list[str]:
    """Names of the rule sets shipped with traceconf, sorted."""
    return sorted(p.name[:-5] for p in resources.files(__name__).iterdir() if p.name.endswith(".toml"))


def list_rule_sets() -> list[RuleSet]:
    """Every builtin rule set, in a stable order (vendor, then name)."""
    return sorted((load_rule_set(name) for name in builtin_names()),
                  key=lambda r: (r.vendor != "NVIDIA", r.vendor, _natural(r.name)))


def load_rule_set(name_or_path: str | Path) -> RuleSet:
    """A builtin rule set by name (``"sm_90"``), architecture (``sm90``, ``compute_90a``), product (``h100``,
    ``"RTX 4090"``, ``mi300x``; see :func:`resolve_device`), or a user file by path (``"./my_gpu.toml"``)."""
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or text.endswith(".toml") or "/" in text or "\\" in text:
        return _load_file(str(Path(text).resolve()), text)
    return _load_builtin(resolve_device(text))


#: Compute capabilities NVIDIA has shipped (sm_XY as XY), the architectures --device accepts by number.
NVIDIA_ARCHITECTURES = frozenset({10, 11, 12, 13, 20, 21, 30, 32, 35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86,
                                  87, 88, 89, 90, 100, 101, 103, 110, 120, 121})


def _squeezed(text: str) -> str:
    return re.sub(r"[\s_\-]+", "", text.lower())


@lru_cache(maxsize=1)
def _products() -> dict[str, str]:
    """Squeezed product name → builtin rule set (the ``products`` lists of the builtin files)."""
    return {_squeezed(product): name for name in builtin_names() for product in _load_builtin(name).products}


def resolve_device(text: str) -> str:
    """The builtin rule set a ``--device`` value names.

    Accepted: a rule set name; an NVIDIA architecture in any spelling (``sm90``, ``SM_90``, ``compute_90a``),
    where one without its own rule set takes its family's (``sm_1x`` for CC 1.x, ``sm_2x``, ``sm_3x``) or
    the closest lower rule set of the same major version (``sm_87`` → ``sm_86``); a product name of a
    rule set's ``products`` list, spaces, dashes and case ignored (``H100``, ``rtx-4090``, ``MI300X``).
    """
    names = builtin_names()
    if text in names:
        return text
    squeezed = _squeezed(text)
    arch = re.fullmatch(r"(?:sm|compute)(\d+)(\d)[a-z]?", squeezed)       # the last digit is the minor version
    if arch and int(arch.group(1) + arch.group(2)) in NVIDIA_ARCHITECTURES:
        major, minor = arch.group(1), int(arch.group(2))
        if f"sm_{major}x" in names:
            return f"sm_{major}x"
        same_major = sorted((int(n[-1]), n) for n in names
                            if re.fullmatch(rf"sm_{major}\d", n) and int(n[-1]) <= minor)
        if same_major:
            return same_major[-1][1]
    if squeezed in _products():
        return _products()[squeezed]
    candidates = sorted(set(names) | set(_products()))
    close = difflib.get_close_matches(squeezed, candidates, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise RuleFileError(f"unknown device {text!r}{hint} (rule sets: {', '.join(names)}; product names: "
                        "traceconf devices; or the path of a .toml rule file)", file="--device")


#: The device a run counts for when none is named (--device, the API's ``devices``).
DEFAULT_DEVICE = "sm_90"


def load_rule_sets(names: list[str] | None, default: str = DEFAULT_DEVICE) -> list[RuleSet]:
    """The rule sets the user named (``--device``, the API's ``devices``), deduplicated, in order."""
    return [load_rule_set(name) for name in dict.fromkeys(names or [default])]


@lru_cache(maxsize=None)
def _load_builtin(name: str) -> RuleSet:
    path = resources.files(__name__) / f"{name}.toml"
    return _build(_read(str(path), path.read_text(encoding="utf-8")), "builtin", expect_name=name)


def _load_file(path: str, typed: str | None = None) -> RuleSet:
    """A user rule file, read on every call (a page of TOML), built once per content: a file edited between
    two calls is read again.  ``typed``: the name as the user gave it (a file that cannot be read is named so:
    it may be a device name mistyped with a slash or backslash)."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise RuleFileError(f"cannot read rule file: {error.strerror}", typed or path) from None
    if len(data) > MAX_RULE_FILE_BYTES:
        raise RuleFileError(f"{len(data):,} bytes: a rule file is at most {MAX_RULE_FILE_BYTES:,} bytes of TOML", path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise RuleFileError(f"not a TOML rule file: byte 0x{data[error.start]:02x} is not UTF-8 text", path,
                            line, column) from None
    if "\x00" in text:
        raise RuleFileError("not a TOML rule file: binary data (NUL byte)", path, text.count("\n", 0, text.index("\x00")) + 1)
    return _built_file(path, text)


@lru_cache(maxsize=64)
def _built_file(path: str, text: str) -> RuleSet:
    return _build(_read(path, text), path)


#: A rule file is a page of TOML; anything far larger is not one (and is not read into memory whole).
MAX_RULE_FILE_BYTES = 1 << 20


@dataclass
class _Doc:
    """A parsed TOML rule file plus what is needed to point at its lines."""

    path: str
    text: str
    data: dict

    def error(self, key: str, message: str) -> RuleFileError:
        line = key_line(self.text, key)
        source = self.text.splitlines()[line - 1] if line else None
        return RuleFileError(f"key {key!r}: {message}", self.path, line, 1 if line else None, source)


def _read(path: str, text: str) -> _Doc:
    return _Doc(path, text, parse_toml(text, path, RuleFileError))


def _natural(name: str) -> tuple:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def _merged(doc: _Doc, seen: tuple[str, ...]) -> dict:
    """The file's keys on top of its ``alias_of`` base (recursively); aliases inherit everything else."""
    base_name = doc.data.get("alias_of")
    if base_name is None:
        return dict(doc.data)
    if not isinstance(base_name, str):
        raise doc.error("alias_of", f"expected the name of a builtin rule set, got {base_name!r}")
    if base_name in seen:
        raise doc.error("alias_of", f"alias cycle {' -> '.join(seen + (base_name,))}")
    if base_name not in builtin_names():
        raise doc.error("alias_of", f"unknown builtin rule set {base_name!r}")
    path = resources.files(__name__) / f"{base_name}.toml"
    base = _merged(_read(str(path), path.read_text(encoding="utf-8")), seen + (base_name,))
    base.pop("products", None)                 # product names belong to one rule set, not its aliases
    return _deep_merged(base, doc.data)


def _deep_merged(base: dict, override: dict) -> dict:
    """``override`` on top of ``base``: tables merge key by key (an alias that sets one entry of
    ``[merge_same_word]`` keeps the others); any other value, arrays of tables too, replaces the base's."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def _build(doc: _Doc, source: str, expect_name: str | None = None) -> RuleSet:
    data = _merged(doc, (str(doc.data.get("name")),))
    unknown = sorted(set(doc.data) - _TOP_KEYS)
    if unknown:
        raise doc.error(unknown[0], f"unknown key (allowed: {', '.join(sorted(_TOP_KEYS))})")
    missing = [key for key in _REQUIRED if key not in data]
    if missing:       # all of them at once: a file written from scratch should not take one run per key
        raise RuleFileError(f"missing required key{'s' if len(missing) > 1 else ''} "
                            f"{', '.join(map(repr, missing))}", doc.path)
    v = _Validator(doc, data)
    name = v.string("name")
    if expect_name is not None and name != expect_name:
        raise doc.error("name", f"builtin file {expect_name}.toml must be named {expect_name!r}, not {name!r}")
    warp_size = v.choice("warp_size", (32, 64))
    banks = v.power_of_two("banks", 1, 256)
    bank_bytes = v.choice("bank_bytes", (4, 8))
    row_bytes = v.power_of_two("row_bytes", 4, 1 << 16)
    if row_bytes % (banks * bank_bytes):
        raise doc.error("row_bytes", f"must be a multiple of banks x bank_bytes = {banks * bank_bytes}, "
                                     f"got {row_bytes}")
    broadcast = v.choice("broadcast", BROADCAST, default="multicast")
    ideal = v.choice("ideal", IDEAL, default="groups")
    split_bytes = v.choice("split_bytes", WIDTHS, default=16)
    merge_stores = v.boolean("merge_stores", default=True)
    if broadcast == "single_word":
        if split_bytes > bank_bytes:
            raise doc.error("split_bytes", "single_word broadcast serves one word per lane: split_bytes must "
                                           f"not exceed bank_bytes ({bank_bytes})")
        if row_bytes != banks * bank_bytes:
            raise doc.error("row_bytes", "single_word broadcast works on words: row_bytes must equal "
                                         f"banks x bank_bytes ({banks * bank_bytes})")
        if not merge_stores:
            raise doc.error("merge_stores", "merge_stores = false is defined for multicast rule sets only")
    unmerged_kinds = v.unmerged_kinds(merge_stores)
    if broadcast == "single_word" and unmerged_kinds:
        raise doc.error("merge_same_word", "unmerged kinds are defined for multicast rule sets only")
    evidence = v.choice("evidence", EVIDENCE)
    alias_of = data.get("alias_of")
    lane_groups = v.lane_groups(warp_size)
    same_rules_as = None
    if alias_of is not None and not set(doc.data) - _DESCRIPTIVE_KEYS:
        base = _load_builtin(alias_of)
        same_rules_as = base.same_rules_as or base.name
    return RuleSet(
        name=name, title=v.string("title"), vendor=v.string("vendor"), evidence=evidence,
        notes=v.string("notes", default="").strip(), alias_of=alias_of,
        warp_size=warp_size, banks=banks, bank_bytes=bank_bytes, row_bytes=row_bytes, broadcast=broadcast,
        split_bytes=split_bytes, merge_stores=merge_stores, unmerged_kinds=unmerged_kinds,
        lane_groups=lane_groups, pairing=v.pairing(warp_size, lane_groups), matrix=v.matrix(warp_size),
        source=source, same_rules_as=same_rules_as,
        ops={**v.op_rules("atomic_ops", ATOMIC_OPS), **v.op_rules("copy_ops", COPY_OPS)}, products=v.products(),
        limits=v.limits(), arch=v.arch(), ideal=ideal, data=data)


class _Validator:
    """Typed access to the merged keys; every failure names the file, the key and the problem."""

    def __init__(self, doc: _Doc, data: dict):
        self.doc, self.data = doc, data

    def _get(self, key: str, default):
        value = self.data
        for part in key.split("."):
            if not isinstance(value, dict) or part not in value:
                if default is _MISSING:
                    raise RuleFileError(f"missing required key {key!r}", self.doc.path)
                return default
            value = value[part]
        return value

    def products(self) -> tuple[str, ...]:
        value = self._get("products", [])
        if not isinstance(value, list) or not all(isinstance(p, str) and p.strip() for p in value):
            raise self.doc.error("products", f"expected a list of product names, got {value!r}")
        return tuple(value)

    def string(self, key: str, default=None) -> str:
        value = self._get(key, _MISSING if default is None else default)
        if not isinstance(value, str) or (default is None and not value.strip()):
            raise self.doc.error(key, f"expected a non-empty string, got {value!r}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise self.doc.error(key, f"expected true or false, got {value!r}")
        return value

    def integer(self, key: str, low: int, high: int, value=None) -> int:
        """``value`` when given (a nested entry), else the key's value."""
        value = self._get(key, _MISSING) if value is None else value
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.doc.error(key, f"expected an integer from {low} to {high}, got {value!r}")
        return value

    def arch(self) -> str | None:
        """``arch``: the ptxas target of the device (``sm_90``, ``sm_90a``), or absent."""
        value = self._get("arch", None)
        if value is not None and not (isinstance(value, str) and re.fullmatch(r"sm_\d{2,3}[a-z]?", value)):
            raise self.doc.error("arch", f"expected a ptxas architecture such as 'sm_90', got {value!r}")
        return value

    def limits(self) -> LaunchLimits | None:
        table = self._get("limits", None)
        if table is None:
            return None
        if not isinstance(table, dict):
            raise self.doc.error("limits", f"expected a table, got {table!r}")
        unknown = sorted(set(table) - _LIMIT_KEYS)
        if unknown:
            raise self.doc.error(f"limits.{unknown[0]}", f"unknown key (allowed: {', '.join(sorted(_LIMIT_KEYS))})")
        for key in ("threads_per_block", "block", "shared_bytes_per_block", "source"):
            if key not in table:
                raise self.doc.error("limits", f"missing key {key!r}")

        def dims(key: str) -> tuple[int, int, int] | None:
            value = table.get(key)
            if value is None:
                return None
            if not isinstance(value, list) or len(value) != 3:
                raise self.doc.error(f"limits.{key}", f"expected [X, Y, Z], got {value!r}")
            return tuple(self.integer(f"limits.{key}", 1, (1 << 31) - 1, v) for v in value)

        source = table["source"]
        if not isinstance(source, str) or not source.strip():
            raise self.doc.error("limits.source", "expected where the limits come from (a document and table)")
        return LaunchLimits(
            threads_per_block=self.integer("limits.threads_per_block", 1, 1 << 20, table["threads_per_block"]),
            block=dims("block"), grid=dims("grid"),
            shared_bytes_per_block=self.integer("limits.shared_bytes_per_block", 0, 1 << 40,
                                                table["shared_bytes_per_block"]),
            source=" ".join(source.split()))

    def power_of_two(self, key: str, low: int, high: int) -> int:
        value = self.integer(key, low, high)
        if value & (value - 1):
            raise self.doc.error(key, f"expected a power of two, got {value}")
        return value

    def choice(self, key: str, allowed: tuple, default=None):
        value = self._get(key, _MISSING if default is None else default)
        if value not in allowed or isinstance(value, bool):
            raise self.doc.error(key, f"expected one of {', '.join(map(str, allowed))}, got {value!r}")
        return value

    def kinds(self, key: str, value, allowed: frozenset[str]) -> frozenset[str]:
        if not isinstance(value, list) or not value or any(not isinstance(k, str) or k not in allowed for k in value):
            raise self.doc.error(key, f"expected a non-empty list of kinds from {', '.join(sorted(allowed))}, "
                                      f"got {value!r}")
        return frozenset(value)

    def unmerged_kinds(self, merge_stores: bool) -> frozenset[str]:
        """Kinds that do not merge same-word lanes: write kinds when ``merge_stores`` is false, then the
        per-kind switches of ``[merge_same_word]`` (``atom = false``) on top."""
        unmerged = set() if merge_stores else set(WRITE_KINDS)
        table = self.data.get("merge_same_word", {})
        if not isinstance(table, dict):
            raise self.doc.error("merge_same_word", f"expected a table of kind = true/false, got {table!r}")
        for kind, merge in table.items():
            if kind not in KINDS:
                raise self.doc.error("merge_same_word", f"unknown kind {kind!r} (kinds: {', '.join(KINDS)})")
            if not isinstance(merge, bool):
                raise self.doc.error("merge_same_word", f"{kind}: expected true or false, got {merge!r}")
            (unmerged.discard if merge else unmerged.add)(kind)
        return frozenset(unmerged)

    def op_rules(self, key: str, operations: tuple[str, ...]) -> dict:
        """``[atomic_ops.OP]`` or ``[copy_ops.OP]`` tables: operation -> :class:`OpRule`."""
        what = {"atomic_ops": "atomic", "copy_ops": "copy"}[key]
        table = self.data.get(key, {})
        if not isinstance(table, dict):
            raise self.doc.error(key, f"expected tables [{key}.OP], got {table!r}")
        allowed = ("merge_same_word", "passes", "group_passes", "plus_plain", "model_note", "source_passes",
                   "source_model_note", "fill_passes", "fill_always")
        rules = {}
        for op, entry in table.items():
            if op not in operations:
                raise self.doc.error(key, f"unknown {what} operation {op!r} (operations: {', '.join(operations)})")
            if not isinstance(entry, dict) or set(entry) - set(allowed):
                raise self.doc.error(key, f"{key}.{op}: allowed keys are {', '.join(allowed)}")
            for flag in ("merge_same_word", "plus_plain", "fill_always"):
                if entry.get(flag) is not None and not isinstance(entry[flag], bool):
                    raise self.doc.error(key, f"{key}.{op}.{flag}: expected true or false")
            group_passes = entry.get("group_passes", "banks")
            if group_passes not in GROUP_PASSES:
                raise self.doc.error(key, f"{key}.{op}.group_passes: expected one of {', '.join(GROUP_PASSES)}, "
                                          f"got {group_passes!r}")
            source_passes = entry.get("source_passes", "")
            if source_passes not in SOURCE_PASSES or (source_passes and key != "copy_ops"):
                raise self.doc.error(key, f"{key}.{op}.source_passes: expected {SOURCE_PASSES[1]!r} (copy "
                                          f"operations only), got {source_passes!r}")
            note, source_note = (self.note_text(key, op, name, entry) for name in ("model_note", "source_model_note"))
            if source_note and not source_passes:
                raise self.doc.error(key, f"{key}.{op}.source_model_note: needs source_passes")
            fill_passes = entry.get("fill_passes", "")
            if fill_passes not in FILL_PASSES or (fill_passes and not source_passes):
                raise self.doc.error(key, f"{key}.{op}.fill_passes: expected {FILL_PASSES[1]!r} (with source_passes), "
                                          f"got {fill_passes!r}")
            if entry.get("fill_always") and not fill_passes:
                raise self.doc.error(key, f"{key}.{op}.fill_always: needs fill_passes")
            rules[op] = OpRule(entry.get("merge_same_word"), self.integer(f"{key}.{op}.passes", 1, 8,
                                                                          entry.get("passes", 1)),
                               group_passes, bool(entry.get("plus_plain", False)), note, source_passes, source_note,
                               fill_passes, bool(entry.get("fill_always", False)))
        return rules

    def note_text(self, key: str, op: str, name: str, entry: dict) -> str:
        """``model_note`` / ``source_model_note`` of ``[key.op]``: one line of text ("" when absent)."""
        note = entry.get(name, "")
        if not isinstance(note, str) or (note and (not note.strip() or not note.isprintable())):
            raise self.doc.error(key, f"{key}.{op}.{name}: expected one line of text, got {note!r}")
        return note.strip()

    def lane_groups(self, warp_size: int) -> tuple[LaneGroupRule, ...]:
        entries = self.data["lane_groups"]
        if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
            raise self.doc.error("lane_groups", "expected one or more [[lane_groups]] tables")
        rules = []
        for i, entry in enumerate(entries):
            key = f"lane_groups[{i}]"
            extra = set(entry) - {"bytes", "kinds", "lanes", "groups", "extra_wavefronts"}
            if extra:
                raise self.doc.error(f"{key}.{sorted(extra)[0]}",
                                     "unknown key (allowed: bytes, kinds, lanes, groups, extra_wavefronts)")
            widths = entry.get("bytes")
            if not isinstance(widths, list) or not widths or any(w not in WIDTHS for w in widths):
                raise self.doc.error(f"{key}.bytes", f"expected a list of widths from {WIDTHS}, got {widths!r}")
            kinds = self.kinds(f"{key}.kinds", entry["kinds"], LANE_KINDS) if "kinds" in entry else None
            if ("lanes" in entry) == ("groups" in entry):
                raise self.doc.error(f"{key}.lanes", "give exactly one of lanes = N or groups = [[lanes], ...]")
            if "lanes" in entry:
                size = self.integer(f"{key}.lanes", 1, warp_size, entry["lanes"])
                if warp_size % size:
                    raise self.doc.error(f"{key}.lanes", f"{size} does not divide the warp size {warp_size}")
                groups = tuple(tuple(range(start, start + size)) for start in range(0, warp_size, size))
            else:
                groups = self._explicit_groups(f"{key}.groups", entry["groups"], warp_size)
            extra_wavefronts = self.integer(f"{key}.extra_wavefronts", 0, 16, entry.get("extra_wavefronts", 0))
            rules.append(LaneGroupRule(frozenset(widths), kinds, groups, extra_wavefronts))
        return tuple(rules)

    def _explicit_groups(self, key: str, groups, warp_size: int) -> tuple[tuple[int, ...], ...]:
        if (not isinstance(groups, list) or not groups
                or not all(isinstance(g, list) and g and all(isinstance(x, int) for x in g) for g in groups)):
            raise self.doc.error(key, f"expected a list of lane lists, got {groups!r}")
        flat = sorted(lane for group in groups for lane in group)
        if flat != list(range(warp_size)):
            raise self.doc.error(key, f"the groups must cover lanes 0..{warp_size - 1} exactly once")
        if len({len(g) for g in groups}) != 1:
            raise self.doc.error(key, "all groups must have the same number of lanes")
        return tuple(tuple(g) for g in groups)

    def pairing(self, warp_size: int, lane_groups: tuple[LaneGroupRule, ...]) -> PairingRule | None:
        table = self.data.get("pairing")
        if table is None:
            return None
        if not isinstance(table, dict) or set(table) - {"kinds", "min_bytes", "partners", "factor"}:
            raise self.doc.error("pairing", "expected a table with kinds, min_bytes, partners, factor")
        kinds = self.kinds("pairing.kinds", table.get("kinds"), LANE_KINDS)
        min_bytes = self.choice("pairing.min_bytes", WIDTHS)
        partners = table.get("partners")
        if (not isinstance(partners, list) or not partners
                or any(isinstance(p, bool) or not isinstance(p, int) or not 0 < p < warp_size for p in partners)):
            raise self.doc.error("pairing.partners", f"expected lane xors from 1 to {warp_size - 1}, got {partners!r}")
        factor = self.power_of_two("pairing.factor", 2, warp_size)
        for rule in lane_groups:
            merged = any(w >= min_bytes for w in rule.bytes) and (rule.kinds is None or rule.kinds & kinds)
            if merged and len(rule.groups) % factor:
                raise self.doc.error("pairing.factor", f"{factor} does not divide the {len(rule.groups)} lane "
                                                       "groups it would merge")
        return PairingRule(kinds, min_bytes, tuple(partners), factor)

    def matrix(self, warp_size: int) -> MatrixRule | None:
        table = self.data.get("matrix")
        if table is None:
            return None
        if not isinstance(table, dict) or set(table) - {"kinds", "lanes", "row_bytes"}:
            raise self.doc.error("matrix", "expected a table with kinds, lanes, row_bytes")
        kinds = self.kinds("matrix.kinds", table.get("kinds"), MATRIX_KINDS)
        lanes = self.power_of_two("matrix.lanes", 1, warp_size)
        row_bytes = self.choice("matrix.row_bytes", WIDTHS)
        return MatrixRule(kinds, lanes, row_bytes)

