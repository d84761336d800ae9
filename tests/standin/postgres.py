"""A fresh PostgreSQL database for a test, on the server the suite uses (services.sh starts it).

Skipped where PostgreSQL is unreachable, failed instead under SPECBENCH_REQUIRE_POSTGRES=1 (CI);
dropped, with its connections, at the end.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, make_url, text
from sqlalchemy.exc import OperationalError

PG_ADMIN_URL = os.environ.get(
    "SPECBENCH_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


def admin_engine() -> Engine:
    """An AUTOCOMMIT engine on the server's admin database; the test is skipped (failed under
    SPECBENCH_REQUIRE_POSTGRES=1) where PostgreSQL is unreachable."""
    try:
        admin = create_engine(
            PG_ADMIN_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3}
        )
        with admin.connect() as connection:
            connection.execute(text("SELECT 1"))
    except Exception as exc:  # no driver, no server: both mean "not here"
        if os.environ.get("SPECBENCH_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required but unreachable: {exc}")
        pytest.skip(f"PostgreSQL unreachable at {PG_ADMIN_URL}: {type(exc).__name__}")
    return admin


@contextmanager
def fresh_database(prefix: str = "specbench_test") -> Iterator[str]:
    """The URL of a new, empty database, unique to this call."""
    admin = admin_engine()
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(3)}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@dataclass
class SmallVolume:
    """A PostgreSQL database whose every file lies on a tmpfs of a few MiB (a tablespace of its
    own): `fill()` makes its volume full, as a full disk under PostgreSQL's data is (a write
    that needs a new page fails with DiskFull, SQLSTATE 53100, reads go on), `free()` gives the
    space back."""

    url: str
    admin: Engine

    def fill(self) -> None:
        """Fill the volume: ever smaller rows until even one page cannot be added."""
        with self.admin.connect() as connection:
            connection.execute(text(
                f"CREATE TABLE {FILLER} (b bytea); "
                f"ALTER TABLE {FILLER} ALTER b SET STORAGE EXTERNAL"))  # no compression
            for size in (1 << 20, 1 << 16, 1 << 12, 1 << 9):
                while True:
                    try:
                        connection.execute(text(
                            f"INSERT INTO {FILLER} SELECT repeat('x', :n)::bytea"), {"n": size})
                    except OperationalError as exc:
                        if getattr(exc.orig, "sqlstate", None) != DISK_FULL:
                            raise
                        break

    def free(self) -> None:
        with self.admin.connect() as connection:
            connection.execute(text(f"DROP TABLE IF EXISTS {FILLER}"))


FILLER = "specbench_test_filler"
DISK_FULL = "53100"  # PostgreSQL's disk_full


@contextmanager
def small_volume(size_mib: int = 24) -> Iterator[SmallVolume]:
    """A fresh database on a tmpfs of `size_mib` MiB; skipped where this process cannot mount
    one for the PostgreSQL server (not root, or the server is not on this host)."""
    import pwd
    import shutil
    import subprocess

    parsed = make_url(PG_ADMIN_URL)
    if parsed.host not in ("127.0.0.1", "localhost", None):
        pytest.skip(f"PostgreSQL at {parsed.host} is not on this host: no tablespace here")
    try:
        owner = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no postgres user here to own a tablespace")
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for PostgreSQL needs root")
    admin = admin_engine()  # skips without PostgreSQL
    # Under /tmp, not the test's tmp_path: the server (user postgres) must reach the folder.
    folder = Path(f"/tmp/specbench-pgfull-{os.getpid()}-{secrets.token_hex(3)}")
    folder.mkdir(mode=0o755)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m,mode=0700,uid={owner.pw_uid},"
         f"gid={owner.pw_gid}", "tmpfs", str(folder)], capture_output=True, text=True)
    if mounted.returncode != 0:
        folder.rmdir()
        admin.dispose()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    space = f"specbench_small_{secrets.token_hex(3)}"
    name = f"specbench_full_{os.getpid()}_{secrets.token_hex(3)}"
    url = make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    try:
        with admin.connect() as connection:
            connection.execute(text(f"CREATE TABLESPACE {space} LOCATION '{folder}'"))
            connection.execute(text(
                f'CREATE DATABASE "{name}" TABLESPACE {space} STRATEGY FILE_COPY'))
        own = create_engine(url, isolation_level="AUTOCOMMIT")
        try:
            yield SmallVolume(url=url, admin=own)
        finally:
            own.dispose()
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                connection.execute(text(f"DROP TABLESPACE IF EXISTS {space}"))
    finally:
        admin.dispose()
        subprocess.run(["umount", "--lazy", str(folder)], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
