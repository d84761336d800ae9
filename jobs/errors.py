"""The one error hierarchy of specbench.

    SpecbenchError                 any failure specbench itself reports
    ├── UserError                  bad input: exit 2, a one-line message fit for chat
    │   ├── PresetError            unknown preset, invalid YAML, unknown key, dangling extends
    │   ├── KnobError              unknown or non-overridable knob in --set
    │   ├── RecordError            a malformed run record
    │   ├── SettingError           an environment variable specbench cannot use
    │   ├── StackError             a stacks file that cannot be used, or a stack it lacks
    │   └── WorkloadError          a workload file that cannot be used (names the file, line)
    └── InfraError                 the infrastructure failed: exit 1
        ├── BrokerError            the broker cannot be reached
        └── EngineError            an engine could not be started at all

Anything else is a bug: logged with its traceback, answered with an apology and an ID.
"""

from __future__ import annotations

import difflib

from jobs.redaction import redact_urls


class SpecbenchError(Exception):
    """A failure specbench reports itself; `str()` is a one-line message fit for chat."""

    exit_code = 1


class UserError(SpecbenchError):
    """Bad input: nothing is stored, the command exits 2."""

    exit_code = 2


class PresetError(UserError):
    """A preset that cannot be loaded or resolved."""


class KnobError(UserError):
    """A `--set` that names an unknown or non-overridable knob."""


class RecordError(UserError):
    """A run record that cannot be read."""


class SettingError(UserError):
    """A setting (SPECBENCH_BROKER_URL, SPECBENCH_DATA_DIR...) that cannot be used as it is:
    the message names the variable, its value (a password masked) and why."""


class StackError(UserError):
    """The host's stacks file (SPECBENCH_STACKS) that cannot be used, a stack it does not name,
    or one whose interpreter does not run: the message names the file and the line."""


class WorkloadError(UserError):
    """A preset's workload that cannot be used: the file is missing, a line is not a prompt of a
    category, or a category it names has none; the message names the file and the line."""


class InfraError(SpecbenchError):
    """The infrastructure failed: broker, worker, engine start-up."""

    exit_code = 1


class BrokerError(InfraError):
    """The broker cannot be reached."""

    @classmethod
    def unreachable(cls, url: str, cause: object) -> BrokerError:
        """The one message for a broker that does not answer; the URL's password reads ***."""
        return cls(f"cannot reach the broker at {redact_urls(url)}: {cause}")


class EngineError(InfraError):
    """An engine could not run at all (not one approach failing: that is a verdict)."""


def did_you_mean(word: str, known: list[str]) -> str:
    """` (did you mean 'x'?)` for the closest known word, or nothing."""
    hint = difflib.get_close_matches(word, known, n=1)
    return f" (did you mean {hint[0]!r}?)" if hint else ""
