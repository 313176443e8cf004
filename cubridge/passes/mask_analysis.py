"""Symbolic mask analysis: which kv tiles a query tile must visit, and which need no mask.

A mask built from comparisons of affine expressions in q_idx and kv_idx
(with floordiv by positive constants, `kv_idx // m` included), combined with
and/or/not, is rewritten per query row as a union of kv intervals ("bands"):

    row q keeps kv  <=>  OR_i ( rows_i(q) and L_i(q) <= kv <= U_i(q) )

where L_i, U_i are monotone expressions in q and rows_i restricts q to a
range. The bound `kv < seqlen_kv` is part of every band, so a tile the plan
calls full needs neither the mask nor the sequence-end check.

`TilePlan` turns the bands into closed-form loop bounds of a query tile with
rows [q_first, q_last]: the kv tiles [kv_lo, kv_hi) it visits (the hull of
its bands) and, for a single-band mask, the tiles [full_lo, full_hi) where
every entry is kept. All are `Expr`s over `q_first`, `q_last` and
`seqlen_kv`, lowered to IR by the transfer pass and evaluated by tests.
Masks outside this class (data-dependent, or reading b, h or tables) get no
plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np
import torch

from cubridge.frontends.expr import BOOL, INT, Expr, argument, constant, evaluate

Q, KV, SEQLEN_KV = "q_idx", "kv_idx", "seqlen_kv"
Q_FIRST, Q_LAST = "q_first", "q_last"
MAX_BANDS = 8
EMPTY, PARTIAL, FULL = 0, 1, 2

_NEGATED = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}


class NotAffine(Exception):
    """The mask is outside the class the symbolic analysis handles."""


# ----------------------------------------------------------------------------
# Folding Expr builders
# ----------------------------------------------------------------------------


def _int(value: int) -> Expr:
    return constant(value)


def _value(expr: Expr) -> int | None:
    return expr.args[0] if expr.op == "const" and expr.kind == INT else None


def add(a: Expr, b: Expr) -> Expr:
    if _value(a) is not None and _value(b) is not None:
        return _int(_value(a) + _value(b))
    if _value(b) == 0:
        return a
    if _value(a) == 0:
        return b
    return Expr("add", (a, b), INT)


def scale(a: Expr, factor: int) -> Expr:
    if factor == 1:
        return a
    if _value(a) is not None:
        return _int(_value(a) * factor)
    return Expr("mul", (a, _int(factor)), INT)


def floordiv(a: Expr, divisor: int) -> Expr:
    if divisor == 1:
        return a
    if _value(a) is not None:
        return _int(_value(a) // divisor)
    return Expr("floordiv", (a, _int(divisor)), INT)


def ceildiv(a: Expr, divisor: int) -> Expr:
    if divisor == 1:
        return a
    if _value(a) is not None:
        return _int(-(-_value(a) // divisor))
    return Expr("ceildiv", (a, _int(divisor)), INT)


def negate(a: Expr) -> Expr:
    """-a, as an affine expression when `a` is one."""
    try:
        return _from_terms({t: -c for t, c in affine_terms(a).items()})
    except NotAffine:
        return scale(a, -1)


def extreme(op: str, a: Expr, b: Expr) -> Expr:
    if a == b:
        return a
    if _value(a) is not None and _value(b) is not None:
        return _int(min(_value(a), _value(b)) if op == "min" else max(_value(a), _value(b)))
    return Expr(op, (a, b), INT)


def substitute(expr: Expr, name: str, replacement: Expr) -> Expr:
    if expr.op == "arg":
        return replacement if expr.args[0] == name else expr
    args = tuple(substitute(a, name, replacement) if isinstance(a, Expr) else a for a in expr.args)
    return Expr(expr.op, args, expr.kind)


# ----------------------------------------------------------------------------
# Affine forms and atoms
# ----------------------------------------------------------------------------


def affine_terms(expr: Expr) -> dict[Expr, int]:
    """`expr` as {term: coefficient} (the constant under key `_int(1)`).

    Terms are `q_idx`, `kv_idx`, `seqlen_kv` and floordivs of affine
    expressions by constants.
    """
    op = expr.op
    if op == "const" and expr.kind == INT:
        return {_int(1): expr.args[0]}
    if op == "arg" and expr.args[0] in (Q, KV, SEQLEN_KV):
        return {expr: 1}
    if op == "floordiv":
        affine_terms(expr.args[0])
        return {expr: 1}
    if op in ("add", "sub"):
        sign = 1 if op == "add" else -1
        terms = dict(affine_terms(expr.args[0]))
        for term, coefficient in affine_terms(expr.args[1]).items():
            terms[term] = terms.get(term, 0) + sign * coefficient
        return terms
    if op == "neg":
        return {t: -c for t, c in affine_terms(expr.args[0]).items()}
    if op == "mul":
        lhs, rhs = expr.args
        factor, other = (_value(lhs), rhs) if _value(lhs) is not None else (_value(rhs), lhs)
        if factor is None:
            raise NotAffine("a product of two index expressions")
        return {t: c * factor for t, c in affine_terms(other).items()}
    raise NotAffine(f"'{op}' in a mask")


def _from_terms(terms: dict[Expr, int]) -> Expr:
    """Sum of the terms, written with subtractions and the constant last."""
    one = _int(1)
    result = None
    for term, coefficient in sorted(
        ((t, c) for t, c in terms.items() if c and t != one), key=lambda item: item[1] < 0
    ):
        piece = scale(term, abs(coefficient))
        if result is None:
            result = piece if coefficient > 0 else scale(term, coefficient)
        else:
            result = Expr("add" if coefficient > 0 else "sub", (result, piece), INT)
    constant_part = terms.get(one, 0)
    if result is None:
        return _int(constant_part)
    if constant_part:
        result = Expr("add" if constant_part > 0 else "sub", (result, _int(abs(constant_part))), INT)
    return result


def _reads(expr: Expr, name: str) -> bool:
    return name in expr.leaves()


def _kv_term_shape(term: Expr) -> tuple[int, int]:
    """(m, c) of a kv term `(kv_idx + c) // m` (m = 1: plain `kv_idx + c`)."""
    if term == argument(KV):
        return 1, 0
    inner = affine_terms(term.args[0]) if term.op == "floordiv" else {}
    offset = inner.pop(_int(1), 0)
    if inner != {argument(KV): 1}:
        raise NotAffine("kv_idx in a floordiv of anything but kv_idx plus a constant")
    return _value(term.args[1]), offset


@dataclass(frozen=True)
class Constraint:
    """`coefficient * term + rest >= 0`; term is kv_idx, kv_idx // m, or absent (a row constraint)."""

    coefficient: int
    term: Expr | None
    rest: Expr


