#!/usr/bin/env python3
"""CDK entry point: `cdk synth` / `cdk deploy` run this with the project's Python (cdk.json)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "infra"), str(ROOT / "functions")]
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from costguard_infra.app_builder import build_app  # noqa: E402
from costguard_infra.config import ConfigError  # noqa: E402


def context_arguments(argv: list[str]) -> dict[str, str]:
    """``-c key=value`` / ``--context key=value`` pairs, as the CDK CLI reads them (strings)."""
    pairs: dict[str, str] = {}
    args = iter(argv)
    for arg in args:
        if arg in ("-c", "--context"):
            text = next(args, "")
        elif arg.startswith("--context="):
            text = arg.removeprefix("--context=")
        else:
            raise ConfigError(f"unknown argument {arg!r} (only -c key=value)")
        key, equals, value = text.partition("=")
        if not key or not equals:
            raise ConfigError(f"-c takes key=value, got {text!r}")
        pairs[key] = value
    return pairs


def main(argv: list[str] | None = None) -> int:
    # Under the CDK CLI, context and outdir come from its environment; run directly
    # (`make synth [CONTEXT="-c key=value ..."]`), read cdk.json's context and the -c
    # pairs and write ./cdk.out like the CLI would.
    direct = "CDK_OUTDIR" not in os.environ
    try:
        context = None
        if direct:
            context = {
                **json.loads((ROOT / "cdk.json").read_text())["context"],
                **context_arguments(sys.argv[1:] if argv is None else argv),
            }
        app, _stack = build_app(context, outdir=str(ROOT / "cdk.out") if direct else None)
    except ConfigError as exc:
        print(f"costguard: {exc}", file=sys.stderr)
        return 2
    app.synth()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
