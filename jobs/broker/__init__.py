"""Celery over Redis: the app, the GPU worker and its `run_batch` task, and the event streams."""
