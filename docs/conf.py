"""The course as a static site:  python -m sphinx -b html -c docs . docs/_build/html

Sphinx with myst-nb and sphinx-book-theme, because they build from PyPI packages alone, with no
network at build time (jupyter-book 2 / mystmd fetch a site template). The source directory is
the repository root, so the notebooks' `../images/x.png` links and the README's
`notebooks/x.ipynb` links resolve as they do on GitHub; only the files in `include_patterns`
are read. Notebooks are rendered with their committed outputs and never executed (they were
recorded live on a GPU). Each notebook page gets a Colab link (from pyproject.toml's `[tool.course]
repository`, as the notebooks' badges, by `tools.colab`) and a download link for its .ipynb. myst-nb leaves
out every cell tagged `remove-cell`: the Colab setup cell is (tools.colab tags it), since a reader of the book
runs nothing. The look is the theme's, with its right sidebar off and a wider column (_static/course.css), and
sphinx-lightbox enlarges a figure on a click; CONTRIBUTING.md's "Build the site" says why each.
"""

from __future__ import annotations

import html
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # Sphinx runs this file from anywhere: the repository's helpers
from tools import colab  # noqa: E402  (the one repository setting, as the notebooks' badges)

project = "From naive to fast: GPU kernels with TVM's TensorIR"
author = "the course's authors"
root_doc = "README"
include_patterns = ["README.md", "CONTRIBUTING.md", "notebooks/*.ipynb", "notebooks/results/README.md"]
exclude_patterns = ["docs/_build", "**/.ipynb_checkpoints"]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

extensions = ["myst_nb", "lightbox"]
nb_execution_mode = "off"  # show the outputs recorded on the GPU; never re-run
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]  # notebooks start at "#" and may skip levels in prose

html_theme = "sphinx_book_theme"
html_title = "GPU kernels with TVM's TensorIR"
html_theme_options = {
    "use_download_button": False,
    "show_toc_level": 2,
    # The right sidebar would leave the article ~690 px, and the notebooks print 120-character lines: the
    # page's contents go to the left sidebar instead, under the lessons, and the column holds 120 characters
    # (_static/course.css sets the width and the code's size; tests/test_book.py measures every block).
    "secondary_sidebar_items": [],
    "navbar_persistent": [],  # the sidebar has the search field: no second one in a bar above the page
}
html_sidebars = {"**": ["navbar-logo.html", "search-button-field.html", "sbt-sidebar-nav.html", "page-toc.html"]}
html_static_path = ["_static"]
html_css_files = ["course.css"]

# Click a diagram or a chart to see it at full size (sphinx-lightbox: a CSS overlay, with a little script for
# the keyboard; no network). Every image, the notebooks' Markdown images and their plotted outputs alike.
lightbox_images = "all"
lightbox_figures = "all"
lightbox_gallery = "none"
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None

html_context = {"default_mode": "light"}  # an empty stored mode is a console error otherwise

# MathJax from a PyPI wheel (MathJax 2.7 with the STIX web fonts it ships, as classic Jupyter
# served it), served from the site itself, so a page fetches nothing from the network.
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"
mathjax2_config = {"jax": ["input/TeX", "output/HTML-CSS"], "showMathMenu": False, "messageStyle": "none",
                   "HTML-CSS": {"availableFonts": [], "imageFont": None, "preferredFont": None,
                                "webFont": "STIX-Web"},
                   "tex2jax": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]],
                               "ignoreClass": "tex2jax_ignore|mathjax_ignore",
                               "processClass": "tex2jax_process|mathjax_process|math|output_area"}}
mathjax3_config = None


#: Pages for whoever maintains the course ("Maintaining the course", "Recorded measurements"), in a part of their
#: own after the lessons: a student's table of contents is the lessons.
MAINTAINER_PAGES = ["CONTRIBUTING", "notebooks/results/README"]


def _contents(app, docname, source):
    """The README is the front page; hidden tables of contents put the lessons in order, then, captioned
    apart, the maintainers' pages."""
    if docname == root_doc:
        lessons = "\n".join(f"notebooks/{n}" for n in NOTEBOOKS)
        maintainers = "\n".join(MAINTAINER_PAGES)
        source[0] += (f"\n\n```{{toctree}}\n:hidden:\n:maxdepth: 1\n:caption: Lessons\n\n{lessons}\n```\n"
                      f"\n```{{toctree}}\n:hidden:\n:maxdepth: 1\n:caption: For maintainers\n\n{maintainers}\n```\n")


def _lone_images(app, doctree):
    """A Markdown image on a line of its own (`![GPU, SM and warp](../images/gpu_hierarchy.png)`, every diagram
    of the notebooks) is a paragraph holding one image; sphinx-lightbox enlarges images, not images inside text,
    so the paragraph gives way to its image."""
    from docutils import nodes

    for para in list(doctree.findall(nodes.paragraph)):
        kids = [k for k in para.children if not (isinstance(k, nodes.Text) and not k.strip())]
        if len(kids) == 1 and isinstance(kids[0], nodes.image):
            para.replace_self(kids[0].deepcopy())


def _notebook_links(app, pagename, templatename, context, doctree):
    """Above each notebook: open it in Colab (when the repository's URL is known), download it."""
    name = pagename.removeprefix("notebooks/")
    if pagename != f"notebooks/{name}" or name not in NOTEBOOKS or "body" not in context:
        return
    url = colab.colab_url(colab.repository(), name)
    # without a repository the notebook's own first cell already says "Open in Colab: not yet"
    opener = f'<a class="course-colab" href="{html.escape(url)}">Open in Colab</a> &middot; ' if url else ""
    links = (f'<p class="course-links">{opener}'
             f'<a class="course-download" href="{name}.ipynb" download>Download {name}.ipynb</a></p>')
    context["body"] = links + context["body"]


def _copy_files(app, exception):
    """The .ipynb files next to their pages (the download links) and MathJax under _static."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    for n in NOTEBOOKS:
        shutil.copyfile(ROOT / "notebooks" / f"{n}.ipynb", out / "notebooks" / f"{n}.ipynb")
    import jupyter_server_mathjax

    shutil.copytree(Path(jupyter_server_mathjax.__file__).parent / "static", out / "_static" / "mathjax",
                    dirs_exist_ok=True)
    # The site opens at index.html; Sphinx names the front page after its source, README.
    shutil.copyfile(out / "README.html", out / "index.html")


def setup(app):
    app.connect("source-read", _contents)
    app.connect("doctree-read", _lone_images)
    app.connect("html-page-context", _notebook_links)
    app.connect("build-finished", _copy_files)
