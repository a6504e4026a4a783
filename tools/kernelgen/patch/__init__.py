"""``patch MODEL_TYPE``: from a Hugging Face model to ``apply_liger_kernel_to_<model>`` in a Liger checkout.

``model`` finds the blocks of the model's modeling file Liger could serve and runs a mini model of it;
``mapping`` maps each block onto the target's kernels (the variant search ``new`` runs, then a module check by the
numbers); ``served`` reads what an existing apply function of the target already does; ``render``, ``tests`` and
``edit`` write the apply function, its table entry and its tests. ``plan_patch`` puts them together: the table,
and the files to write all at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field

from tools.kernelgen.layout import MONKEY_PATCH
from tools.kernelgen.layout import TRANSFORMERS_INIT
from tools.kernelgen.patch.errors import PatchError
from tools.kernelgen.patch.mapping import Row
from tools.kernelgen.repo import LigerRepo

REFERENCES_DIR = ".kernelgen-work/patch"


@dataclass
class PatchPlan:
    model_type: str
    rows: list[Row]
    function: str
    changes: dict[str, str] = field(default_factory=dict)  # repository-relative path -> full text
    existing: str | None = None  # the target's apply function for the model type, when it has one
    misses: dict[str, list[str]] = field(default_factory=dict)  # block -> what the existing function leaves undone

    def table(self) -> str:
        cells = [(row.label, self.cell(row)) for row in self.rows]
        width = max(len("block"), *(len(label) for label, _ in cells))
        lines = [f"{'block'.ljust(width)} | kernel + options", f"{'-' * width}-+-{'-' * 16}"]
        lines += [f"{label.ljust(width)} | {cell}" for label, cell in cells]
        return "\n".join(lines)

    def cell(self, row: Row) -> str:
        if row.status == "kernel":
            served = ""
            if self.existing is not None:
                missed = self.misses.get(row.block.name, [])
                served = (
                    f"  [MISSED by {self.existing}: {'; '.join(missed)}]"
                    if missed
                    else f"  [served by {self.existing}]"
                )
            unchecked = f"  [UNCHECKED here: {row.unchecked}]" if row.unchecked else ""
            return f"{row.kernel}: {_target_text(row)}{served}{unchecked}"
        if row.status == "generate":
            return f"GENERATE: {generate_command(self.model_type, row)}  ({row.why})"
        if row.status == "unused":
            return f"not used: {row.why}"
        return f"no kernel: {_short(row.why)}"


def _short(text: str, limit: int = 220) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _target_text(row: Row) -> str:
    from tools.kernelgen.patch.render import _liger_name

    if row.strategy == "class" and row.block.kind == "norm":
        options = ", ".join(f"{k}={v!r}".replace("'", '"') for k, v in row.options.items())
        return f"{row.call.split(' / ')[0]} as {_liger_name(row)} = {row.liger_class}({', '.join(['...', options] if options else ['...'])})"
    if row.strategy == "act_fn":
        return f"{row.call} as {row.block.name}.{row.block.detail['act']} ({_liger_name(row)})"
    if row.strategy == "forward":
        return f"{row.call.split(' / ')[0]} in {_liger_name(row)}.forward (a subclass of {row.block.name})"
    if row.strategy == "class":
        return f"{row.call.split(' / ')[0]} as {row.liger_class}(config)"
    return row.call


def reference_path(model_type: str, row: Row) -> str:
    return f"{REFERENCES_DIR}/{model_type}/{row.kernel}.py"


def reference_entry(row: Row) -> str:
    """The symbol of a GENERATE row's reference: the norm class or the rotary function, else the activation."""
    if row.block.kind in ("norm", "rope") or "def " not in row.reference:
        return row.block.name
    return row.reference.split("def ", 1)[1].split("(", 1)[0]


def generate_command(model_type: str, row: Row) -> str:
    reference = f"{reference_path(model_type, row)}:{reference_entry(row)}"
    return f"python -m tools.kernelgen new {row.kernel} --reference {reference}"


GENERATED_MARK = "written by ``kernelgen patch``"