def _atom(op: str, lhs: Expr, rhs: Expr) -> list[list[Constraint]]:
    """The comparison as a DNF of constraints (`!=` and `==` need two)."""
    if op == "ne":
        return _atom("lt", lhs, rhs) + _atom("gt", lhs, rhs)
    if op == "eq":
        return [_atom("le", lhs, rhs)[0] + _atom("ge", lhs, rhs)[0]]
    if op in ("lt", "le"):
        lhs, rhs = rhs, lhs
    # now lhs >= rhs (ge/le) or lhs > rhs (gt/lt)
    terms = affine_terms(Expr("sub", (lhs, rhs), INT))
    if op in ("gt", "lt"):
        terms[_int(1)] = terms.get(_int(1), 0) - 1
    kv_terms = [t for t, c in terms.items() if c and _reads(t, KV)]
    if len(kv_terms) > 1:
        raise NotAffine("kv_idx appears in more than one term")
    term = kv_terms[0] if kv_terms else None
    if term is not None:
        _kv_term_shape(term)
    coefficient = terms.pop(term) if term is not None else 0
    return [[Constraint(coefficient, term, _from_terms(terms))]]


def to_dnf(mask: Expr, negate: bool = False) -> list[list[Constraint]]:
    """The mask as OR of ANDs of constraints."""
    op = mask.op
    if op == "not":
        return to_dnf(mask.args[0], not negate)
    if op == "const":
        return [[]] if mask.args[0] != negate else []
    if op in ("and", "or"):
        lhs, rhs = (to_dnf(a, negate) for a in mask.args)
        if (op == "and") != negate:
            return [a + b for a, b in product(lhs, rhs)]
        return lhs + rhs
    if op in _NEGATED:
        return _atom(_NEGATED[op] if negate else op, *mask.args)
    raise NotAffine(f"'{op}' in a mask")


# ----------------------------------------------------------------------------
# Bands
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Band:
    """Rows q in [row_lo, row_hi] (no upper limit if None) keep kv in [lower(q), upper(q)]."""

    lower: Expr
    upper: Expr
    row_lo: Expr
    row_hi: Expr | None


