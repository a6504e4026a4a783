import torch.nn.functional as F


def jsd_loss(student_logits, teacher_logits, beta: float = 0.5):
    s_logp = F.log_softmax(student_logits, dim=-1)
    t_logp = F.log_softmax(teacher_logits, dim=-1)
    mix = beta * s_logp.exp() + (1.0 - beta) * t_logp.exp()
    log_mix = mix.log()
    kl_s = F.kl_div(log_mix, s_logp, reduction="batchmean", log_target=True)
    kl_t = F.kl_div(log_mix, t_logp, reduction="batchmean", log_target=True)
    return beta * kl_s + (1.0 - beta) * kl_t
