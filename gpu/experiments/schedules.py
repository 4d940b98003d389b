"""Schedule pieces that studies of more than one notebook topic use: the copy kernel of the bandwidth
ceiling and the tensor-core tiling steps."""

from __future__ import annotations

import tvm
from tvm.script import ir as I
from tvm.script import tirx as T


def copy_module(n: int) -> tvm.IRModule:
    """B[i] = A[i] over n floats: the kernel that measures the bandwidth ceiling (notebooks 00-02)."""

    @I.ir_module
    class Copy:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((n,), "float32"), B: T.Buffer((n,), "float32")):
            T.func_attr({"tirx.noalias": True})
            for i in range(n):
                with T.sblock("B"):
                    vi = T.axis.spatial(n, i)
                    B[vi] = A[vi]

    return Copy


def blockize_fragments(sch, block, rows: int, cols: int, depth: int):
    """Split the matmul `block`'s i, j and k loops into tiles of one tensor-core operation (rows x
    cols x depth) and make each tile a block of its own. Returns that block and the outer i, j, k."""
    i, j, k = sch.get_loops(block)
    i, i_tc = sch.split(i, [None, rows])
    j, j_tc = sch.split(j, [None, cols])
    k, k_tc = sch.split(k, [None, depth])
    sch.reorder(i, j, k, i_tc, j_tc, k_tc)
    return sch.blockize(i_tc), i, j, k


def tile_copy(sch, block, rows: int, cols: int):
    """Split the last two loops of a fragment copy into rows x cols tiles, tiles outermost; returns
    the two tile loops and the loop holding one tile (what a load or store intrinsic replaces)."""
    x, y = sch.get_loops(block)[-2:]
    x0, x1 = sch.split(x, [None, rows])
    y0, y1 = sch.split(y, [None, cols])
    sch.reorder(x0, y0, x1, y1)
    return x0, y0, x1
