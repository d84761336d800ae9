"""Charts drawn with matplotlib (Agg): the batch summary and the digest trend (PNG bytes)."""
