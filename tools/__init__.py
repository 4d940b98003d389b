"""A maintainer's commands, apart from what a notebook calls (`helpers`): the Colab badges and setup
cells (`python -m tools.colab`), running notebooks in place (`python -m tools.run_notebooks`), the pytest
plugin that compares recorded outputs (`tools.recorded_outputs`), the slides (`python tools/slides.py`)
and the lecture-length measure (`tools/lecture_length.py`)."""
