"""Host helpers of ``liger_kernel.ops.utils`` that generated kernels import."""

import torch

from liger_kernel.ops.utils import own_buffer


def test_an_input_takes_its_own_gradient_where_contiguous_and_not_under_torch_compile(monkeypatch):
    x = torch.randn(4, 8)
    assert own_buffer(x, 4, 8) is x
    strided = torch.randn(8, 4).t()
    new = own_buffer(strided, 4, 8)
    assert new.shape == (4, 8) and new.is_contiguous() and new.data_ptr() != strided.data_ptr()
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)  # the compiler plans the graph's buffers
    assert own_buffer(x, 4, 8) is not x
