"""Property: the examples verify on any small problem shape."""

from hypothesis import given, settings
from hypothesis import strategies as st

from example_programs import load_example

from cubridge.interpreter import ProblemShape, verify


@st.composite
def shapes(draw):
    heads_kv = draw(st.integers(1, 2))
    return ProblemShape(
        batch=draw(st.integers(1, 2)),
        heads_q=heads_kv * draw(st.integers(1, 3)),
        heads_kv=heads_kv,
        seqlen_q=draw(st.integers(1, 300)),
        seqlen_kv=draw(st.integers(1, 300)),
        head_dim=128,
    )


@settings(max_examples=6, deadline=None)
@given(
    shape=shapes(),
    seed=st.integers(0, 2**16),
    name=st.sampled_from(["attention_sm80.mlir", "attention_sm90.mlir"]),
)
def test_examples_verify_on_random_shapes(shape, seed, name):
    result = verify(load_example(name), shapes=[shape], seeds=(seed,))
    assert result.ok, result.summary()