def plan_patch(model: str, repo: LigerRepo, *, force: bool = False) -> PatchPlan:
    """The table of ``model`` on ``repo`` and the files to write. An apply function the target has is checked on the
    mini model, and nothing is written, unless ``force`` and ``patch`` wrote it: then it is written again (after
    ``new`` generated a kernel it lacked)."""
    from tools.kernelgen.patch.mapping import map_model
    from tools.kernelgen.patch.model import locate
    from tools.kernelgen.patch.render import function_name
    from tools.kernelgen.patch.served import coverage
    from tools.kernelgen.patch.served import existing_apply_function

    source = locate(model)
    if not repo.exists(MONKEY_PATCH):
        raise PatchError(f"{repo.root}: no {MONKEY_PATCH} to write the apply function into; nothing written")
    existing = existing_apply_function(repo, source.model_type)
    replaced = None
    if existing is not None and force:
        if not _written_by_patch(repo, existing):
            raise PatchError(f"{existing} is hand-written: patch --force replaces only its own; nothing written")
        replaced, existing = existing, None
    rows = map_model(repo, source)
    plan = PatchPlan(source.model_type, rows, function_name(source), existing=existing)
    if plan.existing is not None:
        plan.misses = coverage(repo, source, plan.existing, [row for row in rows if row.status == "kernel"])
        return plan
    if not any(row.status == "kernel" for row in rows):
        return plan
    plan.changes = _changes(repo, source, rows, replaced)
    for row in rows:
        if row.status == "generate":
            plan.changes[reference_path(source.model_type, row)] = row.reference
    return plan


def _formatted_as_before(repo: LigerRepo, path: str, text: str) -> str:
    """``text`` through ``ruff format`` where the file was ruff-formatted before the edit (a list the edit made too
    long is wrapped); a file that was not is left as edited."""
    from tools.kernelgen.formatting import format_snippet

    original = repo.read(path)
    if format_snippet(original, repo.root, path) != original:
        return text
    return format_snippet(text, repo.root, path)


def _written_by_patch(repo: LigerRepo, function: str) -> bool:
    import ast

    tree = ast.parse(repo.read(MONKEY_PATCH))
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    return node is not None and GENERATED_MARK in (ast.get_docstring(node) or "")


def _changes(repo: LigerRepo, source, rows: list[Row], replaced: str | None = None) -> dict[str, str]:
    from tools.kernelgen.formatting import format_snippet
    from tools.kernelgen.insert import add_import
    from tools.kernelgen.insert import add_lazy_symbol
    from tools.kernelgen.insert import add_to_all
    from tools.kernelgen.patch import edit
    from tools.kernelgen.patch import render
    from tools.kernelgen.patch import tests
    from tools.kernelgen.patch.served import TABLE

    name = render.function_name(source)
    text = repo.read(MONKEY_PATCH)
    if replaced is not None:
        # The function and the classes it wrote for the blocks (each block's class is named after it).
        text = edit.remove_definitions(text, {replaced} | {f"Liger{row.block.name}" for row in rows})
    style = render.target_style(text)
    defined = edit.defined_names(text)
    has_table = TABLE in defined
    for module, symbol in render.imports(rows, source):
        text = add_import(text, module, symbol)
    if any(row.status == "kernel" and row.strategy == "lce_forward" for row in rows):
        text = add_import(text, "types", "MethodType")
    text = edit.add_plain_import(text, "torch")
    if not has_table:
        text = edit.add_plain_import(text, "inspect")
    snippet = [*render.module_definitions(rows, source)]
    if "_convert_to_liger" not in defined:
        snippet.append(render.CONVERT_HELPER)
    snippet.append(render.apply_function(rows, source, style))
    if not has_table:
        existing = sorted(n for n in defined if n.startswith("apply_liger_kernel_to_"))
        table = [(n.removeprefix("apply_liger_kernel_to_"), n) for n in existing] + [(source.model_type, name)]
        snippet.append(render.table_machinery(table))
    snippet_text = format_snippet("\n\n".join(snippet), repo.root, MONKEY_PATCH)
    if has_table:
        text = edit.insert_statements(text, snippet_text, before_assignment_of=TABLE)
        text = edit.add_table_entry(text, TABLE, source.model_type, name)
    else:
        text = edit.insert_statements(text, snippet_text)
    changes = {MONKEY_PATCH: _formatted_as_before(repo, MONKEY_PATCH, text)}
    init = repo.read(TRANSFORMERS_INIT)
    init = add_lazy_symbol(init, name, "liger_kernel.transformers.monkey_patch")
    init = add_to_all(init, name, lazy=True)
    changes[TRANSFORMERS_INIT] = _formatted_as_before(repo, TRANSFORMERS_INIT, init)
    if not repo.exists("test/convergence/__init__.py"):
        changes["test/convergence/__init__.py"] = ""
    if not repo.exists(tests.RESTORE_HELPER):
        changes[tests.RESTORE_HELPER] = tests.RESTORE_TEXT
    test = tests.test_path(source)
    # Formatted, not import-sorted: before test/convergence/ exists ruff cannot tell that ``test`` is local.
    changes[test] = format_snippet(tests.convergence_test(rows, source), repo.root, test)
    return changes


__all__ = ["PatchError", "PatchPlan", "plan_patch"]
