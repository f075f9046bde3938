"""A cell's verdict from its errors: within the dtype's bound; a whole model judged beside its
own eager run in that dtype (torch's rule), since 32 random layers in bf16 put eager itself
off the float64 reference (Llama-2-7B's 2k prefill on an H100: 0.077 against 0.03)."""

from compilekit.model.result import verdict


def test_a_model_is_judged_beside_eager_and_a_variant_is_not():
    assert verdict(0.02, 0.02, 0.03, True) == "ok"
    assert verdict(0.0767, 0.0767, 0.03, True) == "wrong"  # an attention variant: the bound
    assert verdict(0.0767, 0.0767, 0.03, True, model=True) == "ok"
    assert verdict(0.155, 0.0767, 0.03, True, model=True) == "ok"  # 2x eager + a tenth of 0.03
    assert verdict(0.20, 0.0767, 0.03, True, model=True) == "wrong"
    assert verdict(0.0767, None, 0.03, True, model=True) == "wrong"  # no eager to judge beside
    assert verdict(0.02, 0.0767, 0.03, False) == "wrong"  # self-consistent: the bound alone


def test_an_eager_run_far_off_its_reference_is_wrong_whatever_compiled_does():
    """A Mistral decode whose cache took the wrong positions read eager 1.5 from its float
    reference and compiled 1.43: compiled within torch's rule beside eager, and both wrong."""
    from compilekit.model.result import eager_adrift, verdict_beside_eager

    assert verdict(1.43, 1.50, 0.03, True, model=True) == "wrong"
    assert verdict_beside_eager(1.43, 1.50, 0.03) == "wrong"
    assert verdict_beside_eager(0.25, 0.29, 0.03) == "ok"  # under ten bounds: a deep bf16 model
    assert "eager in bfloat16 is itself 1.5 from the reference" in eager_adrift(
        1.5, 0.03, "bfloat16"
    )
    assert eager_adrift(0.077, 0.03, "bfloat16") is None
