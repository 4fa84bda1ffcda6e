"""`python -m brokerd.config.shared_check`: the settings a local cluster's brokers share,
checked by the broker's own rules for `replog up`, which starts brokers as processes and
does not import brokerd.

Reads the properties as a JSON object on standard input; writes
`{"configs": {...}, "ignored": [...]}` (see `cluster_configs`), or the refusal on
standard error with exit status 2.
"""

from __future__ import annotations

import json
import sys

from brokerd.config.server_properties import cluster_configs
from spark_replica.errors import ConfigError


def main() -> int:
    try:
        configs, ignored = cluster_configs(json.load(sys.stdin))
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    json.dump({"configs": configs, "ignored": list(ignored)}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
