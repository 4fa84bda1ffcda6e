"""Connections: the listeners, the server and its one dispatch, logins, connection limits and
the per-connection state table that says which requests each state admits."""
