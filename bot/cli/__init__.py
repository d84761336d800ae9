"""The command line: `specbench`'s argv parser and its progress line on stderr."""
