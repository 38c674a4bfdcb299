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


def main() -> int:
    # Under the CDK CLI, context and outdir come from its environment; run directly
    # (`make synth`), read cdk.json's context and write ./cdk.out like the CLI would.
    direct = "CDK_OUTDIR" not in os.environ
    context = json.loads((ROOT / "cdk.json").read_text())["context"] if direct else None
    try:
        app, _stack = build_app(context, outdir=str(ROOT / "cdk.out") if direct else None)
    except ConfigError as exc:
        print(f"costguard: {exc}", file=sys.stderr)
        return 2
    app.synth()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
