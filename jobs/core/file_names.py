"""File names made from names: a configuration's server log and the files beside it.

An approach's name is the preset's and a sweep point's (`NAME@K=V,K=V`) grows with its grid:
eight long env knobs make a name no file system takes (255 bytes a name), and a grid value may
hold a `/` or a space. `file_stem` keeps a short, plain name as it is (the log of `eagle3` is
`eagle3.log`) and makes any other a bounded stem of the safe characters, with a hash of the whole
name, so that two names never share a file (docs/contracts.md "Bad input and bad days").
"""

from __future__ import annotations

import hashlib
import re

MAX_STEM_BYTES = 120
"""A stem's longest: room is left for what follows it (`.bench.max-concurrency64.rep3.<hex>.json`,
`.levels.json` and its temporary copy) within a file system's 255 bytes."""

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@=,+-]*")
_UNSAFE = re.compile(r"[^A-Za-z0-9._@=,+-]")
_HASH_CHARS = 16


def file_stem(name: str) -> str:
    """The stem of the files named after `name`: the name itself when it is plain (letters,
    digits and `._@=,+-`, a letter or digit first) and at most MAX_STEM_BYTES long; otherwise
    its safe characters, cut, then `~` and a hash of the whole name (`~` is never in a plain
    name, so a made stem never equals another name's own)."""
    if len(name) <= MAX_STEM_BYTES and _PLAIN.fullmatch(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    safe = _UNSAFE.sub("_", name)[: MAX_STEM_BYTES - _HASH_CHARS - 1].lstrip(".")
    return f"{safe}~{digest}"
