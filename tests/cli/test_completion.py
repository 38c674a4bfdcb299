"""``costguard completion bash|zsh``: the script completes what the parser knows.

Defect: there was no completion at all; a user typed ``--ledger-region`` from memory.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from costguard.adapters.aws import known_regions
from costguard.cli import build_parser
from costguard.cli.completion import bash_script, zsh_script

BASH = shutil.which("bash")


def _complete(script: Path, *words: str) -> list[str]:
    """What bash offers after ``words`` (the last one is being typed)."""
    quoted = " ".join(f"'{w}'" for w in words)
    program = (
        f"source {script}; COMP_WORDS=(costguard {quoted}); "
        f"COMP_CWORD={len(words)}; _costguard; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    )
    assert BASH
    done = subprocess.run(
        [BASH, "--norc", "--noprofile", "-c", program],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env={"HOME": str(script.parent), "PATH": "/usr/bin:/bin"},
    )
    return [line for line in done.stdout.splitlines() if line]


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("completion") / "costguard.bash"
    path.write_text(bash_script(build_parser(), sorted(known_regions())))
    aws = path.parent / ".aws"
    aws.mkdir()
    (aws / "config").write_text("[default]\n[profile ml-prod]\n[sso-session corp]\n")
    return path


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
@pytest.mark.parametrize(
    ("words", "offered"),
    [
        ([""], {"scan", "report", "alerts", "actions", "demo", "prices", "estimate", "completion"}),
        (["estimate", ""], {"train", "iteration"}),
        (["estimate", "train", "--gpu", "h"], {"h100", "h200"}),
        (
            ["scan", "--region", "us-east-1", "--region", "eu-west-"],
            {"eu-west-1", "eu-west-2", "eu-west-3"},
        ),
        (["prices", "show", "--table-region", "ap-east-"], {"ap-east-1"}),
        (["scan", "--sagemaker-tags", ""], {"tagging-api", "per-resource"}),
        (["scan", "--profile", ""], {"default", "ml-prod"}),
        (["completion", ""], {"bash", "zsh"}),
    ],
)
def test_bash_completes_commands_flags_choices_regions_and_profiles(
    script: Path, words: list[str], offered: set[str]
) -> None:
    """GIVEN the generated bash script, WHEN Tab is pressed after the words, THEN what the
    parser allows there is offered."""
    got = set(_complete(script, *words))
    assert offered <= got, got
    if words == ["scan", "--profile", ""]:
        assert "corp" not in got and "sso-session" not in got


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
def test_hidden_deprecated_spellings_are_not_offered(script: Path) -> None:
    """GIVEN alerts, whose old ``--region`` still works but is deprecated, WHEN its flags
    are completed, THEN only ``--table-region`` is offered."""
    got = _complete(script, "alerts", "--")
    assert "--table-region" in got and "--region" not in got


def test_every_flag_of_every_command_is_in_the_script() -> None:
    """GIVEN the parser, WHEN the script is generated, THEN every visible flag is in it."""
    from tests.cli.test_parser_audit import COMMANDS

    text = bash_script(build_parser(), ["us-east-1"])
    for _, parser in COMMANDS:
        for action in parser._actions:
            if action.help != "==SUPPRESS==":
                for option in action.option_strings:
                    assert option in text


def test_the_zsh_script_loads_the_bash_function_through_bashcompinit() -> None:
    text = zsh_script(build_parser(), ["us-east-1"])
    assert text.startswith("#compdef costguard")
    assert "bashcompinit" in text and "complete -o default -F _costguard costguard" in text


def test_the_command_prints_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    from costguard.cli import main

    assert main(["completion", "bash"]) == 0
    assert "_costguard()" in capsys.readouterr().out
    assert main(["completion", "fish"]) == 2


ZSH = shutil.which("zsh")


@pytest.mark.skipif(ZSH is None, reason="zsh is not installed")
@pytest.mark.parametrize(
    ("words", "offered"),
    [
        (["estimate", ""], {"train", "iteration"}),
        (["estimate", "train", "--gpu", "h"], {"h100", "h200"}),
        (["scan", "--region", "eu-west-"], {"eu-west-1"}),
        (["alerts", "--"], {"--table-region", "--table"}),
    ],
)
def test_zsh_loads_the_script_and_offers_what_bash_offers(
    tmp_path: Path, words: list[str], offered: set[str]
) -> None:
    """GIVEN the zsh script sourced in a bare zsh, WHEN the function runs as zsh's
    bash-completion layer runs it (sh emulation), THEN it offers the same words (zsh itself
    then filters them by what was typed)."""
    script = tmp_path / "costguard.zsh"
    script.write_text(zsh_script(build_parser(), sorted(known_regions())))
    quoted = " ".join(f"'{w}'" for w in words)
    program = (
        f"source {script} || exit 9; "
        "t() { emulate -L sh; setopt kshglob noshglob braceexpand; "
        'COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _costguard; '
        "printf '%s\\n' \"${COMPREPLY[@]}\"; }; "
        f"t costguard {quoted}"
    )
    assert ZSH
    done = subprocess.run(
        [ZSH, "-f", "-c", program],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    got = set(done.stdout.split())
    assert offered <= got, (done.stdout, done.stderr)
    assert "--region" not in got or words[0] != "alerts"
