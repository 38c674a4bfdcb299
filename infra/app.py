#!/usr/bin/env python3
"""CDK entry point: `cdk synth` / `cdk deploy` run this with the project's Python (cdk.json).

Run directly (`make synth CONTEXT="-c key=value ..."`), it takes cdk.json's context and the
-c pairs as the CDK CLI would (costguard_infra.entry, shared with infra/member_app.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "infra"), str(ROOT / "functions")]
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from costguard_infra.app_builder import build_app  # noqa: E402
from costguard_infra.entry import run  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_app, default_output="cdk.out", argv=argv)


if __name__ == "__main__":
    raise SystemExit(main())
