"""The `xdsl.universe` entry point: makes CuIR and its passes known to any xDSL tool."""

from xdsl.universe import Universe

from cubridge.passes import PASS_FACTORIES


def _cuir_dialect():
    from cubridge.dialect.cuir import CuIR

    return CuIR


CUBRIDGE_UNIVERSE = Universe(all_dialects={"cuir": _cuir_dialect}, all_passes=PASS_FACTORIES)
