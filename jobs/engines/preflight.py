"""Flag checks before any server starts: every server arg against the server's `--help`.

Each configuration is first spelled the way the installed release spells it (the engine's flag
table, when it has one, renames knobs); then every flag must be in the release's help (or,
where the release's argparse takes abbreviations, abbreviate exactly one of its flags) and every
value among its choices. A refusal reads the way the release's argparse would put it (its prog,
"unrecognized arguments", "invalid choice"), so the failure rules classify it as `bad-config`,
with a hint when the table knows why (a flag newer than the release, or in none). The version
and the help text come from jobs.engines.probe, cached per installation.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from jobs.core.plans import BatchPlan, RunConfig
from jobs.engines.flags import to_flag
from jobs.engines.probe import LaunchHelp


class FlagTable(Protocol):
    """An engine's knowledge of its flags across releases (renamed, bounded)."""

    def hint(self, flag: str, version: str, *, value: Any = None) -> str | None: ...

    def respell(self, config: RunConfig, version: str) -> RunConfig: ...


def unknown_flags_reason(
    server_args: Mapping[str, Any],
    known: Iterable[str],
    *,
    prog: str,
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
    prog: str,
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
    known: LaunchHelp,
    *,
    table: FlagTable | None = None,
    abbreviations: bool = False,
) -> dict[str, str]:
    """Approach name -> argparse-style reason (in the release's prog), for every configuration
    the release refuses.

    With a table each configuration is spelled for that release first; values are checked
    against the choices too. `abbreviations`: the release's parser takes an unambiguous prefix
    of a flag for the flag (argparse's allow_abbrev), so this check does too, and refuses an
    ambiguous one as argparse does (a prefix of several flags).
    """
    flags = known.flags
    said: dict[str, Any] = {"prog": known.prog, "version": known.version, "table": table}
    out: dict[str, str] = {}
    for config in plan.configs:
        args = config.server_args
        if table is not None:
            args = table.respell(config, known.version).server_args
        reason = None
        if abbreviations:
            reason = ambiguous_reason(args, flags, prog=known.prog)
            args = {_expanded(k, flags): v for k, v in args.items()}
        reason = reason or unknown_flags_reason(args, flags, **said)
        if reason is None:
            reason = invalid_choice_reason(args, known.choices, **said)
        if reason is not None:
            out[config.approach] = reason
    return out


def ambiguous_reason(server_args: Mapping[str, Any], known: Iterable[str], *,
                     prog: str) -> str | None:
    """Argparse's refusal of the first flag that abbreviates several (allow_abbrev), or None.

    Argparse lists the matches in the order the parser added them; the help loses that order
    for some releases (a help sorted by name), so they are listed sorted here."""
    flags = frozenset(known)
    for key in server_args:
        flag = to_flag(key)
        longer = sorted(f for f in flags if f.startswith(flag) and f != flag)
        if flag not in flags and len(longer) > 1:
            return f"{prog}: error: ambiguous option: {flag} could match {', '.join(longer)}"
    return None


def _expanded(key: str, flags: frozenset[str]) -> str:
    """`key` as the one flag it abbreviates, as argparse reads it; itself when it is a flag,
    ambiguous or no prefix at all (the refusal then names what was written)."""
    flag = to_flag(key)
    if flag in flags:
        return key
    longer = [f for f in flags if f.startswith(flag)]
    return longer[0][2:] if len(longer) == 1 else key
