"""The Slack surface: the Bolt app (Socket Mode, or HTTP in `http`), the one Web API client
(`client`), and the weekly digest's post (`digest`) with its scheduler process (`beat`)."""
