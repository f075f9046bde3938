"""`compilekit check` end to end on the CPU: an eager cell of a variant of the user's own is
run into a baseline, then checked twice: with a sleep planted in its forward (exit 1, the
slowdown named) and as it was (exit 0)."""

import textwrap

from compilekit import cli

VARIANT = textwrap.dedent(
    """
    import torch

    def attention(q, k, v):
        {sleep}
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    """
)


def test_check_fails_a_planted_sleep_and_passes_the_code_as_it_was(tmp_path, capsys):
    code = tmp_path / "mine.py"
    code.write_text(VARIANT.format(sleep="pass"))
    experiment = tmp_path / "mine.toml"
    experiment.write_text(
        'name = "mine"\ndevice = "cpu"\ndtype = "float32"\n[[matrix]]\n'
        f'variants = ["{code}:attention"]\nmodes = ["eager"]\nshapes = ["1x2x64x16"]\n'
    )
    base = str(tmp_path / "base")
    assert cli.main(["sweep", str(experiment), "--out", base]) == 0
    gate = ["--baseline", base, "--max-slowdown", "5%", "--no-new-kernels"]
    code.write_text(VARIANT.format(sleep="__import__('time').sleep(0.02)"))
    capsys.readouterr()
    assert cli.main(["check", str(experiment), "--out", str(tmp_path / "slow"), *gate]) == 1
    out = capsys.readouterr().out
    assert "gates: 1 failed" in out and "beyond --max-slowdown 5%" in out, out
    code.write_text(VARIANT.format(sleep="pass"))
    assert cli.main(["check", str(experiment), "--out", str(tmp_path / "same"), *gate]) == 0
    assert "gates: all passed" in capsys.readouterr().out
