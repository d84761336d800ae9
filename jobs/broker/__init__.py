"""Celery over Redis: the app, its tasks, the worker, the digest beat, and the event streams."""
