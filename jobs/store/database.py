"""The store's database: one SQLAlchemy engine, its sessions and the schema's lazy migration.

Every public write of the store is its own transaction (`_write`), so a crash mid-batch loses at
most the run in flight. The schema belongs to Alembic (`jobs/store/migrations`): a store migrates
lazily, once, on its first use, or when `migrate()` is called; a new database is built at the
head from the models. Datetimes are tz-aware UTC on both backends. The store's parts
(`jobs.store.store`, `runs`, `leases`, `posts`) share this base.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from sqlalchemy import (
    Column,
    CursorResult,
    MetaData,
    PrimaryKeyConstraint,
    Result,
    String,
    Table,
    create_engine,
    event,
    func,
    inspect,
    text,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import (
    ArgumentError,
    IntegrityError,
    NoSuchModuleError,
    OperationalError,
    ProgrammingError,
)
from sqlalchemy.orm import Session
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql.elements import ColumnElement

from jobs import redaction, settings
from jobs.errors import SettingError
from jobs.extras import require
from jobs.store.connections import Timeouts, create_server_engine
from jobs.store.schema import Base, Batch

_MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_MIGRATION_LOCK = 0x5BE7C4  # PostgreSQL advisory lock key held while migrating
_IMMEDIATE = "specbench_immediate"  # execution option: open SQLite write transactions eagerly
NO_SYNC = {"synchronize_session": False}


class UnknownBatch(LookupError):
    """A write named a batch the store does not hold (a bug in the caller, not user input)."""


class Database:
    """One SQLAlchemy URL (default: `settings.database_url()`), migrated on first use."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or settings.database_url()
        self._engine = _create_engine(self.url)
        self._writer = self._engine.execution_options(**{_IMMEDIATE: True})
        self._migrated = False
        self._lock = threading.Lock()

    def close(self) -> None:
        self._engine.dispose()

    def migrate(self) -> None:
        """`alembic upgrade head`, idempotent; concurrent callers queue on a lock, then no-op.
        A database already at the head is read as such without Alembic, whose import is most
        of a command's start (`is_at_head`); a new one is built at the head without it
        (`_create_at_head`)."""
        if self.is_at_head():
            self._migrated = True
            return
        for attempt in (1, 2):
            try:
                with self._writer.begin() as connection:
                    _lock_for_migration(connection)
                    if _is_new(connection):
                        _create_at_head(connection)
                    else:
                        _upgrade(connection)
                break
            except (OperationalError, ProgrammingError, IntegrityError):
                if attempt == 2:  # a lost "already exists" race succeeds on the retry
                    raise
        self._migrated = True

    def is_at_head(self) -> bool:
        """Whether the schema's recorded revision is the newest migration's (`head_revision`);
        False when there is no schema yet, or the database cannot say."""
        try:
            with self._engine.connect() as connection:
                found = connection.execute(text("SELECT version_num FROM alembic_version")).all()
        except (OperationalError, ProgrammingError):
            return False  # no alembic_version table yet: a new database
        return [row[0] for row in found] == [head_revision()]

    def _update(self, batch_id: str, **values: Any) -> bool:
        """Set columns of one batch; False when there is no such batch."""
        query = update(Batch).where(Batch.id == batch_id).values(values)
        with self._write() as session:
            return rowcount(session.execute(query, execution_options=NO_SYNC)) == 1

    def _ensure_migrated(self) -> None:
        if self._migrated:
            return
        with self._lock:
            if not self._migrated:
                self.migrate()

    @contextmanager
    def _read(self) -> Iterator[Session]:
        self._ensure_migrated()
        with Session(self._engine) as session, session.begin():
            yield session

    @contextmanager
    def _write(self) -> Iterator[Session]:
        self._ensure_migrated()
        with Session(self._writer) as session, session.begin():
            yield session


def now() -> datetime:
    return datetime.now(UTC)


def rowcount(result: Result[Any]) -> int:
    return cast(CursorResult[Any], result).rowcount


def _create_engine(url: str) -> Engine:
    """The engine, with connect and statement timeouts (jobs.store.connections)."""
    parsed = checked_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_server_engine(parsed)
    memory = parsed.database in (None, "", ":memory:")
    if not memory:
        folder = Path(str(parsed.database)).parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _setting_error(url, f"cannot make the SQLite file's folder {folder} "
                                      f"({exc.strerror or exc})") from None
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": Timeouts.from_env().statement_s},
        poolclass=StaticPool if memory else None,
    )
    event.listen(engine, "connect", _on_sqlite_connect)
    event.listen(engine, "begin", _on_sqlite_begin)
    return engine


