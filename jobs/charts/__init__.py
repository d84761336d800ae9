"""Charts drawn with matplotlib (Agg): the batch summary, the load charts, a sweep's landscape
and Pareto front, and the digest trend (PNG bytes)."""
