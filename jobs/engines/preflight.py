"""Flag checks before any server starts: every server arg against `launch_server --help`.

Each configuration is first spelled the way the installed release spells it (renamed knobs from
config/sglang_flags.yaml, see flag_table); then every flag must be in the release's help and
every value among its choices. A refusal reads the way the release's argparse would put it (its
prog, "unrecognized arguments", "invalid choice"), so the failure rules classify it as
`bad-config`, with a hint when the table knows why (a flag newer than the release, or in none).
The version and the help text come from sglang_probe, cached per installation.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from jobs.core.plans import BatchPlan
from jobs.engines.flag_table import FlagTable, to_release
from jobs.engines.flags import to_flag as to_flag  # re-exported for jobs.engines.sglang
from jobs.engines.sglang_probe import (  # re-exported: preflight is where callers look
    LaunchHelp as LaunchHelp,
)
from jobs.engines.sglang_probe import clear_memory as clear_memory
from jobs.engines.sglang_probe import known_flags as known_flags
from jobs.engines.sglang_probe import known_help as known_help
from jobs.engines.sglang_probe import parse_help_choices as parse_help_choices
from jobs.engines.sglang_probe import parse_help_flags as parse_help_flags
from jobs.engines.sglang_probe import resolve_python as resolve_python
from jobs.engines.sglang_probe import sglang_version as sglang_version

PROG = "launch_server.py"  # argparse's prog for `python -m sglang.launch_server` before 0.5.14


def unknown_flags_reason(
    server_args: Mapping[str, Any],
    known: Iterable[str],
    *,
    prog: str = PROG,
    version: str | None = None,
    table: FlagTable | None = None,
) -> str | None:
    """Argparse's rejection of the unknown flags among `server_args`, or None if all are known."""
    known_set = set(known)
    unknown = [to_flag(k) for k in server_args if to_flag(k) not in known_set]
    if not unknown:
        return None
    reason = f"{prog}: error: unrecognized arguments: {' '.join(unknown)}"
    if version is not None and table is not None:
        why = [hint for flag in unknown if (hint := table.hint(flag, version))]
        if why:
            return reason + f" ({'; '.join(why)})"
    candidates = sorted(f for f in known_set if f.startswith("--"))
    hints = [(flag, hint) for flag in unknown if (hint := _suggest(flag, candidates))]
    if len(unknown) == 1 and hints:
        reason += f" (did you mean {hints[0][1]}?)"
    elif hints:
        reason += " (did you mean " + ", ".join(f"{h} for {f}" for f, h in hints) + "?)"
    return reason


def invalid_choice_reason(
    server_args: Mapping[str, Any],
    choices: Mapping[str, Iterable[str]],
    *,
    prog: str = PROG,
    version: str | None = None,
    table: FlagTable | None = None,
) -> str | None:
    """Argparse's rejection of the first value outside its flag's choices, or None."""
    for key, value in server_args.items():
        allowed = tuple(choices.get(to_flag(key), ()))
        if not allowed or value is None or isinstance(value, bool):
            continue
        for item in value if isinstance(value, list | tuple) else [value]:
            if str(item) in allowed:
                continue
            listed = ", ".join(repr(c) for c in allowed)
            reason = (f"{prog}: error: argument {to_flag(key)}: invalid choice: {str(item)!r} "
                      f"(choose from {listed})")
            hint = table.hint(key, version, value=item) if table and version else None
            return reason + (f" ({hint})" if hint else "")
    return None


def _suggest(flag: str, candidates: list[str]) -> str | None:
    """A flag renamed by a suffix (`--x` -> `--x-decode`) first, else the closest spelling."""
    longer = [c for c in candidates if c.startswith(flag + "-")][:3]
    if longer:
        return " or ".join(longer)
    close = difflib.get_close_matches(flag, candidates, n=1, cutoff=0.6)
    return close[0] if close else None


def check_plan(
    plan: BatchPlan,
    known: Iterable[str] | LaunchHelp,
    *,
    table: FlagTable | None = None,
) -> dict[str, str]:
    """Approach name -> argparse-style reason, for every configuration the release refuses.

    With a LaunchHelp (and a table) each configuration is spelled for that release first, and
    values are checked against the choices too.
    """
    if isinstance(known, LaunchHelp):
        help_: LaunchHelp | None = known
        flags = known.flags
    else:
        help_, flags = None, frozenset(known)
    out: dict[str, str] = {}
    for config in plan.configs:
        args = config.server_args
        kwargs: dict[str, Any] = {}
        if help_ is not None:
            if table is not None:
                args = to_release(config, help_.version, table).server_args
            kwargs = {"prog": help_.prog, "version": help_.version, "table": table}
        reason = unknown_flags_reason(args, flags, **kwargs)
        if reason is None and help_ is not None:
            reason = invalid_choice_reason(args, help_.choices, **kwargs)
        if reason is not None:
            out[config.approach] = reason
    return out
