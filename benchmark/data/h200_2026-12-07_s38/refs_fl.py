"""Session 38's fused linear distillation reference (generated as `distill_kl --fused-linear`), the same math as the
`.whl/refs_fl.py:distillation` of sessions 28-36: the forward KL(teacher || student) of the softened distributions,
averaged over tokens, which upstream's fused linear JSD computes at beta 0."""

import torch.nn.functional as F


def distillation(student_logits, teacher_logits, temperature: float = 1.0):
    log_student = F.log_softmax(student_logits / temperature, dim=-1)
    log_teacher = F.log_softmax(teacher_logits / temperature, dim=-1)
    return F.kl_div(log_student, log_teacher, reduction="batchmean", log_target=True)
