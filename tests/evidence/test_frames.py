"""Which frames are the user's, and the line an op is charged to."""

import os

from compilekit.evidence import frames


def test_user_lines_are_the_users_and_the_variants_wherever_they_are_installed(monkeypatch):
    """A wheel puts the variants inside compilekit's folder, and a Python without a virtual
    environment keeps transformers inside its library folder: both stay lines worth mapping,
    where compilekit's own code, torch's and the standard library's do not."""
    import torch

    installed = os.path.join(frames.COMPILEKIT_DIR, "variants")
    monkeypatch.setattr(frames, "VARIANTS_DIR", installed)
    assert frames.is_user_file(os.path.join(installed, "naive.py"))
    assert not frames.is_user_file(os.path.join(frames.COMPILEKIT_DIR, "evidence", "x.py"))
    assert not frames.is_user_file(torch.__file__) and not frames.is_user_file(os.__file__)
    modeling = os.path.join(frames.STDLIB_DIR, "site-packages", "transformers", "bert.py")
    assert frames.is_user_file(modeling) and frames.is_user_file("/home/me/attn.py")
    assert not frames.is_user_file("<frozen runpy>")


def test_user_frames_drop_torch_and_put_innermost_first():
    torch_file = os.path.join(frames.TORCH_DIR, "nn", "functional.py")
    stack = (
        f'  File "/home/me/model.py", line 3, in forward\n    y = attn(x)\n'
        f'  File "/home/me/attn.py", line 9, in attn\n    return softmax(s)\n'
        f'  File "{torch_file}", line 2000, in softmax\n    ret = input.softmax(dim)\n'
    )
    found = frames.user_frames(stack)
    assert [(os.path.basename(f["file"]), f["line"]) for f in found] == [
        ("attn.py", 9),
        ("model.py", 3),
    ]
    assert found[0]["code"] == "return softmax(s)"


def test_an_op_is_charged_to_the_models_line_not_transformers_shared_helpers():
    """transformers 4.x builds BERT's mask in modeling_attn_mask_utils.py, called from
    modeling_bert.py: the mask's kernels go to BERT's line, as masking_utils.py's do in 5.x;
    a line of the user's own code with no model around it stays the innermost."""
    stack = [
        {"file": "/t/transformers/modeling_attn_mask_utils.py", "line": 194, "code": "expand"},
        {"file": "/t/transformers/models/bert/modeling_bert.py", "line": 977, "code": "mask"},
        {"file": "/home/me/run.py", "line": 3, "code": "model(x)"},
    ]
    assert frames.origin(stack) == [stack[1]]
    assert frames.origin([stack[0], stack[2]]) == [stack[0]]
    assert frames.origin(stack[2:]) == [stack[2]]
