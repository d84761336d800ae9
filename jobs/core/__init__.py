"""The pure core: presets, plans, run records, verdicts, rules, remedies, report, digest.

No module here imports an adapter (store, broker, Slack, subprocess, HTTP, charts);
tests/test_architecture.py keeps it so."""
