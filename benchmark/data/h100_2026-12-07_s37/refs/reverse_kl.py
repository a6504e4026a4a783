import torch


def reverse_kl(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """KL(student || teacher), as in MiniLLM; mean over tokens."""
    log_q = torch.log_softmax(student_logits.float(), dim=-1)
    log_p = torch.log_softmax(teacher_logits.float(), dim=-1).detach()
    q = log_q.exp()
    per_token = (q * (log_q - log_p)).sum(dim=-1)
    return per_token.mean()
