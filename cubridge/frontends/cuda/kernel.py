"""The kernel level of a lift: the `cuir.kernel` header, its arguments, shared allocations and mbarrier inits."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, f32, i32

from cubridge.dialect.cuir import AllocOp, ForEachTileOp, KernelOp, MbarrierInitOp, WorkerOp
from cubridge.dialect.types import GlobalTensorType, SharedBufferType
from cubridge.frontends.cuda.lift import ELEMENT_TYPES, Lifter
from cubridge.frontends.cuda.program import declarator_name, text, walk
from cubridge.frontends.cuda.values import Cell, ParamsValue, Scope, StructValue, TensorArgument, TypeValue


def lift_kernel(lifter: Lifter) -> ModuleOp:
    """Lift `lifter.entry` into a module holding one `cuir.kernel`."""
    function = lifter.entry.function
    node, source = function.node, function.source
    scope = Scope(None, source=source)
    for (_, name), argument in zip(function.template_parameters, lifter.entry.template_arguments):
        value = lifter.value(argument, Scope(None, source=lifter.program.main))
        scope.names[name] = Cell(name, value, mutable=False)  # a template kernel's instance: f<128, false>
    lifter.threads = _launch_threads(lifter, node, scope)
    lifter.active = np.ones(lifter.threads, dtype=bool)
    lifter.emitted_threads = np.zeros(lifter.threads, dtype=bool)
    body = node.child_by_field_name("body")
    element = _element_type(lifter, body, scope)
    lifter.element_type = element
    parameters = lifter.profile.section("parameters")
    suffix = parameters.get("tensor_map_suffix", "_map")
    rank = int(parameters.get("tensor_map_rank", 4))

    arguments: list[tuple[str, object]] = []
    policy_tables: list[tuple[str, GlobalTensorType]] = []
    header_flags: set[str] = set()  # the cuir.kernel attributes the variant policy's kernel flags set
    declarator = node.child_by_field_name("declarator")
    for parameter in declarator.child_by_field_name("parameters").named_children:
        name = declarator_name(parameter.child_by_field_name("declarator"))
        type_name = text(parameter.child_by_field_name("type")).split("<")[0]
        if type_name == "CUtensorMap":
            tensor = name[: -len(suffix)] if name.endswith(suffix) else name
            arguments.append((tensor, GlobalTensorType(rank, element)))
            scope.names[name] = Cell(name, TensorArgument(tensor), mutable=False)
        elif type_name in lifter.program.structs and lifter.program.structs[type_name].fields and \
                any(f[1] in parameters.get("fields", {}) for f in lifter.program.structs[type_name].fields):
            scope.names[name] = Cell(name, ParamsValue(type_name), mutable=False)
        else:  # the variant policy's Args: its captured tables (none in the references' own policies)
            struct_name = lifter.struct_name(type_name)
            if struct_name is None:
                scope.names[name] = Cell(name, TypeValue(type_name), mutable=False)
                continue
            tables = _policy_tables(lifter, struct_name, scope, parameter)
            policy_tables += tables
            header_flags |= _kernel_attributes(lifter, struct_name.rpartition("::")[0], scope, parameter)
            scope.names[name] = Cell(name, StructValue(struct_name, {
                field: Cell(field, TensorArgument(field), mutable=False) for field, _ in tables}), mutable=False)
    tensor_maps = len(arguments)
    for field, mapping in parameters.get("fields", {}).items():
        if "tensor" in mapping and all(name != mapping["tensor"] for name, _ in arguments):
            arguments.append((mapping["tensor"], GlobalTensorType(int(mapping["rank"]), ELEMENT_TYPES["float"]
                                                                  if mapping.get("element") == "f32" else element)))
        elif "scalar" in mapping and all(name != mapping["scalar"] for name, _ in arguments):
            arguments.append((mapping["scalar"], f32))

    lifter.profile_arguments = [name for name, _ in arguments[tensor_maps:]]
    arguments += policy_tables  # after the kernel's own, as the transfer appends them
    schedule = lifter.profile.section("tile_scheduler")
    tile_rows = schedule["tile_rows"]
    tile_m = int(lifter.constant(tile_rows, (), scope, node) if tile_rows in lifter.program.constants else
                 lifter.profile_expression(tile_rows, scope, node))
    symbol = re.sub(r"\W+", "_", lifter.entry.name).strip("_")  # fwd_attend_ker<128,false> -> fwd_attend_ker_128_false
    skip_empty = "skip_empty" in header_flags  # the claiming program skips tiles: the dynamic schedule's
    cluster = _cluster_dims(lifter, function, scope)
    order = schedule.get("cluster_order" if cluster != (1, 1, 1) else "order", schedule.get("order", "natural"))
    kernel = KernelOp(symbol, arguments, threads=lifter.threads, smem_bytes=0, tile_m=tile_m,
                      schedule="dynamic" if skip_empty else schedule.get("schedule", "persistent"),
                      order=order, cluster=cluster, source=Path(lifter.program.main.path).name, skip_empty=skip_empty)
    kernel.location = lifter.location(scope, node)
    lifter.kernel = kernel
    lifter.block = kernel.body.block
    for name, _ in arguments:
        lifter.tensors[name] = kernel.argument(name)

    if schedule.get("schedule") == "grid":
        lifter.run_kernel_body(body, scope)
    else:
        lifter.execute(body, scope)
    lifter.close_grid_tile()
    for value, name in lifter.fallback_names:  # a tile or row vector no C++ variable held as a whole
        if value.name_hint is None and name is not None:
            value.name_hint = name
    _finish_shared(lifter, kernel)
    _drop_unread_arguments(kernel, set(lifter.profile_arguments))
    if not any(isinstance(op, ForEachTileOp) for op in kernel.walk()):
        raise lifter.error(Scope(None, source=lifter.program.main), lifter.entry.call,
                           f"no attention structure in `{lifter.entry.name}`: no worker role walks the tile "
                           "scheduler's tiles (cuir.for_each_tile)")
    return ModuleOp([kernel])


def _drop_unread_arguments(kernel: KernelOp, optional: set[str]) -> None:
    """Arguments the profile maps that this instance never reads (an activation variant's LSE) are dropped."""
    block = kernel.body.block
    names = [name.data for name in kernel.arg_names.data]
    for index in reversed(range(len(names))):
        if names[index] in optional and not block.args[index].uses:
            block.erase_arg(block.args[index])
            del names[index]
    kernel.properties["arg_names"] = ArrayAttr([StringAttr(name) for name in names])


def _cluster_dims(lifter: Lifter, function, scope: Scope) -> tuple[int, int, int]:
    """The entry point's `__cluster_dims__` (compile-time constants), (1, 1, 1) without one."""
    node, source = function.node, function.source
    body = node.child_by_field_name("body")
    written = [dims for row, dims in source.cluster_dims.items() if node.start_point[0] <= row <= body.start_point[0]]
    if not written:
        return (1, 1, 1)
    sizes = []
    for size in written[0]:
        value = None
        if size.isdigit():
            value = int(size)
        elif size in lifter.program.constants:
            value = lifter.constant(size, (), scope, node)
        if not isinstance(value, int) or value < 1:
            raise lifter.error(scope, node, f"__cluster_dims__ size `{size}` is not a positive compile-time constant")
        sizes.append(value)
    return tuple(sizes + [1] * (3 - len(sizes)))


def _launch_threads(lifter: Lifter, node, scope: Scope) -> int:
    bounds = next((c for c in node.children if c.type == "launch_bounds"), None)
    if bounds is None:
        raise lifter.error(scope, node, "an entry point without __launch_bounds__: the block size is unknown")
    first = next(c for c in bounds.named_children)
    value = lifter.value(first, scope)
    if not isinstance(value, int):
        raise lifter.error(scope, first, "__launch_bounds__ is not a compile-time constant")
    return value


def _element_type(lifter: Lifter, body, scope: Scope):
    """The tensors' element type: the 16-bit float type the entry instantiates its kernel with (a C++ type,
    a name of the profile's `[types] element`, or the element of a shared tile type it uses)."""
    types = lifter.profile.section("types")
    named = {name: lifter.element_type_named(element)
             for table in (types.get("element", {}), types.get("shared_tile", {})) for name, element in table.items()}
    for node in walk(body):
        if node.type == "template_type" and text(node.child_by_field_name("name")) in named and \
                named[text(node.child_by_field_name("name"))] != ELEMENT_TYPES["float"]:
            return named[text(node.child_by_field_name("name"))]  # a library tile type: st_bf<64, 128>
        if node.type == "template_argument_list":
            for argument in node.named_children:
                name = " ".join(text(argument).split())
                if name in ELEMENT_TYPES and name != "float":
                    return ELEMENT_TYPES[name]
                if name in named and named[name] != ELEMENT_TYPES["float"]:
                    return named[name]
    raise lifter.error(scope, body, "the entry point instantiates no 16-bit element type (__nv_bfloat16, __half)")


def _finish_shared(lifter: Lifter, kernel: KernelOp) -> None:
    """mbarrier inits with their CuIR counts (CUDA count over the arrivals one worker instance makes), and
    the kernel's shared-memory size: its tiles and 8 bytes per mbarrier stage."""
    block = kernel.body.block
    first_worker = next((op for op in block.ops if isinstance(op, WorkerOp)), None)
    for name, barrier in lifter.barriers.items():
        per_instance = barrier.arrivals_per_instance or 1
        if barrier.cuda_count % per_instance:
            raise lifter.error(barrier.init_source, barrier.init_node,
                               f"`{name}` expects {barrier.cuda_count} arrivals, not a multiple of the "
                               f"{per_instance} each warp-group instance makes")
        init = MbarrierInitOp(lifter.barrier_allocs[name], barrier.cuda_count // per_instance)
        saved = lifter.call_sites
        lifter.call_sites = barrier.call_sites
        init.location = lifter.location(Scope(None, source=barrier.init_source), barrier.init_node)
        lifter.call_sites = saved
        if first_worker is not None:
            block.insert_op_before(init, first_worker)
        else:
            block.add_op(init)
    total = 0
    for op in block.ops:
        if isinstance(op, AllocOp):
            result_type = op.results[0].type
            total += result_type.total_bytes if isinstance(result_type, SharedBufferType) else \
                8 * result_type.stages.data
    kernel.properties["smem_bytes"] = kernel.smem_bytes.__class__(total, 64)


def shared_allocations(lifter: Lifter, storage_type: TypeValue, scope: Scope, node) -> dict:
    """`cuir.alloc`s of the shared storage's tiles (profile `shared_storage.tile_bytes` and `stages`)."""
    profile = lifter.profile.section("shared_storage")
    layout = lifter.struct_member(storage_type.name, storage_type.arguments, profile["layout"], scope, node)
    columns = int(lifter.value_of_name(profile["columns"], storage_type, scope, node))
    element_bytes = 2
    allocs = {}
    by_offset: dict[int, str] = {}
    for method, bytes_name in profile["tile_bytes"].items():
        tile_bytes = int(lifter.struct_member(layout.name, layout.arguments, bytes_name, scope, node))
        stages = int(lifter.value_of_name(profile["stages"][method], storage_type, scope, node))
        rows = tile_bytes // (columns * element_bytes)
        buffer_type = SharedBufferType((rows, columns), lifter.element_type, stages=stages, swizzle=128)
        offset = int(lifter.struct_member(layout.name, layout.arguments, profile["offsets"][method], scope, node))
        if offset in by_offset:  # staged in another tile's buffer: the same allocation
            alias = allocs[by_offset[offset]]
            if alias.type != buffer_type:
                raise lifter.error(scope, node, f"`{method}` shares `{by_offset[offset]}`'s bytes with another shape")
            allocs[method] = alias
            continue
        by_offset[offset] = method
        op = AllocOp(buffer_type)
        op.result.name_hint = method
        op.location = lifter.location(scope, node)
        lifter.kernel.body.block.add_op(op)
        allocs[method] = op.result
    return allocs


def _kernel_attributes(lifter: Lifter, policy: str, scope: Scope, node) -> set[str]:
    """The `cuir.kernel` attributes that `policy`'s kernel flags (profile `[policy] kernel_flags`) set."""
    if not policy or policy not in lifter.program.structs:
        return set()
    return {attribute for flag, attribute in lifter.profile.kernel_flags.items()
            if lifter.struct_member(policy, (), flag, scope, node, as_written=True)}


def _policy_tables(lifter: Lifter, type_name: str, scope: Scope, node) -> list[tuple[str, GlobalTensorType]]:
    """The captured tables of a variant policy's Args struct (`[parameters] table`: `Table<float, R>` is an f32
    tensor of rank R, `Table<int, R>` an i32 one), as the transfer adds them to a kernel's arguments."""
    struct = lifter.program.structs[type_name]
    parameters = lifter.profile.section("parameters")
    table = parameters.get("table", "Table")
    tables = []
    for field_type, field, _ in struct.fields:
        if field in parameters.get("flag_tables", ()):
            continue  # read only where a definition flag selects the other path
        match = re.fullmatch(rf"{table}<\s*(float|int)\s*,\s*(\d+)\s*>", field_type)
        if match is None:
            raise lifter.error(scope, node, f"`{type_name}::{field}` is a `{field_type}`, not a captured table "
                                            f"(`{table}<float or int, rank>`)")
        element = ELEMENT_TYPES["float"] if match[1] == "float" else i32
        tables.append((field, GlobalTensorType(int(match[2]), element, "row_major")))
    return tables
