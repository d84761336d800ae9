"""Stand-in `sglang.benchmark`: the package the benchmarks moved into (0.5.10 has it; `serving`
is in it from 0.5.15)."""
