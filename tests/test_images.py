"""The committed diagrams are exactly what images/draw.py draws."""

import importlib.util
from pathlib import Path

import pytest

IMAGES = Path(__file__).resolve().parent.parent / "images"


def _draw_module():
    spec = importlib.util.spec_from_file_location("draw", IMAGES / "draw.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_images_are_regenerated_identically(tmp_path):
    draw = _draw_module()
    written = draw.draw_all(tmp_path)
    if not written:
        pytest.skip("no figures_*.py modules yet")
    for path in written:
        committed = IMAGES / path.name
        assert committed.exists(), f"{path.name} is drawn by images/draw.py but not committed"
        assert committed.read_bytes() == path.read_bytes(), f"{path.name} differs from what images/draw.py draws"


def test_every_committed_image_is_drawn_by_a_script():
    drawn = {f"{name}.png" for name, _ in _draw_module().figure_functions()}
    committed = {p.name for p in IMAGES.glob("*.png")}
    assert drawn, "images/draw.py finds no draw_* functions"
    assert committed <= drawn, f"committed but drawn by no script (delete them or draw them): {sorted(committed - drawn)}"


def test_every_diagram_has_text_of_at_least_9_px_at_full_size():
    """tests/test_book.py checks the text as the book shows it (the PNG's size times the scale it is shown at);
    at full size, no diagram may start below the 9 px a reader needs."""
    small = {name: round(px, 1) for name, px in _draw_module().text_sizes().items() if px < 9}
    assert not small, f"diagrams whose smallest text is under 9 px at full size: {small}"


def first_tiling(code: str) -> dict[str, int]:
    """Notebook 05's first warp tiling, in fragments of 16: warps (wm x wn) of fragments (fm x fn), the k tile and
    the fragments of one k step. Written as a dict of settings (`dict(warps=(4, 4), frags=(2, 2), k_tile=4,
    k_step=2)`, keys in any order) or as the split factors of the loops (`sch.split(i, [None, 4, 2])`)."""
    import ast
    import re

    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "dict":
            given = {k.arg: k.value for k in node.keywords}
            if {"warps", "frags", "k_tile", "k_step"} <= set(given):
                (wm, wn), (fm, fn) = ast.literal_eval(given["warps"]), ast.literal_eval(given["frags"])
                return dict(wm=wm, wn=wn, fm=fm, fn=fn, k_tile=ast.literal_eval(given["k_tile"]),
                            k_step=ast.literal_eval(given["k_step"]))
    split = dict(re.findall(r"sch\.split\(([ijk]), \[None, (\d+, \d+)\]\)", code))
    assert set(split) >= {"i", "j", "k"}, "notebook 05's first warp tiling is not found: update first_tiling()"
    (wm, fm), (wn, fn), (steps, k_step) = ([int(x) for x in split[a].split(", ")] for a in "ijk")
    return dict(wm=wm, wn=wn, fm=fm, fn=fn, k_tile=steps * k_step, k_step=k_step)


def test_the_wmma_tiling_diagram_draws_the_kernel_notebook_05_builds():
    """wmma_tiling.png stands beside notebook 05's first tensor-core schedule (section 5): its block tile, warps,
    fragments and k tile are that schedule's."""
    import matplotlib.pyplot as plt
    import nbformat
    from matplotlib.text import Text

    nb = nbformat.read(IMAGES.parent / "notebooks" / "05_tensor_core_tensorization.ipynb", as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code" and not c.source.startswith(("%", "!"))]
    t = first_tiling("\n\n".join(code))
    fig = dict(_draw_module().figure_functions())["wmma_tiling"]()
    text = " ".join(x.get_text().replace("\n", " ") for x in fig.findobj(Text))
    plt.close(fig)
    for expected in (f"block tile: {16 * t['wm'] * t['fm']} x {16 * t['wn'] * t['fn']} outputs",
                     f"= {t['wm']} x {t['wn']} warps", f"{t['fm']} x {t['fn']} fragments",
                     f"warp {t['wm'] * t['wn'] - 1}", f"{t['fm']} + {t['fn']} fragment loads",
                     f"a k tile of {16 * t['k_tile']} = {t['k_tile'] // t['k_step']} steps (k1) x {t['k_step']} fragments"):
        assert expected in text, f"wmma_tiling.png does not say {expected!r}; it says: {text}"


def test_the_tiling_is_read_from_either_way_of_writing_it():
    assert first_tiling("X = dict(warps=(4, 4), frags=(2, 2), k_step=2, k_tile=4)\nY = dict(warps=(2, 4), "
                        "frags=(4, 4), k_tile=2, k_step=1)") == dict(wm=4, wn=4, fm=2, fn=2, k_tile=4, k_step=2)
    code = ("i0, i1, i2 = sch.split(i, [None, 2, 4])\nj0, j1, j2 = sch.split(j, [None, 4, 4])\n"
            "k0, k1, k2 = sch.split(k, [None, 2, 2])")
    assert first_tiling(code) == dict(wm=2, wn=4, fm=4, fn=4, k_tile=4, k_step=2)


def test_the_decode_mma_diagram_counts_the_mma_the_kernel_issues():
    """decode_mma.png, beside notebook 12's section 7, says what a page costs a warp: 16 mma for S and 8 for
    P V. helpers.decode_mma's kernels issue that many a page: 24 calls of TVM's mma helper in each one's
    CUDA (the page's code is unrolled once), 16 of them in the S loop (two 8-key tiles x 8 k-steps of 16
    dims of d = 128) and 8 in P V (8 blocks of 16 dims)."""
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    from helpers import decode_mma, kernels

    fig = dict(_draw_module().figure_functions())["decode_mma"]()
    text = " ".join(x.get_text().replace("\n", " ") for x in fig.findobj(Text))
    plt.close(fig)
    s_mma, pv_mma = 2 * (128 // 16), 128 // 16
    assert f"a page costs a warp {s_mma} mma for S and {pv_mma} for P V" in text, text
    assert f"{decode_mma.PAGE} keys" in text and "4 query heads" in text and "12 rows of zeros" in text
    for factory in (decode_mma.decode_paged_mma, decode_mma.decode_paged_mma_async):
        src = kernels.build(factory(2, 32, 8, 128, 10, 4, 1, 64), "sm_80", "tirx").mod.imports[0].inspect_source()
        assert src.count("ptx_mma_sync_aligned_m16n8k16_row_col_f32_f16_f16_f32(") - 1 == s_mma + pv_mma
