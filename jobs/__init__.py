"""specbench's experiments: presets, engines, analysis, storage and the tasks that tie them."""

__version__ = "0.1.0"
