"""The local engine: a tiny seeded Llama on the CPU, one child process per configuration
(`python -m jobs.engines.local.child`), for the demo and the tests: no GPU, no download. It has one
release: nothing renamed, nothing bounded (no flag facts)."""

ENGINE = "jobs.engines.local.engine:LocalEngine"
TYPES = "jobs.engines.local.types:local_table"
FLAG_FACTS = None
