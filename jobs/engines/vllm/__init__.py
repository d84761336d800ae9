"""The vLLM engine (docs/contracts.md "vLLM engine"): `vllm serve MODEL` per configuration, `vllm
bench serve --save-result` per repetition, mappings passed as JSON, ready on `/health`, the accept
length from the result or the server's `vllm:spec_decode_*` counters, its flags checked against the
installed release's own parser, and vLLM's failure rules. No renamed or bounded flags are recorded
for its releases yet (no flag facts): its own parser says."""

ENGINE = "jobs.engines.vllm.engine:VLLMEngine"
TYPES = "jobs.engines.vllm.types:vllm_table"
FLAG_FACTS = None
