"""The chat line parser shared by Slack and the console: a line in, a command's data out."""
