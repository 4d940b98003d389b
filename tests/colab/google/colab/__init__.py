"""A stand-in for Colab's `google.colab` package: tests/test_colab.py puts this folder on the path
of its simulated Colab runtime, so a notebook's setup cell takes its Colab branch there. The cell
only asks whether the module exists; nothing in it is used."""
