import pytest
import torch
from tokenizers import pre_tokenizers
from transformers import AutoTokenizer, Qwen2Tokenizer

from fixtures.causal_lm import (
    SEED_CHAT,
    SIZES,
    hf_checkpoint_problem,
    latency_split,
    local_checkpoint,
    random_qwen2,
)
from optbench.measuring.accuracy import TokenAgreement
from optbench.measuring.clock import DeviceClock

CPU = torch.device("cpu")


def test_standard_size_is_tinyswallow():
    config, size = SIZES["standard"].config(), SIZES["standard"]
    assert (config.hidden_size, config.intermediate_size, config.num_hidden_layers) == (1536, 8960, 28)
    assert (config.num_attention_heads, config.num_key_value_heads, config.vocab_size) == (12, 2, 151936)
    assert config.rms_norm_eps == 1e-6 and config.rope_parameters["rope_theta"] == 1e6
    assert config.tie_word_embeddings and size.dtype == torch.bfloat16


def test_tiny_model_and_prompt_are_deterministic():
    first, second = (random_qwen2(SIZES["smoke"], batch=2, prompt_tokens=8, device=CPU) for _ in range(2))
    assert torch.equal(first.input_ids, second.input_ids) and first.input_ids.shape == (2, 8)
    a, b = first.build(), second.build()
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    tokens = first.generate(a, disable_compile=True)
    assert tokens.shape == (2, 8 + first.new_tokens)
    assert torch.equal(tokens, second.generate(b, disable_compile=True))


def test_bad_hf_model_path_is_a_one_line_usage_error(pytester, tmp_path):
    result = pytester.runpytest("-p", "fixtures.causal_lm", "--hf-model", str(tmp_path / "missing"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if "--hf-model" in line]
    assert len(errors) == 1 and "no such directory" in errors[0] and "offline" in errors[0]


def test_hf_model_without_weights_says_so(tmp_path):
    SIZES["smoke"].config().save_pretrained(tmp_path)
    assert hf_checkpoint_problem(tmp_path) == "no weights (*.safetensors or pytorch_model*.bin) in it"


def test_local_checkpoint_is_prompted_with_the_seed_chat(tmp_path):
    # A byte-level tokenizer of the Qwen2 class, which AutoTokenizer picks for a qwen2 config.
    vocab = {char: i for i, char in enumerate(["<|endoftext|>", *sorted(pre_tokenizers.ByteLevel.alphabet())])}
    template = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}[assistant] "
    Qwen2Tokenizer(vocab=vocab, merges=[], chat_template=template).save_pretrained(tmp_path)
    random_qwen2(SIZES["smoke"], batch=1, prompt_tokens=1, device=CPU).build().save_pretrained(tmp_path)
    assert hf_checkpoint_problem(tmp_path) is None

    workload = local_checkpoint(str(tmp_path), SIZES["smoke"], batch=2, device=CPU)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    prompt = tokenizer.decode(workload.input_ids[1])
    assert torch.equal(workload.input_ids[0], workload.input_ids[1])
    assert prompt.startswith(f"[system] {SEED_CHAT[0]['content']}") and prompt.endswith(
        "[user] Who are you?\n[assistant] "
    )


def generation(tokens, logits=None):
    tokens = torch.tensor(tokens)
    if logits is None:
        logits = torch.nn.functional.one_hot(tokens, num_classes=10).float()
    return tokens, logits


def test_token_agreement_identical_generations_pass():
    reference = generation([[1, 2, 3, 4], [5, 6, 7, 8]])
    result = TokenAgreement()(reference, generation([[1, 2, 3, 4], [5, 6, 7, 8]]))
    assert result.passed and result.headline.value == 1.0


def test_token_agreement_counts_the_common_prefix_and_ignores_logits_after_a_flip():
    reference = generation([[1, 2, 3, 4], [5, 6, 7, 8]])
    flipped = generation([[1, 2, 9, 9], [5, 6, 7, 8]])  # row 0 flips at step 2; what follows differs too
    result = TokenAgreement(min_agreement=0.5)(reference, flipped)
    checks = {check.metric: check for check in result.checks}
    assert checks["token_agreement"].value == pytest.approx(6 / 8)
    # Step 2's logits chose the flipped token from the same context: compared, and different.
    assert checks["agreed_logit_rel_diff"].value == 1.0 and not result.passed
    assert not TokenAgreement(min_agreement=1.0, max_logit_diff=1.0)(reference, flipped).passed
    assert TokenAgreement(min_agreement=0.75, max_logit_diff=1.0)(reference, flipped).passed


def test_token_agreement_fails_on_prefill_logits():
    tokens = [[1, 2, 3, 4]]
    reference = generation(tokens)
    nudged_logits = reference[1].clone()
    nudged_logits[0, 0, 0] += 1e-2
    result = TokenAgreement(max_logit_diff=1e-3)(reference, generation(tokens, nudged_logits))
    assert [check.metric for check in result.failures] == ["prefill_logit_rel_diff", "agreed_logit_rel_diff"]


def test_latency_split_separates_the_first_token_from_decoding():
    ticks = iter([0.0, 0.5, 3.0, 4.0, 5.0, 6.0])  # start, prompt, first token, three more tokens

    def generate(streamer):
        for _ in range(5):
            streamer.put(torch.zeros(1))

    split = latency_split(generate, DeviceClock(CPU, timer=lambda: next(ticks)))
    assert (split.prefill_s, split.decode_step_s) == (3.0, 1.0)
    assert split.as_dict(batch=4)["decode_tokens_per_s"] == 4.0
