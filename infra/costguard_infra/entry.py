"""What the CDK entry points share: context and output taken as the CDK CLI takes them.

Under the CDK CLI (``cdk synth --app "python infra/member_app.py" -c key=value``), the CLI
hands the app its context (``cdk.json``'s and the ``-c`` pairs) and its output directory
in the environment (``CDK_CONTEXT_JSON``, ``CDK_OUTDIR``), which ``cdk.App`` reads. Run
directly (``make synth CONTEXT="-c key=value"``, ``python infra/member_app.py -c ...``),
nobody does: :func:`run` then reads ``cdk.json``'s context and the ``-c`` pairs the same
way, and writes where the CLI would. Both entry points (``infra/app.py`` and
``infra/member_app.py``) go through it, so neither can drop the ``-c`` the other honours.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from costguard_infra.config import ConfigError

#: The project root: where ``cdk.json`` is, and the default output directories.
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class SynthArguments:
    """The arguments of a direct run: ``-c key=value`` pairs (strings, as the CDK CLI
    passes them) and ``-o DIR`` (the CLI's ``--output``)."""

    context: dict[str, str]
    output: str | None = None


def synth_arguments(argv: Sequence[str]) -> SynthArguments:
    """``-c key=value`` / ``--context key=value`` / ``--context=key=value`` and ``-o DIR`` /
    ``--output DIR``, spelled as the CDK CLI spells them; anything else is an error."""
    pairs: dict[str, str] = {}
    output: str | None = None
    args = iter(argv)
    for arg in args:
        if arg in ("-o", "--output"):
            output = next(args, "")
            if not output:
                raise ConfigError(f"{arg} takes a directory")
            continue
        if arg.startswith("--output="):
            output = arg.removeprefix("--output=")
            continue
        if arg in ("-c", "--context"):
            text = next(args, "")
        elif arg.startswith("--context="):
            text = arg.removeprefix("--context=")
        else:
            raise ConfigError(f"unknown argument {arg!r} (only -c key=value and -o DIR)")
        key, equals, value = text.partition("=")
        if not key or not equals:
            raise ConfigError(f"-c takes key=value, got {text!r}")
        pairs[key] = value
    return SynthArguments(pairs, output)


#: ``build(context, outdir=...)`` -> (app, stack): ``build_app``, ``build_member_app``.
Build = Callable[..., tuple[Any, Any]]


def run(
    build: Build,
    *,
    default_output: str,
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Build and synthesize one app: exit 0, or 2 with the configuration error on one line.

    Under the CDK CLI (``CDK_OUTDIR`` set) the app reads its context and output directory
    from the CLI's environment. Run directly, they are ``cdk.json``'s context overlaid with
    the ``-c`` pairs of ``argv`` (default: ``sys.argv[1:]``), and ``-o DIR`` or
    ``<project>/<default_output>``, as the CLI would give them.
    """
    environ = os.environ if environ is None else environ
    direct = "CDK_OUTDIR" not in environ
    try:
        context: dict[str, Any] | None = None
        outdir: str | None = None
        if direct:
            given = synth_arguments(sys.argv[1:] if argv is None else argv)
            context = {**json.loads((ROOT / "cdk.json").read_text())["context"], **given.context}
            outdir = given.output or str(ROOT / default_output)
        app, _stack = build(context, outdir=outdir)
    except ConfigError as exc:
        print(f"costguard: {exc}", file=sys.stderr)
        return 2
    app.synth()
    return 0
