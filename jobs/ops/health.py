"""Health checks for compose and other supervisors: `python -m jobs.ops.health bot|worker|beat`.

Exit 0 healthy, 1 not, with one line saying why. Long-running processes prove they are alive by
touching a heartbeat file, `$SPECBENCH_DATA_DIR/heartbeat/ROLE`, every `HEARTBEAT_INTERVAL_S`
(`start_heartbeat`, or `touch_heartbeat` from a loop of their own); the check passes while the
file is younger than `--max-age`. A bot in HTTP mode is checked over HTTP instead:
`--http PORT` asks `GET /healthz` on localhost for a 200.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from jobs import __version__, settings

HEARTBEAT_INTERVAL_S = 15.0
DEFAULT_MAX_AGE_S = 90.0  # six missed beats: a busy process is slow, not dead
_ROLE = re.compile(r"^[a-z][a-z0-9_.-]{0,63}$")


def heartbeat_path(role: str) -> Path:
    if not _ROLE.match(role):
        raise ValueError(f"bad heartbeat role {role!r}: lowercase letters, digits, _ . -")
    return settings.data_dir() / "heartbeat" / role


def touch_heartbeat(role: str) -> Path:
    """Record that `role` (bot, worker, beat, or e.g. worker-gpu2) is alive now."""
    path = heartbeat_path(role)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{role}.{os.getpid()}.tmp")
    scratch.write_text(
        json.dumps({"role": role, "pid": os.getpid(), "version": __version__, "at": time.time()}),
        encoding="utf-8",
    )
    os.replace(scratch, path)  # atomic: a check never reads half a file
    return path


def heartbeat_age(role: str, *, now: float | None = None) -> float | None:
    """Seconds since `role` last touched its heartbeat; None when it never did."""
    try:
        touched = heartbeat_path(role).stat().st_mtime
    except FileNotFoundError:
        return None
    return max(0.0, (time.time() if now is None else now) - touched)


class Heartbeat:
    """A daemon thread that touches a role's heartbeat until `stop()` (which removes it)."""

    def __init__(
        self, role: str, *, interval: float, is_alive: Callable[[], bool] | None
    ) -> None:
        self.role = role
        self._interval = interval
        self._is_alive = is_alive
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._beat, name=f"heartbeat-{role}", daemon=True
        )

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stopped.is_set():
            try:
                if self._is_alive is None or self._is_alive():
                    touch_heartbeat(self.role)
            except Exception:  # noqa: BLE001 - a failed beat must not kill the process it watches
                pass
            self._stopped.wait(self._interval)

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=self._interval + 1.0)
        heartbeat_path(self.role).unlink(missing_ok=True)


def start_heartbeat(
    role: str,
    *,
    interval: float = HEARTBEAT_INTERVAL_S,
    is_alive: Callable[[], bool] | None = None,
) -> Heartbeat:
    """Touch `role`'s heartbeat every `interval` s, while `is_alive()` (when given) says so."""
    return Heartbeat(role, interval=interval, is_alive=is_alive).start()


def check_heartbeat(role: str, *, max_age: float = DEFAULT_MAX_AGE_S) -> tuple[bool, str]:
    age = heartbeat_age(role)
    where = heartbeat_path(role)
    if age is None:
        return False, f"{role}: no heartbeat at {where}"
    if age > max_age:
        return False, f"{role}: heartbeat {age:.0f} s old (limit {max_age:.0f} s) at {where}"
    return True, f"{role}: heartbeat {age:.0f} s old"


def check_http(
    port: int, *, host: str = "127.0.0.1", path: str = "/healthz", timeout: float = 5.0
) -> tuple[bool, str]:
    url = f"http://{host}:{port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - local URL
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (OSError, ValueError) as exc:
        return False, f"GET {url}: {exc}"
    return status == 200, f"GET {url}: {status}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.ops.health", description="exit 0 when the process is healthy, else 1"
    )
    parser.add_argument("role", help="bot, worker or beat (or a role name given to heartbeat)")
    parser.add_argument("--http", type=int, metavar="PORT",
                        help="a bot in HTTP mode: GET /healthz on this port instead")
    parser.add_argument("--max-age", type=float, default=DEFAULT_MAX_AGE_S, metavar="S",
                        help=f"oldest acceptable heartbeat (default {DEFAULT_MAX_AGE_S:.0f})")
    parser.add_argument("--quiet", action="store_true", help="print nothing")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.http is not None:
            healthy, why = check_http(args.http)
        else:
            healthy, why = check_heartbeat(args.role, max_age=args.max_age)
    except ValueError as exc:
        healthy, why = False, str(exc)
    if not args.quiet:
        print(f"{'healthy' if healthy else 'unhealthy'}: {why}", file=sys.stdout)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
