"""The broker's settings: its own, server.properties, security, and topic config changes."""
