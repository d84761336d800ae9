"""What is never shown: secret-looking names and values, and URL passwords, masked in any text.

Pure text rules, below everything else (jobs.settings and jobs.errors use them): a name is secret
when it holds TOKEN, KEY, SECRET or PASSWORD; a value is shown only as a `${NAME}` reference.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

_SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD")
# A preset's `${NAME}` env value: a reference to a worker's variable, never a secret itself.
_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
# `scheme://user:password@host`: the password part, whatever env variable it came from.
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)[^@/\s]+(?=@)")


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in _SECRET_WORDS)


def secret_values(*environs: Mapping[str, str]) -> tuple[str, ...]:
    """The values that must never be shown: in every environment given (`os.environ`, a run's
    env), each value of 4 characters or more whose name looks secret; longest first. A switch
    such as TOKENIZERS_PARALLELISM=false holds no secret: masking every "false" in a log would
    only hide what the failure rules and readers need."""
    values = {str(v) for env in environs for k, v in env.items() if is_secret_name(k)}
    return tuple(sorted(filter(is_secret_value, values), key=len, reverse=True))


def is_secret_value(value: str) -> bool:
    """Whether a value of a secret-looking name is one to hide: 4 characters or more, not a
    switch (true, false, auto...), and not a `${NAME}` reference (jobs.core.plans),
    which names a secret without holding it."""
    return (len(value) >= 4 and value.lower() not in _NOT_SECRET
            and _REFERENCE.fullmatch(value) is None)


_NOT_SECRET = frozenset({"true", "false", "none", "null", "auto", "unset", "disabled",
                         "enabled"})


def redact(text: str, *, secrets: Iterable[str]) -> str:
    """`text` with each of `secrets` (see `secret_values`) replaced by ***, longest first so
    that a secret holding another is masked whole."""
    for value in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(value, "***")
    return text


def redact_urls(text: str) -> str:
    """`text` with the password of every URL it quotes read *** (`redis://:***@host`)."""
    return _URL_PASSWORD.sub(r"\g<head>***", text)


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """An env mapping as it may be shown: secret-looking names read ***, unless their value
    is a `${NAME}` reference, which is shown as it is (docs/contracts.md: outputs keep the
    reference)."""
    return {k: ("***" if is_secret_name(k) and _REFERENCE.fullmatch(str(v)) is None else v)
            for k, v in env.items()}
