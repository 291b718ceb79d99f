"""Where each shared variable lives inside the CTA's shared-memory window.

Static variables are placed in declaration order, each at the next multiple
of its alignment (what ptxas does for the simple cases this tool targets; the
real allocator may reorder, which shifts every address of a variable by the
same amount and changes bank conflicts only across variables).  Every
``.extern .shared`` array aliases one dynamic region placed after the static
ones, aligned to the largest alignment any extern declaration asks for, and
``dynamic_smem`` bytes long.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SharedLayout:
    variables: list[dict]      # {"name", "offset", "bytes", "align", "extern"}
    static_bytes: int
    dynamic_offset: int
    dynamic_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.dynamic_offset + self.dynamic_bytes if self.dynamic_bytes else self.static_bytes

    def offset_of(self, name: str) -> int | None:
        for variable in self.variables:
            if variable["name"] == name:
                return variable["offset"]
        return None

    def has_extern(self) -> bool:
        return any(v["extern"] for v in self.variables)


def _align(value: int, alignment: int) -> int:
    alignment = max(1, alignment)
    return (value + alignment - 1) // alignment * alignment


def lay_out(declarations: list[dict], dynamic_smem: int) -> SharedLayout:
    """Place declarations (SHARED_VAR_TYPE dicts, first one of each name wins) in the window."""
    seen, static, extern = set(), [], []
    for declaration in declarations:
        if declaration["name"] in seen:
            continue
        seen.add(declaration["name"])
        (extern if declaration.get("extern") else static).append(declaration)
    variables, end = [], 0
    for declaration in static:
        align = int(declaration.get("align") or 1)
        offset = _align(end, align)
        size = int(declaration.get("bytes") or 0)
        variables.append({"name": declaration["name"], "offset": offset, "bytes": size, "align": align,
                          "extern": False})
        end = offset + size
    extern_align = max([int(d.get("align") or 1) for d in extern] + [1])
    dynamic_offset = _align(end, extern_align)
    for declaration in extern:
        variables.append({"name": declaration["name"], "offset": dynamic_offset, "bytes": dynamic_smem,
                          "align": int(declaration.get("align") or 1), "extern": True})
    return SharedLayout(variables, end, dynamic_offset, dynamic_smem)
