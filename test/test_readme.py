"""The README's first two commands are the ones .ci/run executes, so CI proves the README true."""

import re

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S)][:2]


def test_readme_opens_with_two_single_line_commands():
    commands = readme_commands()
    assert len(commands) == 2
    assert all("\n" not in command for command in commands)
    assert commands[0].endswith("python3 -m tools.kernelgen new geglu")
    assert commands[1].startswith("python3 -m pytest")


def test_ci_runs_the_readme_commands_verbatim():
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    for command in readme_commands():
        assert command in ci_lines


def test_readme_stays_short_and_links_to_docs_that_exist():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 120
    assert "docs/how-it-works.md" in text and "docs/tiers.md" in text


def test_every_relative_link_of_the_readme_and_docs_names_a_file_that_exists():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken


def test_the_readme_lists_every_cli_command_once():
    from tools.kernelgen.cli import build_parser

    subparsers = next(action for action in build_parser()._actions if action.dest == "command")
    text = (ROOT / "README.md").read_text()
    table = text.split("## Commands", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([a-z-]+)", table, flags=re.M)
    assert sorted(listed) == sorted(subparsers.choices)
