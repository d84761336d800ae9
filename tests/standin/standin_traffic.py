"""Traffic by task category, as a GPU server's drafts see it: acceptance and the speculative gain
set by what a prompt asks (both stand-ins import it as `standin_traffic`; tests/standin is on
their path).

A real server accepts more drafted tokens where the output repeats the prompt (a summary, a code
edit) and fewer on open conversation. STANDIN_TRAFFIC is a JSON object from a marker to what a
prompt containing it gets: `{"Summarize": {"accept_length": 1.4, "spec_gain": -0.2}, "def ":
{"accept_length": 3.6, "spec_gain": 0.5}}`; the first marker (in the object's order) found in
the prompt decides, and a prompt with none gets STANDIN_ACCEPT_LENGTH and STANDIN_SPEC_GAIN as
before. A speculative server's requests then accept the marker's length (within the prompt's own
+-15 %) and decode `1 + spec_gain` times as fast at one request (`standin_load`'s model), so a
workload's categories each get their own acceptance and throughput.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

TYPE_CHECKING = False  # typing's import is a tenth of a stand-in's start: annotations only
if TYPE_CHECKING:
    from typing import Any


def table() -> dict[str, dict[str, Any]]:
    raw = os.environ.get("STANDIN_TRAFFIC")
    if not raw:
        return {}
    found = json.loads(raw)
    return {str(k): dict(v) for k, v in found.items()} if isinstance(found, dict) else {}


def entry(prompt: str) -> dict[str, Any]:
    """What the first marker found in `prompt` sets ({} for none)."""
    return next((found for marker, found in table().items() if marker in prompt), {})


def accept_length(prompt: str, default: float) -> float:
    """The typical accept length of a request with this prompt."""
    return float(entry(prompt).get("accept_length", default))


def spec_gain(prompts: Sequence[str], default: float) -> float:
    """The speculative gain of requests with these prompts (their mean)."""
    if not prompts:
        return default
    return sum(float(entry(p).get("spec_gain", default)) for p in prompts) / len(prompts)
