"""Shared question: a QUESTION-token prompt followed by answers of ANSWER tokens each.

Every token sees the question causally; answer tokens also see earlier tokens
of their own answer, never other answers.
"""

QUESTION = 40
ANSWER = 30


def mask_mod(b, h, q_idx, kv_idx):
    same_answer = (q_idx - QUESTION) // ANSWER == (kv_idx - QUESTION) // ANSWER
    return (q_idx >= kv_idx) & ((kv_idx < QUESTION) | same_answer)
