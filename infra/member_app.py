#!/usr/bin/env python3
"""CDK entry point of the member-account stack (a StackSet template):

cdk synth --app "python infra/member_app.py" -c hubAccount=111111111111 -c orgId=o-abc1234567

or, without the CDK CLI, the same -c pairs (and cdk.json's context), as infra/app.py takes
them (costguard_infra.entry), writing cdk.out.member/ (or -o DIR):

python infra/member_app.py -c hubAccount=111111111111 -c orgId=o-abc1234567
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "infra"), str(ROOT / "functions")]
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from costguard_infra.entry import run  # noqa: E402
from costguard_infra.member import build_member_app  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_member_app, default_output="cdk.out.member", argv=argv)


if __name__ == "__main__":
    raise SystemExit(main())