def direction(expr: Expr) -> int | None:
    """+1 if non-decreasing in q_idx, -1 if non-increasing, 0 if constant, None if unknown."""
    op = expr.op
    if op == "arg":
        return 1 if expr.args[0] == Q else 0
    if op == "const":
        return 0
    if op == "mul":
        factor = _value(expr.args[1])
        inner = direction(expr.args[0])
        return None if inner is None else inner * (1 if factor > 0 else -1)
    if op in ("floordiv", "ceildiv"):
        return direction(expr.args[0])
    parts = {direction(a) for a in expr.args}
    if op == "sub":
        lhs, rhs = (direction(a) for a in expr.args)
        parts = {lhs, None if rhs is None else -rhs}
    if None in parts or {1, -1} <= parts:
        return None
    return max(parts, key=abs)


def _band(constraints: list[Constraint]) -> Band | None:
    """The band of one conjunction; None if it keeps nothing."""
    lower, upper = _int(0), add(argument(SEQLEN_KV), _int(-1))
    rows: list[Constraint] = []
    for c in constraints:
        if c.term is None:
            rows.append(c)
            continue
        divisor, offset = _kv_term_shape(c.term)
        if c.coefficient > 0:  # term >= t = ceil(-rest / coefficient), so kv >= m t - c
            bound = ceildiv(negate(c.rest), c.coefficient)
            lower = extreme("max", lower, add(scale(bound, divisor), _int(-offset)))
        else:  # term <= t = floor(rest / -coefficient), so kv <= m t + m - 1 - c
            bound = floordiv(c.rest, -c.coefficient)
            upper = extreme("min", upper, add(scale(bound, divisor), _int(divisor - 1 - offset)))
    rows += _nonempty_rows(lower, upper)
    row_lo, row_hi = _int(0), None
    for c in rows:
        terms = affine_terms(c.rest)
        slope = terms.pop(argument(Q), 0)
        if any(_reads(t, Q) for t, k in terms.items() if k):
            raise NotAffine("a row condition that is not affine in q_idx")
        rest = _from_terms(terms)
        if slope == 0:
            if _value(rest) is not None and _value(rest) < 0:
                return None
        elif slope > 0:
            row_lo = extreme("max", row_lo, ceildiv(negate(rest), slope))
        else:
            bound = floordiv(rest, -slope)
            row_hi = bound if row_hi is None else extreme("min", row_hi, bound)
    return Band(lower, upper, row_lo, row_hi)


def _nonempty_rows(lower: Expr, upper: Expr) -> list[Constraint]:
    """Row constraints `u - l >= 0` for bound pairs whose difference is affine in q."""
    found = []
    for low in _operands(lower, "max"):
        for high in _operands(upper, "min"):
            try:
                terms = affine_terms(Expr("sub", (high, low), INT))
            except NotAffine:
                continue
            if not any(_reads(t, Q) and t != argument(Q) for t, k in terms.items() if k):
                found.append(Constraint(0, None, _from_terms(terms)))
    return found


def _operands(expr: Expr, op: str) -> list[Expr]:
    if expr.op != op:
        return [expr]
    return [x for a in expr.args for x in _operands(a, op)]


def bands(mask: Expr | None) -> list[Band]:
    """The mask (None: keep everything) as bands; raises NotAffine outside the class."""
    if mask is not None and mask.leaves() - {Q, KV}:
        raise NotAffine("the mask reads " + ", ".join(sorted(mask.leaves() - {Q, KV})))
    dnf = to_dnf(mask) if mask is not None else [[]]
    if len(dnf) > MAX_BANDS:
        raise NotAffine(f"more than {MAX_BANDS} bands")
    found = [b for b in map(_band, dnf) if b is not None]
    merged: list[Band] = []
    for band in found:
        for i, other in enumerate(merged):
            same_rows = (band.row_lo, band.row_hi) == (other.row_lo, other.row_hi)
            if same_rows and band.lower == other.lower:
                merged[i] = Band(band.lower, extreme("max", band.upper, other.upper), band.row_lo, band.row_hi)
                break
            if same_rows and band.upper == other.upper:
                merged[i] = Band(extreme("min", band.lower, other.lower), band.upper, band.row_lo, band.row_hi)
                break
        else:
            merged.append(band)
    for band in merged:
        if direction(band.lower) is None or direction(band.upper) is None:
            raise NotAffine("a kv bound that is not monotone in q_idx")
    return merged


