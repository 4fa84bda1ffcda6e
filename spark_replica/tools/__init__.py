"""The operator tools, above the library: the `replog` CLI, the console, the local-cluster
launcher, network namespaces and query lag.

They start brokers and ZooKeeper as processes (`python -m brokerd`) and never import
`brokerd`; the library below (`spark_replica` outside this package) never imports them.
import-linter's contracts in pyproject.toml check both.
"""
