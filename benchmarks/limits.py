"""Measure this machine's own throughput limits and print them as one JSON line.

Two figures bound what a replog broker can do on a given machine:

* loopback TCP throughput between two processes (a spawned receiver and this sender), and
* sequential file append throughput, without fsync and with one fsync at the end.

The other benchmarks (``produce.py``, ``consume.py``) measure the same limits in their own run
and print their MB/s as a ratio of the loopback figure, so results are comparable across
machines. Run from the repository root::

    python benchmarks/limits.py [--seconds S] [--chunk-bytes N] [--dir PATH]
"""

from __future__ import annotations

import argparse

from _common import GIB, MIB, emit, measure_limits, positive_float


def _chunk_bytes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 < value <= GIB:
        raise argparse.ArgumentTypeError(f"must be within 1..{GIB} bytes, got {text!r}")
    return value


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds",
        type=positive_float,
        default=2.0,
        help="duration of each measurement in seconds (default: 2.0)",
    )
    parser.add_argument(
        "--chunk-bytes",
        type=_chunk_bytes,
        default=MIB,
        help=f"size of each send/write in bytes (default: {MIB})",
    )
    parser.add_argument(
        "--dir",
        default=None,
        help="directory for the temporary append file (default: the system temp directory)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    limits = measure_limits(args.seconds, args.chunk_bytes, directory=args.dir)
    emit({"bench": "limits", **limits, "seconds": args.seconds})


if __name__ == "__main__":
    main()
