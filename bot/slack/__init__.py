"""The Slack surface: the Bolt app (Socket Mode or HTTP) and its Web API client."""
