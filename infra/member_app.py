#!/usr/bin/env python3
"""CDK entry point of the member-account stack (a StackSet template):

cdk synth --app "python infra/member_app.py" -c hubAccount=111111111111 -c orgId=o-abc1234567
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "infra"), str(ROOT / "functions")]
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from costguard_infra.config import ConfigError  # noqa: E402
from costguard_infra.member import build_member_app  # noqa: E402


def main() -> int:
    # Under the CDK CLI, context comes from its environment; run directly, from -c only.
    direct = "CDK_OUTDIR" not in os.environ
    try:
        app, _stack = build_member_app(outdir=str(ROOT / "cdk.out.member") if direct else None)
    except ConfigError as exc:
        print(f"costguard: {exc}", file=sys.stderr)
        return 2
    app.synth()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
