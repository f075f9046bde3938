"""Graph passes that ship with compilekit, chosen by name: `--pass naive-to-sdpa`.

Each module defines `make_pass()`, returning a `CustomGraphPass` (compile/passes.py runs the
cell's passes at `joint_custom_pre_pass`). A new pass is one line here and one file beside it.
"""

# name -> module file in this folder
PASSES = {
    "naive-to-sdpa": "naive_to_sdpa.py",
}
