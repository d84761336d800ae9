"""A batch's chat thread: the parent, the progress message, the summary, and their feed."""