BACKENDS = ("sqlite", "postgresql")
"""The databases the store runs on (its JSON queries and migration lock are theirs)."""


def checked_url(url: str) -> URL:
    """`url` parsed, or a SettingError naming the setting it came from and why it cannot be a
    store: not a URL, another database, a driver that is not installed."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise _setting_error(url, "not a database URL; e.g. postgresql://USER:PASSWORD@HOST/DB "
                                  "or sqlite:////PATH/specbench.db") from None
    backend = parsed.get_backend_name()
    if backend not in BACKENDS:
        raise _setting_error(url, f"the store runs on {' or '.join(BACKENDS)}, not {backend!r}")
    if backend == "postgresql" and parsed.get_driver_name() == "psycopg":
        require(("postgres", "a PostgreSQL store (SPECBENCH_DATABASE_URL)"))
    try:
        dialect = parsed.get_dialect()
        dialect.import_dbapi()
    except (NoSuchModuleError, ImportError) as exc:
        raise _setting_error(url, f"no driver {parsed.drivername!r} here ({exc})") from None
    if getattr(dialect, "is_async", False):
        raise _setting_error(url, f"{parsed.drivername!r} is an asyncio driver; the store "
                                  "takes a plain one, e.g. postgresql://")
    return parsed


def _setting_error(url: str, why: str) -> SettingError:
    """The error of a store URL, naming the setting it came from: SPECBENCH_DATABASE_URL, or
    the data dir the default SQLite file lives in."""
    if os.environ.get("SPECBENCH_DATABASE_URL"):
        return SettingError(f"SPECBENCH_DATABASE_URL is {redaction.redact_urls(url)!r}: {why}")
    return SettingError(f"SPECBENCH_DATA_DIR: {why}")


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # pysqlite's own transaction handling skips BEGIN for DDL and SELECT; we emit it ourselves.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    # the worker thread and the CLI share the file: a writer waits for the other's lock
    cursor.execute(f"PRAGMA busy_timeout = {int(Timeouts.from_env().statement_s * 1000)}")
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()


def _on_sqlite_begin(connection: Connection) -> None:
    # Writers take the lock up front: a deferred transaction upgraded later can fail at once.
    immediate = connection.get_execution_options().get(_IMMEDIATE)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def head_revision() -> str:
    """The newest migration's revision: the versions form one chain, each file named after its
    revision (`0008_engine_stack_keys.py` is "0008"; a test holds this to Alembic's own head)."""
    return max(p.name.split("_", 1)[0] for p in (_MIGRATIONS / "versions").glob("[0-9]*_*.py"))


def _is_new(connection: Connection) -> bool:
    """Whether the database holds none of the store's tables and no recorded revision (other
    tables, as in a shared PostgreSQL database, are not the store's business)."""
    ours = {*Base.metadata.tables, "alembic_version"}
    return not ours & set(inspect(connection).get_table_names())


def _create_at_head(connection: Connection) -> None:
    """Alembic's own recipe for a database built from scratch: the models' tables, then the head
    stamped as its revision (tests/jobs/test_store.py holds the models to what the migrations
    build). The version table is the one Alembic makes, key name included."""
    Base.metadata.create_all(connection)
    version = Table("alembic_version", MetaData(),
                    Column("version_num", String(32), nullable=False),
                    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"))
    version.create(connection)
    connection.execute(version.insert().values(version_num=head_revision()))


def _upgrade(connection: Connection) -> None:
    """`alembic upgrade head` on `connection`, inside its transaction."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


def _lock_for_migration(connection: Connection) -> None:
    """Serialise concurrent migrators; on SQLite, BEGIN IMMEDIATE already has."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})


def json_path(column: Any, path: Sequence[str], *, dialect: str) -> ColumnElement[Any]:
    """A member of a JSON text column, as text, extracted by the database (no decoding here)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import JSONB  # (see jobs.store.runs: imported here)

        return func.jsonb_extract_path_text(sql_cast(column, JSONB), *path)
    return func.json_extract(column, "$." + ".".join(path))
