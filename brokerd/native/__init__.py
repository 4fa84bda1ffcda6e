"""The replog listener's dialect: its API registry (registry.py), its dispatch and one handler
module per API, each decoding a native request, calling brokerd/core and encoding the answer."""
