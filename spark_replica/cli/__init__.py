"""The `replog` command line."""
