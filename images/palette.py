"""The colours every diagram shares (seaborn's "deep" palette), so that operand A, operand B,
the result C and the CPU/GPU roles look the same from notebook to notebook."""

BLUE = "#4c72b0"  # operand A; an SM; work on the CPU
ORANGE = "#dd8452"  # operand B; a warp; stored data
GREEN = "#55a868"  # the result C; shared memory; work on the GPU
RED = "#c44e52"  # what the reader should look at; registers
PURPLE = "#8172b3"  # the cost model
LIGHT_GREY = "#d9d9d9"  # what is not in play
