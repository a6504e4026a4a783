"""The shape parameters of generated tests (tools/kernelgen/render/test_shapes.py): upstream's names, one list for
every device, the model-sized cases marked so the CPU skips them."""

from tools.kernelgen.render.test_shapes import MODEL_SIZED
from tools.kernelgen.render.test_shapes import fused_linear_shape_params
from tools.kernelgen.render.test_shapes import loss_shape_params
from tools.kernelgen.render.test_shapes import row_shape_params


def test_rows_of_rank_3_are_bsz_seq_len_hidden_size_with_model_sized_cases_marked():
    shapes = row_shape_params([(2, 3, 31), (1, 5, 64)], [(2, 512, 4096)])
    assert shapes.names == "bsz, seq_len, hidden_size"
    assert shapes.cases == ["(2, 3, 31)", "(1, 5, 64)", f"pytest.param(2, 512, 4096, marks={MODEL_SIZED})"]
    assert shapes.build == "(bsz, seq_len, hidden_size)"
    assert (shapes.first, shapes.last) == ((2, 3, 31), (1, 5, 64))


def test_mixed_ranks_are_lifted_to_3_and_one_rank_keeps_its_own():
    mixed = row_shape_params([(2, 3, 31), (3, 127)], [(4, 333, 1023)])
    assert mixed.cases[:2] == ["(2, 3, 31)", "(1, 3, 127)"] and mixed.last == (1, 3, 127)
    # A reference written for [rows, columns] may reduce dim 1: it must stay the last one.
    matrix = row_shape_params([(6, 31), (4, 1)], [(1024, 4096)])
    assert (matrix.names, matrix.build, matrix.last) == ("seq_len, hidden_size", "(seq_len, hidden_size)", (4, 1))
    vector = row_shape_params([(31,)], [(4096,)])
    assert (vector.names, vector.cases[0]) == ("hidden_size", "31")


def test_shapes_of_more_than_three_dims_keep_one_shape_parameter():
    shapes = row_shape_params([(2, 2, 3, 31)], [(2, 8, 64, 4096)])
    assert (shapes.names, shapes.build) == ("shape", "shape")
    assert shapes.cases == ["(2, 2, 3, 31)", f"pytest.param((2, 8, 64, 4096), marks={MODEL_SIZED})"]


def test_loss_logits_are_b_t_v():
    rows = loss_shape_params([(3, 127), (2, 20000)], [(4096, 32000)])
    assert (rows.names, rows.build) == ("B, T, V", "(B * T, V)")
    assert rows.cases == ["(1, 3, 127)", "(1, 2, 20000)", f"pytest.param(1, 4096, 32000, marks={MODEL_SIZED})"]
    assert (rows.first, rows.last) == ((3, 127), (2, 20000))  # the helpers take [rows, classes]
    batched = loss_shape_params([(2, 3, 127)], [(2, 1024, 32000)])
    assert (batched.build, batched.first) == ("(B, T, V)", (2, 3, 127))


def test_fused_linear_shapes_are_b_t_h_v():
    shapes = fused_linear_shape_params([(2, 5, 16, 300)], [(1, 1024, 4096, 128256)])
    assert (shapes.names, shapes.build, shapes.first) == ("B, T, H, V", "(B * T, H, V)", (10, 16, 300))
