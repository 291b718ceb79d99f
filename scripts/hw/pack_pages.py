#!/usr/bin/env python3
"""Pack a table probe's trimmed Source pages (DATA/pages/*.csv, one per launch) into DATA/pages.tar.xz and remove
the folder: the device tool sends the repository as a tar of at most 64 MiB, where a thousand small pages cost
their headers and text; the archive is byte-for-byte reproducible (sorted names, no times or owners).

    python3 scripts/hw/pack_pages.py tests/data/hw/PROBE
"""

from __future__ import annotations

import io
import shutil
import sys
import tarfile
from pathlib import Path

ARCHIVE = "pages.tar.xz"


def pack(data: Path) -> Path:
    folder, archive = data / "pages", data / ARCHIVE
    with tarfile.open(archive, "w:xz", preset=9) as tar:
        for page in sorted(folder.iterdir()):
            info = tarfile.TarInfo(page.name)
            info.size, info.mode = page.stat().st_size, 0o644
            tar.addfile(info, io.BytesIO(page.read_bytes()))
    shutil.rmtree(folder)
    return archive


def unpack(data: Path, folder: Path) -> Path:
    """DATA's pages in ``folder`` (made): the archive's where the probe's pages are packed, else the folder's."""
    if not (data / ARCHIVE).exists():
        folder.symlink_to(data / "pages")
        return folder
    folder.mkdir()
    with tarfile.open(data / ARCHIVE) as tar:
        tar.extractall(folder, filter="data")
    return folder


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(pack(Path(sys.argv[1])))
