"""A fresh PostgreSQL database for a test, on the server the suite uses (services.sh starts it).

Skipped where PostgreSQL is unreachable, failed instead under SPECBENCH_REQUIRE_POSTGRES=1 (CI);
dropped, with its connections, at the end.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import create_engine, make_url, text

PG_ADMIN_URL = os.environ.get(
    "SPECBENCH_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


@contextmanager
def fresh_database(prefix: str = "specbench_test") -> Iterator[str]:
    """The URL of a new, empty database, unique to this call."""
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
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(3)}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
