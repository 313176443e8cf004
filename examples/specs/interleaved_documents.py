"""Interleaved documents: the keys hold the pages of two documents interleaved
(as in a paged KV cache), the queries hold the two documents back to back.

A query attends only to keys of its own document. `q_document` and
`kv_document` are captured (kernel inputs). The kv tiles a query tile keeps
are not contiguous: queries of document 0 keep the pages at 0..99 and
260..359 and skip the document-1 page in between (kv 100..259), which covers
whole kv tiles of 64 and of 128 columns.
"""

import torch

MAX_SEQLEN = 512
QUERY_LENGTHS = (140, 372)
# (document, length) of each kv page, in storage order
KV_PAGES = ((0, 100), (1, 160), (0, 100), (1, 60), (0, 92))

q_document = torch.repeat_interleave(torch.arange(len(QUERY_LENGTHS)), torch.tensor(QUERY_LENGTHS))
kv_document = torch.cat([torch.full((length,), document) for document, length in KV_PAGES])


def mask_mod(b, h, q_idx, kv_idx):
    return q_document[q_idx] == kv_document[kv_idx]