# ----------------------------------------------------------------------------
# Tile plan
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TilePlan:
    """Closed-form kv tile ranges of a query tile (Exprs over q_first, q_last, seqlen_kv);
    `varies_by_tile`: whether query tiles visit different kv ranges; `disjoint`: whether rows keep
    several kv intervals, so that [kv_lo, kv_hi) is their hull and may hold empty tiles."""

    kv_lo: Expr
    kv_hi: Expr
    full_lo: Expr
    full_hi: Expr
    varies_by_tile: bool
    disjoint: bool = False


def _at_rows(expr: Expr, first: Expr, last: Expr, smallest: bool) -> Expr:
    """`expr` at the row of [first, last] where it is smallest (or largest)."""
    rising = direction(expr) >= 0
    return substitute(expr, Q, first if rising == smallest else last)


def tile_plan(mask: Expr | None, block_n: int) -> TilePlan:
    """The plan for kv tiles of `block_n` columns; raises NotAffine outside the class."""
    q_first, q_last = argument(Q_FIRST), argument(Q_LAST)
    tiles = ceildiv(argument(SEQLEN_KV), block_n)
    lows, highs = [], []
    found = bands(mask)
    for band in found:
        first = q_first if _value(band.row_lo) == 0 else extreme("max", q_first, band.row_lo)
        last = q_last if band.row_hi is None else extreme("min", q_last, band.row_hi)
        low = _at_rows(band.lower, first, last, smallest=True)
        high = _at_rows(band.upper, first, last, smallest=False)
        keeps = Expr("le", (low, high), BOOL)
        if _rows_matter(band):  # a work tile's rows are never empty: only a band of some rows can miss them
            keeps = Expr("and", (Expr("le", (first, last), BOOL), keeps), BOOL)
        lows.append(Expr("select", (keeps, floordiv(low, block_n), tiles), INT))
        highs.append(Expr("select", (keeps, add(floordiv(high, block_n), _int(1)), _int(0)), INT))
    kv_lo, kv_hi = _fold("min", lows, tiles), _fold("max", highs, _int(0))
    varies = any(_rows_matter(band) for band in found)
    if len(found) != 1:
        return TilePlan(kv_lo, kv_hi, _int(0), _int(0), varies, disjoint=len(found) > 1)
    band = found[0]
    full_lo = ceildiv(_at_rows(band.lower, q_first, q_last, smallest=False), block_n)
    full_hi = floordiv(add(_at_rows(band.upper, q_first, q_last, smallest=True), _int(1)), block_n)
    row_checks = [Expr("le", (band.row_lo, q_first), BOOL)] if _value(band.row_lo) != 0 else []
    if band.row_hi is not None:
        row_checks.append(Expr("le", (q_last, band.row_hi), BOOL))
    if row_checks:  # a tile with rows outside the band's rows has no full kv tile
        full_hi = Expr("select", (_fold("and", row_checks, None), full_hi, full_lo), INT)
    return TilePlan(kv_lo, kv_hi, full_lo, full_hi, varies)


def _rows_matter(band: Band) -> bool:
    """Whether the band's kv bounds or its rows depend on the query row (else every work tile keeps the same keys)."""
    return bool(direction(band.lower) or direction(band.upper) or _value(band.row_lo) != 0 or band.row_hi is not None)


def _fold(op: str, values: list[Expr], empty: Expr | None) -> Expr:
    if not values:
        return empty
    result = values[0]
    for value in values[1:]:
        result = extreme(op, result, value) if op in ("min", "max") else Expr(op, (result, value), BOOL)
    return result


def classify_tiles(plan: TilePlan, block_m: int, block_n: int, seqlen_q: int, seqlen_kv: int) -> np.ndarray:
    """EMPTY / PARTIAL / FULL for every (q tile, kv tile) pair, as the plan decides."""
    q_tiles = -(-seqlen_q // block_m)
    kv_tiles = -(-seqlen_kv // block_n)
    q_first = torch.arange(q_tiles) * block_m
    env = {
        Q_FIRST: q_first,
        Q_LAST: torch.clamp(q_first + block_m, max=seqlen_q) - 1,
        SEQLEN_KV: torch.tensor(seqlen_kv),
    }
    lo, hi, full_lo, full_hi = (
        evaluate(e, env).expand(q_tiles)[:, None]
        for e in (plan.kv_lo, plan.kv_hi, plan.full_lo, plan.full_hi)
    )
    kv = torch.arange(kv_tiles)[None, :]
    visited = (kv >= lo) & (kv < hi)
    full = visited & (kv >= full_lo) & (kv < full_hi)
    return (visited.int() + full.int()).numpy()
