"""Any transformers checkpoint as a workload: `hf:<hub id or folder>` (a folder that
`save_pretrained` wrote, or a hub id in the Hugging Face cache). Its config gives the
architecture: a BxS shape runs the checkpoint's own class (config.architectures, else
AutoModel), a BxP+N shape decodes with AutoModelForCausalLM. Its weights where they are (the
folder, or the cache), else, or with `--weights random`, random ones from the config alone.
Inputs are token ids drawn within the vocabulary, seeded by the cell."""

from __future__ import annotations

import contextlib
import logging
import os

import torch

from compilekit.model.errors import UserError
from compilekit.model.workload import Workload

DESCRIPTION = "any transformers checkpoint: hf:<hub id, or a folder save_pretrained wrote>"
ATTENTION = ("sdpa", "eager", "flex_attention")  # transformers' own, as the config names them
WEIGHT_FILES = (
    "model.safetensors", "model.safetensors.index.json",
    "pytorch_model.bin", "pytorch_model.bin.index.json",
)  # fmt: skip
WEIGHTS = ("auto", "random")  # the checkpoint's where it has them; random from the config


def is_folder(where: str) -> bool:
    """A local folder (one that exists, or a path: ./x, /x, ~/x, a/b/c), not a hub id."""
    return (
        os.path.exists(os.path.expanduser(where))
        or where.startswith((".", "/", "~"))
        or (where.count("/") > 1)
    )


def config_of(where: str):
    """The checkpoint's config; UserError, one line, for a missing folder, a folder without
    config.json, an architecture this transformers does not know, and a hub id neither in the
    cache nor reachable."""
    import transformers
    from transformers import AutoConfig

    source = os.path.expanduser(where)
    if is_folder(where):
        if not os.path.isdir(source):
            raise UserError(
                f"hf:{where}: no folder {source!r}: give a folder save_pretrained wrote, or a "
                "hub id"
            )
        if not os.path.isfile(os.path.join(source, "config.json")):
            raise UserError(
                f"hf:{where}: {source!r} holds no config.json: give a folder that "
                "model.save_pretrained(folder) (or config.save_pretrained) wrote"
            )
    try:
        with _quiet():
            return AutoConfig.from_pretrained(source)
    except (ValueError, KeyError) as exc:
        raise UserError(
            f"hf:{where}: transformers {transformers.__version__} does not know its "
            f"architecture ({_first_line(exc)}): upgrade transformers, or measure it through "
            "a factory of your own (docs/models.md)"
        ) from None
    except OSError as exc:
        if is_folder(where):
            raise UserError(f"hf:{where}: its config.json cannot be read ({_first_line(exc)})")
        from huggingface_hub import constants

        offline = " (HF_HUB_OFFLINE is set)" if constants.HF_HUB_OFFLINE else ""
        raise UserError(
            f"hf:{where}: not in the Hugging Face cache ({constants.HF_HUB_CACHE}) and the hub "
            f"cannot be reached{offline}: download it where there is a network (`hf download "
            f"{where}`), or give a local folder (HF_HUB_OFFLINE=1 asks the cache alone)"
        ) from None


@contextlib.contextmanager
def _quiet():
    """The hub client's and transformers' warnings held back (a retry's 'thrown while
    requesting' lines): what went wrong is said once, in the UserError."""
    loggers = [logging.getLogger(name) for name in ("huggingface_hub", "transformers")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def weights_at(where: str) -> str | None:
    """The file holding the checkpoint's weights (in its folder, or in the hub cache), or
    None where it has none (a folder of config.json alone)."""
    source = os.path.expanduser(where)
    if is_folder(where):
        found = [f for f in WEIGHT_FILES if os.path.isfile(os.path.join(source, f))]
        return os.path.join(source, found[0]) if found else None
    from huggingface_hub import try_to_load_from_cache

    for name in WEIGHT_FILES:
        path = try_to_load_from_cache(where, name)
        if isinstance(path, str):
            return path
    return None


def causal(config) -> bool:
    """Whether the checkpoint's model attends causally, as a decoder-only LM does: compilekit's
    attention variants, causal all, plug into such a model alone. transformers' own tables
    say it: a type with a causal-LM head and no masked-LM head, and no encoder-decoder."""
    from transformers.models.auto import modeling_auto as auto

    kind = getattr(config, "model_type", "")
    return (
        not getattr(config, "is_encoder_decoder", False)
        and kind in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        and kind not in auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
    )


def model_class(config, decode: bool):
    """The class to build: a causal LM for a decode, else the checkpoint's own architecture
    (config.architectures) where this transformers has it, else AutoModel."""
    import transformers

    if decode:
        return transformers.AutoModelForCausalLM
    for name in getattr(config, "architectures", None) or []:
        if isinstance(getattr(transformers, name, None), type):
            return getattr(transformers, name)
    return transformers.AutoModel


def workload(shape, dtype: str, device: str, where: str, weights: str = "auto",
             attention: str | None = None) -> Workload:  # fmt: skip
    """The checkpoint's model (its weights, or random ones: `weights`) in dtype on device,
    with `attention` as its attention implementation where given, and its inputs."""
    from compilekit.model.spec import Decode

    config = config_of(where)
    decode = isinstance(shape, Decode)
    if decode and not (causal(config) or getattr(config, "is_decoder", False)):
        # transformers would build its LM head over an encoder that attends both ways
        raise UserError(
            f"hf:{where}: its {getattr(config, 'model_type', '?')} model does not attend "
            "causally, and a decode shape (BxP+N) needs a causal LM: give a forward shape (BxS), "
            'or set "is_decoder": true in its config.json to decode with it anyway'
        )
    if attention:
        config._attn_implementation = attention
    cls = model_class(config, decode)
    found = weights_at(where) if weights == "auto" and device != "meta" else None
    try:
        if found:
            with _quiet():
                model = cls.from_pretrained(os.path.expanduser(where), config=config,
                                            dtype=getattr(torch, dtype)).to(device)  # fmt: skip
        else:
            model = _from_config(cls, config, dtype, device)
    except (ValueError, KeyError) as exc:  # a class that cannot be built from this config
        raise UserError(f"hf:{where}: {cls.__name__} cannot be built ({_first_line(exc)})")
    note = f"weights: {os.path.basename(found)}" if found else "weights: random, from the config"
    return Workload(model, _inputs(shape, config, model, device, where), note=note)


def _from_config(cls, config, dtype: str, device: str):
    """cls built from the config alone, with random weights, in dtype on device (told: it
    would otherwise build in the dtype config.json names)."""
    with torch.device(device):
        build = getattr(cls, "from_config", None) or cls._from_config  # an Auto class or not
        return build(config, dtype=getattr(torch, dtype))


def _inputs(shape, config, model, device: str, where: str) -> dict:
    """Token ids within the vocabulary and a full mask (the same ids as decoder inputs where
    the model takes them: an encoder-decoder); ValueError past the model's positions (build()
    says it in one line)."""
    import inspect

    vocab = getattr(config, "vocab_size", None)
    if not vocab:
        raise UserError(f"hf:{where}: its config has no vocab_size: give a text model")
    limit = getattr(config, "max_position_embeddings", None)
    if limit and shape.seq > limit:
        raise ValueError(f"{shape.seq} tokens exceed the model's {limit} positions")
    ids = torch.randint(0, vocab, (shape.batch, shape.seq), device=device)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if "decoder_input_ids" in inspect.signature(model.forward).parameters:
        inputs["decoder_input_ids"] = ids.clone()
    return inputs


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
