"""The SGLang engine: `python -m sglang.launch_server` per configuration, `sglang.bench_serving`
per repetition (docs/contracts.md "SGLang engine contract"), its flags checked against the installed
release, renamed knobs spelled for it, and its failure rules."""

ENGINE = "jobs.engines.sglang.engine:SGLangEngine"
TYPES = "jobs.engines.sglang.types:sglang_table"
FLAG_FACTS = "jobs.engines.sglang.flag_table:load_table"
