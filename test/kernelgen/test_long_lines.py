"""Generated docstrings and messages wrapped at the target's line length (``long_lines.py``)."""

import ast
import textwrap

from pathlib import Path

from tools.kernelgen.formatting import line_length
from tools.kernelgen.long_lines import wrap_long_lines


def _source(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def test_a_long_docstring_line_is_broken_and_its_rest_joins_the_paragraph():
    source = _source(
        '''
        def forward(x):
            """The outputs and d x of a grad_output of 1 (None where ``needs`` says no), over chunks of whole groups of
            sequences: each chunk's d(logits) comes from the sequence stage."""
            return x
        '''
    )
    wrapped = wrap_long_lines(source, 80)
    assert all(len(line) <= 80 for line in wrapped.splitlines())
    assert wrapped.splitlines()[1] == '    """The outputs and d x of a grad_output of 1 (None where ``needs`` says no),'
    before, after = (ast.get_docstring(ast.parse(text).body[0]) for text in (source, wrapped))
    assert before.split() == after.split()
    assert wrapped.count("\n") == source.count("\n") + 1


def test_a_broken_line_before_a_list_item_or_blank_line_gets_a_line_of_its_own():
    source = _source(
        '''
        def f():
            """Summary line that is far too long for the width it is given here, to be broken somewhere.

            - a list item stays where it is
            """
        '''
    )
    wrapped = wrap_long_lines(source, 60)
    lines = wrapped.splitlines()
    assert lines[1] == '    """Summary line that is far too long for the width it is'
    assert lines[2] == "    given here, to be broken somewhere."
    assert lines[3] == "" and lines[4] == "    - a list item stays where it is"


def test_a_lone_message_literal_splits_into_two_that_python_joins():
    source = _source(
        """
        def check(labels, shape):
            if labels.shape != shape:
                raise ValueError(
                    f"listwise_ranking: labels has shape {tuple(labels.shape)}, expected {tuple(shape)} (one value per token)"
                )
            raise ValueError(
                "LigerFusedLinearGrpoKlFunction derives no gradient for 'advantages', which requires grad: pass it detached",
            )
        """
    )
    wrapped = wrap_long_lines(source, 100)
    assert ast.dump(ast.parse(wrapped)) == ast.dump(ast.parse(source))
    assert all(len(line) <= 100 for line in wrapped.splitlines())
    lines = wrapped.splitlines()
    # The part without a placeholder is a plain string (ruff's F541 flags an f-string without one).
    assert lines[3].strip().startswith('f"listwise_ranking: labels has shape {tuple(labels.shape)}')
    assert lines[4].strip() == '"(one value per token)"'
    assert lines[-2].strip().endswith('"pass it detached",')


def test_literals_it_cannot_split_safely_are_left_long():
    long_text = "word " * 30
    source = _source(
        f"""
        x = (
            f"{{{{escaped braces}}}} {long_text.strip()} {{value}}"
        )
        y = (
            "{long_text.strip()} with a ' quote"
        )
        z = (
            "{"x" * 200}"
        )
        """
    )
    wrapped = wrap_long_lines(source, 80)
    assert wrapped.splitlines()[1] == source.splitlines()[1]  # an escaped brace would read as a placeholder
    assert wrapped.splitlines()[-2] == source.splitlines()[-2]  # no space to break at
    assert ast.dump(ast.parse(wrapped)) == ast.dump(ast.parse(source))


def test_unparsable_source_is_returned_as_it_is():
    source = 'def f(:\n    """' + "x " * 80 + '"""\n'
    assert wrap_long_lines(source, 80) == source


def test_the_line_length_is_the_target_s_ruff_setting(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert line_length(tmp_path, "src/pkg/mod.py") is None  # no ruff settings here: ruff's user settings apply
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    assert line_length(tmp_path, "src/pkg/mod.py") == 100
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "ruff.toml").write_text("target-version = 'py310'\n")
    assert line_length(tmp_path, "src/pkg/mod.py") == 88  # the nearest configuration, ruff's default there
