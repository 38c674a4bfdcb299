"""The README and docs/ name only what exists: commands, flags, make targets, pages, anchors.

A page that tells a user to run ``costguard scan --regions`` (the flag is ``--region``), or
``make chek``, or links to a section that moved, is wrong the day it is read. These tests
read every page the way a user would copy from it: every ``costguard <command> [--flag]``
in code (inline spans and fenced blocks) is walked through the CLI's own argparse parser,
every ``make <target>`` is looked up in the Makefile, and every relative link must land on
a page and, when it names one, a heading. A failure names the page and the line.

Settings are checked against their declaration by tests/unit/test_settings_spec.py.
"""

from __future__ import annotations

import argparse
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from costguard.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: ``costguard`` as a command: at the start of the code, after a space or a path
#: (``.venv/bin/costguard``), or as ``python -m costguard.cli``; not ``costguard:project``,
#: ``costguard-member-read`` or ``costguard.handlers``.
COMMAND = re.compile(r"(?:^|(?<=[\s/(]))costguard(?:\.cli)?(?=\s|$)")
#: Where a command ends: a pipe, a shell operator, a redirect or a comment.
END = re.compile(r"\\?\||;|&&|>|\s#")
MAKE = re.compile(r"(?:^|(?<=[\s(]))make\s+([a-z][\w-]*)")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")  # the text may run over a line break
FENCE = re.compile(r"^\s*(```|~~~)")
SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)


@dataclass(frozen=True)
class Code:
    """One piece of code as a user would copy it: where it is, and its text."""

    page: Path
    line: int
    text: str

    def where(self) -> str:
        return f"{_name(self.page)}:{self.line}"


def _name(page: Path) -> str:
    """The page as a reader finds it: its path in the repository."""
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name


def _code(page: Path) -> list[Code]:
    """Every fenced block's lines (continuations joined; not diagrams) and inline span."""
    lines = page.read_text(encoding="utf-8").split("\n")
    found: list[Code] = []
    prose: list[str] = []
    fenced = diagram = False
    pending: tuple[int, str] | None = None
    for number, line in enumerate(lines, start=1):
        if FENCE.match(line):
            fenced = not fenced
            diagram = fenced and line.strip().endswith("mermaid")
            prose.append("")
            continue
        if not fenced:
            prose.append(line)
            continue
        prose.append("")
        if diagram:
            continue  # a diagram's labels are not commands
        start, text = pending if pending else (number, "")
        text += " " + line.strip()
        if text.endswith("\\"):
            pending = (start, text[:-1])
        else:
            pending = None
            found.append(Code(page, start, " ".join(text.split())))
    joined = "\n".join(prose)
    for span in SPAN.finditer(joined):
        if "\n\n" in span.group(2):
            continue  # not a span: a stray backtick paired across paragraphs
        line = joined.count("\n", 0, span.start()) + 1
        found.append(Code(page, line, " ".join(span.group(2).split())))
    return found


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {option: action for action in parser._actions for option in action.option_strings}


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _every_flag(parser: argparse.ArgumentParser) -> set[str]:
    flags = set(_options(parser))
    for child in _commands(parser).values():
        flags |= _every_flag(child)
    return flags


def _takes_a_value(action: argparse.Action) -> bool:
    return action.nargs != 0


def _token(raw: str) -> str:
    """A shell word as documented: ``[--mfu`` and ``0.35]`` are ``--mfu`` and ``0.35``."""
    return raw.strip("[](){},").removesuffix("...").removesuffix("…")


