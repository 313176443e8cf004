"""A spec without score_mod or mask_mod: an error at line 1."""

normalization = "softmax"
