"""Data files an engine ships under config/ (flag tables, type tables), found the way every
config file is: the explicit path, else the config folder's copy, else the shipped one."""

from __future__ import annotations

from pathlib import Path

from jobs import settings
from jobs.errors import PresetError


def locate(name: str, path: Path | None, *, what: str) -> tuple[Path, int, int]:
    """`path`, else config_dir()/name, else the shipped copy; resolved, with its mtime and size
    (the cache key of its parsed form)."""
    target = path or settings.config_dir() / name
    if path is None and not target.is_file():
        package = Path(settings.__file__).resolve().parent
        inside = package / "_shipped" / "config" / name
        target = inside if inside.is_file() else package.parent / "config" / name
    resolved = target.resolve()
    try:
        stat = resolved.stat()
    except OSError as exc:
        raise PresetError(f"{resolved}: cannot read {what}: {exc.strerror}") from None
    return resolved, stat.st_mtime_ns, stat.st_size
