"""Evidence for the why (docs/contracts.md): collectives measured with torch.distributed, the
model's shape from its config.json, and what they say about a run."""
