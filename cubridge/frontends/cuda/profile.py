"""Lifting profiles: declarative tables that map a kernel library's calls and idioms to CuIR (TOML files in
`profiles/`, one per vocabulary; docs/lifting-profiles.md)."""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

from cubridge.diagnostics import CuBridgeError
from cubridge.runtime.primitives import PRIMITIVES

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    table: dict

    def section(self, name: str) -> dict:
        return self.table.get(name, {})

    @functools.cached_property
    def definition_flags(self) -> frozenset[str]:
        """Policy flags and kernel constants the lift reads as false (`[policy] definition_flags`): each selects
        another evaluation of what the kernel's plain path defines (a reassociated score_mod, unswitched loops,
        exp2 by polynomial)."""
        return frozenset(self.section("policy").get("definition_flags", ()))

    @functools.cached_property
    def kernel_flags(self) -> dict[str, str]:
        """Policy flags that are a `cuir.kernel` attribute (`[policy] kernel_flags`: flag -> attribute): the lift
        reads them as false in the code and sets the attribute where the policy's flag is true."""
        return dict(self.section("policy").get("kernel_flags", {}))

    @property
    def warp_group_threads(self) -> int:
        return int(self.table["vocabulary"]["warp_group_threads"])

    def primitive(self, function: str) -> tuple[str, list[str]] | None:
        """(CuIR op, argument roles) of primitive `function`, or None when the profile has no such call."""
        roles = self.section("primitives").get(function)
        if roles is None:
            return None
        if isinstance(roles, dict):  # a library call with its op given: `{ op = "cuir.map", roles = [...] }`
            row = self.entry(function)
            return row["op"], list(row["roles"])
        ops = [p.op for p in PRIMITIVES if p.function == function]
        if not ops:
            raise CuBridgeError(f"profile {self.path.name}: `{function}` is in no row of the op-to-primitive table")
        return ops[0], list(roles)


    def entry(self, function: str) -> dict | None:
        """The row of a library call whose op the profile gives (None: a project primitive or no call)."""
        row = self.section("primitives").get(function)
        if not isinstance(row, dict):
            return None
        if not isinstance(row.get("op"), str) or not isinstance(row.get("roles"), list):
            raise CuBridgeError(f"profile {self.path.name}: the row of `{function}` needs `op` (a CuIR op name) and "
                                "`roles` (a list)")
        return row


def load_profile(name_or_path: str) -> Profile:
    """A profile by name (`cubridge`, in profiles/) or by path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = PROFILE_DIR / f"{name_or_path}.toml"
    try:
        table = tomllib.loads(path.read_text())
    except OSError as exc:
        raise CuBridgeError(f"cannot read lifting profile: {exc.strerror}", str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise CuBridgeError(f"lifting profile: {exc}", str(path)) from None
    return Profile(table.get("vocabulary", {}).get("name", path.stem), path, table)
