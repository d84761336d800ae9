"""The application: a batch planned, submitted, dispatched and run to its report."""
