"""The shape parameters of a generated test, written as upstream's tests write theirs.

Upstream parametrizes its tests over named sizes (``bsz, seq_len, hidden_size``; ``B, T, V`` for a loss) and
builds the tensors from them. The profile gives shapes instead: small ones, which the CPU suite runs under the
Triton interpreter, and model-sized ones for a GPU. Both become one parametrize list; a model-sized case carries
a skip mark on the CPU, so the same list runs everywhere and the CPU suite runs exactly the small cases.
"""

from dataclasses import dataclass

# Names of the trailing dims of a row-wise op's input, outermost first (upstream's test_rms_norm / test_geglu).
ROW_NAMES = ("bsz", "seq_len", "hidden_size")
# A loss's: logits of B * T rows over V classes (upstream's test_cross_entropy / test_kl_div).
LOSS_NAMES = ("B", "T", "V")
# The mark a model-sized case carries; the generated test defines it next to ``device``.
MODEL_SIZED = "model_sized"


@dataclass(frozen=True)
class ShapeParams:
    names: str  # the parametrize names: "bsz, seq_len, hidden_size"
    small: list[str]  # the values of each small case ("2, 3, 31") and of each model-sized one
    large: list[str]
    build: str  # the expression of the tensor shape from the names: "(bsz, seq_len, hidden_size)"
    first: tuple[int, ...]  # the first and last small shapes, for tests that run one shape
    last: tuple[int, ...]
    mark: str = MODEL_SIZED  # the name of the skip mark of model-sized cases

    @property
    def cases(self) -> list[str]:
        return self.cases_marked(self.mark)

    def cases_marked(self, mark: str) -> list[str]:
        """The parametrize entries, small ones first, model-sized ones as ``pytest.param`` carrying ``mark``."""
        single = "," not in self.names
        small = [case if single else f"({case})" for case in self.small]
        return small + [f"pytest.param({case}, marks={mark})" for case in self.large]


def _row_sizes(shape: tuple[int, ...], rank: int) -> tuple[int, ...]:
    return (1,) * (rank - len(shape)) + shape


def row_shape_params(small: list[tuple], large: list[tuple]) -> ShapeParams:
    """Tier 1 and 2: the last dim is the hidden size. Shapes of one rank up to 3 keep it (a reference written for
    [rows, columns] reduces dim 1, which must stay the last); mixed ranks are lifted to 3 with leading 1s, which an
    element-wise op or a last-dim reduction does not see. Longer shapes keep a single ``shape`` parameter."""
    ranks = {len(shape) for shape in small + large}
    if max(ranks) > len(ROW_NAMES):
        return _shape_params(["shape"], [(s,) for s in small], [(s,) for s in large], "shape", small)
    rank = ranks.pop() if len(ranks) == 1 else len(ROW_NAMES)
    names = list(ROW_NAMES[-rank:])
    lifted_small = [_row_sizes(tuple(s), rank) for s in small]
    lifted_large = [_row_sizes(tuple(s), rank) for s in large]
    return _shape_params(names, lifted_small, lifted_large, f"({', '.join(names)})", lifted_small)


def loss_shape_params(small: list[tuple], large: list[tuple]) -> ShapeParams:
    """Tier 3: ``B, T, V``. Logits given as [rows, classes] are B * T rows (B = 1); [B, T, V] ones stay 3-d."""
    ranks = {len(shape) for shape in small + large}
    if ranks == {2}:
        to_btv = [(1, *s) for s in small], [(1, *s) for s in large]
        return _shape_params(list(LOSS_NAMES), *to_btv, "(B * T, V)", [tuple(s) for s in small])
    if ranks == {3}:
        return _shape_params(list(LOSS_NAMES), small, large, "(B, T, V)", [tuple(s) for s in small])
    return _shape_params(["shape"], [(s,) for s in small], [(s,) for s in large], "shape", small)


def _shape_params(names, small, large, build, built_small) -> ShapeParams:
    def values(case):
        return ", ".join(repr(tuple(v)) if isinstance(v, (tuple, list)) else str(v) for v in case)

    return ShapeParams(
        names=", ".join(names),
        small=[values(case) for case in small],
        large=[values(case) for case in large],
        build=build,
        first=tuple(int(d) for d in built_small[0]),
        last=tuple(int(d) for d in built_small[-1]),
    )


def fused_linear_shape_params(small: list[tuple], large: list[tuple]) -> ShapeParams:
    """Fused linear + loss: ``B, T, H, V`` (upstream's test_fused_linear_cross_entropy), B * T rows of H features
    projected onto V classes; the tests' helpers take (rows, H, V)."""
    rows = [(b * t, h, v) for b, t, h, v in small]
    return _shape_params(["B", "T", "H", "V"], small, large, "(B * T, H, V)", rows)
