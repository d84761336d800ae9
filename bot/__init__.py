"""specbench's surfaces: the command line, the console and the Slack bot."""
