"""The liger-kernel-gen skill describes only commands that exist: every `python -m tools.kernelgen ...` in its
markdown parses with the CLI's own parser, every sub-command it uses answers `--help` with the options the skill
gives it, and every relative link points to a file."""

import contextlib
import io
import re
import shlex

from pathlib import Path

import pytest
import yaml

from tools.kernelgen.cli import build_parser

SKILL = Path(__file__).resolve().parents[2] / ".claude" / "skills" / "liger-kernel-gen"
MARKDOWN = sorted(SKILL.rglob("*.md"))
PREFIX = "python -m tools.kernelgen"
FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)
INLINE = re.compile(r"`([^`]+)`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# Placeholders the documentation uses for values; any sensible value makes the command parse the same way.
PLACEHOLDERS = {"NAME": "my_op", "REF": "geglu", "FILE": "my_op.yaml", "PATH": "/tmp/liger", "DIR": "/tmp/work"}
# Where a shell takes over from the command: what follows is not the CLI's arguments.
SHELL = {">", ">>", "|", "&&", ";", "2>&1"}


def extract_commands(text: str) -> list[str]:
    """Every kernelgen command line in fenced code blocks and inline code spans of one markdown text."""
    commands = []
    for block in FENCED.findall(text):
        for line in block.splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith(PREFIX + " "):
                commands.append(line)
    prose = FENCED.sub("", text)
    for span in INLINE.findall(prose):
        span = " ".join(span.split())
        # The bare prefix names the tool in prose; only spans with a sub-command are commands.
        if span.startswith(PREFIX + " "):
            commands.append(span)
    return commands


def cli_arguments(command: str) -> list[str]:
    arguments = shlex.split(command)[len(PREFIX.split()) :]
    cut = next((i for i, a in enumerate(arguments) if a in SHELL), len(arguments))
    return [
        re.sub(r"\b(" + "|".join(PLACEHOLDERS) + r")\b", lambda m: PLACEHOLDERS[m.group(1)], a) for a in arguments[:cut]
    ]


def subcommand(command: str) -> str:
    return cli_arguments(command)[0]


def options(command: str) -> list[str]:
    return [a.split("=")[0] for a in cli_arguments(command)[1:] if a.startswith("-")]


def parse_error(command: str) -> str | None:
    """argparse's complaint about the command, or None when it parses."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            build_parser().parse_args(cli_arguments(command))
    except SystemExit:
        return stderr.getvalue().strip().splitlines()[-1] if stderr.getvalue().strip() else "exit"
    return None


ALL_COMMANDS = sorted(
    {(path.relative_to(SKILL).as_posix(), c) for path in MARKDOWN for c in extract_commands(path.read_text())}
)


def test_the_skill_has_its_files():
    names = {path.relative_to(SKILL).as_posix() for path in MARKDOWN}
    assert {
        "SKILL.md",
        "kernel-profile-format.md",
        "agents/analyzer.md",
        "agents/generator.md",
        "agents/validator.md",
        "agents/optimizer.md",
        "agents/orchestrator.md",
        "agents/knowledge.md",
        "agents/sampler.md",
        "agents/backward.md",
        "agents/reporter.md",
        "rules/purity.md",
        "rules/correctness.md",
        "rules/performance.md",
    } <= names


def test_skill_front_matter_names_and_describes_the_skill():
    text = (SKILL / "SKILL.md").read_text()
    assert text.startswith("---\n")
    front = yaml.safe_load(text.split("---\n")[1])
    assert front["name"] == "liger-kernel-gen"
    assert isinstance(front["description"], str) and len(front["description"]) > 40


def test_every_subcommand_and_the_main_options_are_documented():
    used = " ".join(command for _, command in ALL_COMMANDS)
    workflow = ("workspace", "knowledge", "analyze", "samples", "new", "validate", "tune", "audit", "references")
    for needle in [f"kernelgen {sub} " for sub in workflow] + ["--modify"]:
        assert needle in used + " ", needle
    for option in ("--profile", "--dry-run", "--archive", "--samples", "--report", "--static", "--workspace", "-o"):
        assert f" {option} " in f" {used} ", option


@pytest.mark.parametrize("where, command", ALL_COMMANDS, ids=[f"{w}: {c}" for w, c in ALL_COMMANDS])
def test_documented_command_parses(where, command):
    assert parse_error(command) is None, f"{where}: `{command}` does not parse: {parse_error(command)}"


USED = {}
for _, _command in ALL_COMMANDS:
    USED.setdefault(subcommand(_command), set()).update(options(_command))


@pytest.mark.parametrize("sub", sorted(USED))
def test_every_documented_subcommand_answers_help_with_its_documented_options(sub):
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([sub, "--help"])
    assert exit_.value.code == 0
    text = stdout.getvalue()
    assert text.startswith(f"usage: python -m tools.kernelgen {sub}"), text[:80]
    missing = [option for option in sorted(USED[sub]) if option not in text]
    assert not missing, f"`{sub} --help` does not list {missing}"


def test_shell_redirections_end_a_command():
    assert cli_arguments("python -m tools.kernelgen knowledge REF > out.md") == ["knowledge", "geglu"]


def test_a_wrong_command_is_caught():
    text = "Run `python -m tools.kernelgen validate NAME --fast`, then\n```bash\npython -m tools.kernelgen frobnicate\n```\n"
    commands = extract_commands(text)
    assert commands == ["python -m tools.kernelgen frobnicate", "python -m tools.kernelgen validate NAME --fast"]
    assert all(parse_error(command) for command in commands)


@pytest.mark.parametrize("path", MARKDOWN, ids=[p.relative_to(SKILL).as_posix() for p in MARKDOWN])
def test_relative_links_point_to_existing_files(path):
    missing = []
    # Code is not markdown: `kernel[grid](...)` in a code span is no link.
    for target in LINK.findall(INLINE.sub("", FENCED.sub("", path.read_text()))):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        if not (path.parent / target.split("#")[0]).exists():
            missing.append(target)
    assert not missing, f"{path.relative_to(SKILL)} links to missing files: {missing}"