def _check_command(code: Code, args: str, top: argparse.ArgumentParser) -> list[str]:
    """Walk one documented command through the parser; name what it does not know."""
    parser, path = top, ["costguard"]
    words = [_token(word) for word in args.split()]
    skip = False
    for word in words:
        if skip or not word:
            skip = False
            continue
        shown = " ".join(path)
        if word.startswith("-") and not re.fullmatch(r"-\d.*", word):
            flag = word.split("=", 1)[0]
            action = _options(parser).get(flag)
            if action is None:
                return [f"{code.where()}: `{code.text}`: `{shown}` has no flag {flag}"]
            skip = "=" not in word and _takes_a_value(action)
            continue
        commands = _commands(parser)
        if not commands:
            continue  # a value or a placeholder, where the command takes its arguments
        if word.startswith("<"):
            return []  # `costguard <command> --help`: any command, so no flag to check
        if word not in commands:
            known = ", ".join(sorted(commands))
            return [f"{code.where()}: `{code.text}`: `{shown}` has no command {word!r} ({known})"]
        parser = commands[word]
        path.append(word)
    return []


def _command_problems(page: Path) -> list[str]:
    top = build_parser()
    every_flag = _every_flag(top)
    problems: list[str] = []
    for code in _code(page):
        for match in COMMAND.finditer(code.text):
            rest = code.text[match.end() :]
            end = END.search(rest)
            problems += _check_command(code, rest[: end.start()] if end else rest, top)
        first = code.text.split(" ", 1)[0]
        if first.startswith("--") and not COMMAND.search(code.text):
            # a flag named on its own (`--json`): some `costguard` command must take it
            flag = _token(first).split("=", 1)[0]
            if flag not in every_flag:
                problems.append(f"{code.where()}: `{code.text}`: no costguard command has {flag}")
    return problems


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, re.MULTILINE))
    return targets - {"SHELL", "PYTHON", "VENV", "BIN", "STAMP"}


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text(encoding="utf-8").split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        heading = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if fenced or not heading:
            continue
        slug = _slug(heading.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        if count:
            seen[f"{slug}-{count}"] = 1
    return set(seen)


def _prose(page: Path) -> str:
    """The page with its fenced blocks blanked out, line for line."""
    lines, fenced = [], False
    for line in page.read_text(encoding="utf-8").split("\n"):
        fence = bool(FENCE.match(line))
        fenced = fenced != fence
        lines.append("" if fenced or fence else line)
    return "\n".join(lines)


def _link_problems(page: Path) -> list[str]:
    problems: list[str] = []
    prose = _prose(page)
    for match in LINK.finditer(prose):
        link = match.group(1)
        if re.match(r"[a-z]+:", link):
            continue  # https:, mailto:
        target, _, anchor = link.partition("#")
        file = (page.parent / target).resolve() if target else page
        where = f"{_name(page)}:{prose.count(chr(10), 0, match.start()) + 1}"
        if not file.exists():
            problems.append(f"{where}: link to {link}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            problems.append(f"{where}: link to {link}: no heading #{anchor} there")
    return problems


#: A file or folder of the repository as a page names it: ``tests/unit/``, ``infra/app.py``,
#: ``services/executor.py`` (under functions/costguard), ``test_survives.py`` (under tests).
#: Not a prefix such as ``keep/`` or an output such as ``cdk.out/``: folders are checked
#: only under the repository's own top folders.
PATH = re.compile(
    r"[\w.*-]+(/[\w.*-]+)*\.(py|json|txt)|(tests|functions|infra|benchmarks|docs)(/[\w.*-]+)*/"
)
#: A module, or a name in one: ``costguard.events.CLOCK``.
DOTTED = re.compile(r"(costguard|costguard_demo)(\.\w+)+")
#: Where a relative path may start.
BASES = ("", "functions", "functions/costguard", "infra")


def _exists(path: str) -> bool:
    if "/" not in path.rstrip("/") and path.startswith("test_"):
        return any((ROOT / "tests").rglob(path))
    return any(any(ROOT.glob(str(Path(base) / path.rstrip("/")))) for base in BASES)


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def _name_problems(page: Path) -> list[str]:
    """Files, folders and modules named in code that the repository does not hold."""
    problems: list[str] = []
    for code in _code(page):
        if PATH.fullmatch(code.text) and not _exists(code.text):
            problems.append(f"{code.where()}: `{code.text}`: no such file or folder")
        elif DOTTED.fullmatch(code.text) and not _resolves(code.text):
            problems.append(f"{code.where()}: `{code.text}`: no such module or name")
    return problems


def _ids(pages: list[Path]) -> list[str]:
    return [_name(page) for page in pages]


def test_there_are_pages_to_check() -> None:
    # GIVEN the README and the docs folder
    # THEN the README and every page the README links to are read by these tests
    assert ROOT / "README.md" in PAGES
    linked = re.findall(r"\]\((docs/[\w.-]+\.md)", (ROOT / "README.md").read_text())
    assert linked, "the README links to no page in docs/"
    assert {ROOT / path for path in linked} <= set(PAGES)


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_every_costguard_command_and_flag_a_page_names_exists(page: Path) -> None:
    # GIVEN a page, WHEN each `costguard …` in its code is walked through the CLI's parser
    problems = _command_problems(page)
    # THEN every command and every flag it names is one the CLI takes
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_every_make_target_a_page_names_exists(page: Path) -> None:
    targets = _make_targets()
    problems = [
        f"{code.where()}: `{code.text}`: the Makefile has no target {target!r}"
        for code in _code(page)
        for target in MAKE.findall(code.text)
        if target not in targets
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_every_link_lands_on_a_page_and_a_heading(page: Path) -> None:
    problems = _link_problems(page)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_every_file_and_module_a_page_names_exists(page: Path) -> None:
    # GIVEN a page that points the reader at a test, a benchmark or a module
    problems = _name_problems(page)
    # THEN the repository holds it under that name (files move: their pages move with them)
    assert not problems, "\n".join(problems)


def test_the_checks_catch_a_wrong_flag_a_wrong_command_and_a_wrong_target(
    tmp_path: Path,
) -> None:
    # GIVEN a page with one mistake of each kind, inline and in a fenced block
    page = tmp_path / "wrong.md"
    page.write_text(
        "Run `costguard scan --regions us-east-1` or `costguard prices fetch`, then\n"
        "`make chek`; see [a section](#no-such-heading), [a\npage](gone.md) and `--no-such-flag`.\n"
        "Tested in `tests/unit/test_gone.py` and `test_survives.py`; `costguard.cli.nothing`.\n"
        "\n"
        "```bash\n"
        ".venv/bin/costguard estimate train --params 7e9 \\\n"
        "    --gpus 8 --mfu-typo 0.4   # a comment --not-checked\n"
        "costguard scan --json | head --lines 3\n"
        "```\n",
        encoding="utf-8",
    )
    # WHEN the checks read it
    commands = _command_problems(page)
    links = _link_problems(page)
    targets = _make_targets()
    make = [t for code in _code(page) for t in MAKE.findall(code.text) if t not in targets]
    # THEN each mistake is named with its page and line, and nothing else is
    name = "wrong.md"
    assert commands == [
        f"{name}:7: `.venv/bin/costguard estimate train --params 7e9 --gpus 8 --mfu-typo 0.4 "
        "# a comment --not-checked`: `costguard estimate train` has no flag --mfu-typo",
        f"{name}:1: `costguard scan --regions us-east-1`: `costguard scan` has no flag --regions",
        f"{name}:1: `costguard prices fetch`: `costguard prices` has no command 'fetch' "
        "(refresh, show)",
        f"{name}:3: `--no-such-flag`: no costguard command has --no-such-flag",
    ]
    assert make == ["chek"]
    assert _name_problems(page) == [
        f"{name}:4: `tests/unit/test_gone.py`: no such file or folder",
        f"{name}:4: `costguard.cli.nothing`: no such module or name",
    ]
    assert links == [
        f"{name}:2: link to #no-such-heading: no heading #no-such-heading there",
        f"{name}:2: link to gone.md: no such file",
    ]
