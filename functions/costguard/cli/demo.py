"""``costguard demo``: a whole guard cycle against an embedded AWS (a moto server).

The one place the product reaches into tooling: the demo runs from a development
install, never in a Lambda, so :mod:`costguard_demo` is imported inside the command only.
"""

from __future__ import annotations

import argparse
from typing import Any

from costguard.cli.common import CommandError, Flags, whole_number

#: The demo simulates 15 minutes a cycle: 1,000 cycles is ten days of history.
MAX_DEMO_CYCLES = 1000

demo_cycles = whole_number(
    1, MAX_DEMO_CYCLES, "must be a whole number of cycles from {low} to {high}, got {value!r}"
)


def cmd_demo(args: argparse.Namespace) -> int:
    from costguard_demo.run import ORG_TICKS, run_demo

    if args.org and args.cycles is not None and args.cycles not in ORG_TICKS:
        # Regions, then probes, then scans: fewer times would not reach a scan.
        raise CommandError(
            f"--cycles with --org: from {ORG_TICKS.start} to {ORG_TICKS.stop - 1} scheduled "
            f"times, got {args.cycles}"
        )
    if args.org and args.format in ("csv", "markdown"):
        # The hub's story is accounts, ticks and queues, not one table of rows.
        raise CommandError(f"--org prints table or json, not {args.format}")
    return run_demo(fmt=args.format, cycles=args.cycles, org=args.org)


def register(sub: Any, flags: Flags) -> None:
    """Add ``demo`` to the ``costguard`` parser."""
    demo = sub.add_parser(
        "demo",
        parents=[flags.format],
        help="a whole guard cycle against an embedded AWS (moto server)",
    )
    demo.add_argument(
        "--cycles",
        type=demo_cycles,
        default=None,
        help=(
            f"scan cycles, 15 simulated minutes apart (1 to {MAX_DEMO_CYCLES}, default 6; "
            "with --org: the hub's scheduled times, 3 to 96, default 4)"
        ),
    )
    demo.add_argument(
        "--org",
        action="store_true",
        help=(
            "the Organization hub: 3 member accounts x 2 regions, one without its member "
            "role (fan-out, SQS FIFO work queue, consumer, aggregation)"
        ),
    )
    demo.set_defaults(func=cmd_demo)
