"""Operations: structured logs and health checks for the long-running processes."""
