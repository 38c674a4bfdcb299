"""``costguard completion bash|zsh``: a shell completion script, generated from the parser.

Every command, flag and choice comes from :func:`costguard.cli.build_parser`, so the script
cannot drift from the command; region flags complete the regions botocore knows, path flags
complete files, ``--profile`` the profiles in ``~/.aws/config``. Flags hidden from ``--help``
(deprecated spellings) are not offered.

Why a generated script and not argcomplete: argcomplete runs Python, and imports every
command module, on each Tab press (about half a second here); this script answers from
bash alone, and it adds no dependency to install. zsh loads the same function through its
``bashcompinit`` layer.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from costguard.cli import common

SHELLS = ("bash", "zsh")
#: The profile names in the AWS config and credentials files ("[profile x]" and "[x]").
_PROFILES = r"""_costguard_profiles() {
    local f
    for f in "${AWS_CONFIG_FILE:-$HOME/.aws/config}" \
             "${AWS_SHARED_CREDENTIALS_FILE:-$HOME/.aws/credentials}"; do
        [ -r "$f" ] && sed -n -e 's/^\[profile \([^] ]*\)\]$/\1/p' -e 's/^\[\([^] ]*\)\]$/\1/p' "$f"
    done | sort -u
}"""


@dataclass
class _Command:
    path: str  # "prices/refresh"; "" for costguard itself
    commands: list[str] = field(default_factory=list)
    words: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    #: flag -> how its value completes: "files", "regions", "profiles", "choices:a b", "any"
    values: dict[str, str] = field(default_factory=dict)


def _value_kind(action: argparse.Action) -> str | None:
    """How the value of ``action`` completes; None for a flag that takes none."""
    if action.nargs == 0:
        return None
    if action.choices:
        return "choices:" + " ".join(str(c) for c in action.choices)
    kind = action.type
    if kind is common.file_path or kind is Path:
        return "files"
    if kind is common.region_name:
        return "regions"
    if "--profile" in action.option_strings:
        return "profiles"
    return "any"


def _walk(parser: argparse.ArgumentParser, path: str = "") -> Iterator[_Command]:
    command = _Command(path)
    children: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                command.commands.append(name)
                children.append((name, child))
        elif not action.option_strings and action.choices:
            command.words.extend(str(c) for c in action.choices)  # a positional's choices
        elif action.option_strings and action.help != argparse.SUPPRESS:
            for option in action.option_strings:
                command.flags.append(option)
                kind = _value_kind(action)
                if kind:
                    command.values[option] = kind
    yield command
    for name, child in children:
        yield from _walk(child, f"{path}/{name}" if path else name)


def _words(values: list[str]) -> str:
    for value in values:
        if not re.fullmatch(r"[A-Za-z0-9_.:=@%+,<>/-]+", value):
            raise ValueError(f"not a completion word: {value!r}")  # a bug in the parser
    return " ".join(values)


def bash_script(parser: argparse.ArgumentParser, regions: list[str]) -> str:
    """The bash completion function for ``parser`` (``complete -F _costguard costguard``)."""
    commands = list(_walk(parser))
    path_cases = [
        f'            "{c.path}:{name}") path="{f"{c.path}/" if c.path else ""}{name}" ;;'
        for c in commands
        for name in c.commands
    ]
    value_cases = []
    for c in commands:
        for flag, kind in c.values.items():
            if kind == "files":
                reply = 'COMPREPLY=($(compgen -f -- "$cur"))'
            elif kind == "regions":
                reply = 'COMPREPLY=($(compgen -W "$regions" -- "$cur"))'
            elif kind == "profiles":
                reply = 'COMPREPLY=($(compgen -W "$(_costguard_profiles)" -- "$cur"))'
            elif kind.startswith("choices:"):
                reply = f'COMPREPLY=($(compgen -W "{_words(kind[8:].split())}" -- "$cur"))'
            else:
                reply = "COMPREPLY=()"
            value_cases.append(f'        "{c.path}:{flag}") {reply}; return ;;')
    word_cases = [
        f'        "{c.path}") words="{_words(c.commands + c.words + c.flags)}" ;;' for c in commands
    ]
    nl = "\n"
    return f"""# costguard completion for bash, generated from the command's parser.
# Load it with:  source <(costguard completion bash)
{_PROFILES}
_costguard() {{
    local cur prev path="" w i words
    local regions="{_words(regions)}"
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${{COMP_WORDS[i]}}"
        case "$path:$w" in
{nl.join(path_cases)}
        esac
    done
    case "$path:$prev" in
{nl.join(value_cases)}
    esac
    case "$path" in
{nl.join(word_cases)}
        *) words="" ;;
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}}
complete -o default -F _costguard costguard
"""


def zsh_script(parser: argparse.ArgumentParser, regions: list[str]) -> str:
    """The same function for zsh, through its bash-completion layer."""
    return (
        "#compdef costguard\n"
        "# costguard completion for zsh. Load it with:  source <(costguard completion zsh)\n"
        # compinit only when the user's ~/.zshrc has not run it (it may ask about directories).
        "(( $+functions[compdef] )) || { autoload -U +X compinit && compinit; }\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + bash_script(parser, regions)
    )


def cmd_completion(args: argparse.Namespace) -> int:
    import sys

    from costguard.adapters.aws import known_regions
    from costguard.cli import build_parser

    make = bash_script if args.shell == "bash" else zsh_script
    sys.stdout.write(make(build_parser(), sorted(known_regions())))
    return common.EXIT_OK


def register(sub: Any, flags: common.Flags) -> None:
    """Add ``completion`` to the ``costguard`` parser."""
    completion = sub.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description=(
            "Print a completion script for the shell, generated from the command itself: "
            "commands, flags, choices, regions, files and AWS profiles complete on Tab. "
            "bash: add `source <(costguard completion bash)` to ~/.bashrc. zsh: add "
            "`source <(costguard completion zsh)` to ~/.zshrc."
        ),
    )
    completion.add_argument("shell", choices=SHELLS, help="the shell: bash or zsh")
    completion.set_defaults(func=cmd_completion)
