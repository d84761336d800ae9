"""Secrets: the values that must never be shown, and their masking, given explicitly."""

from __future__ import annotations

from jobs.redaction import redact, redact_urls, secret_values


def test_secret_values_come_from_every_environment_given() -> None:
    process = {"HF_TOKEN": "hf_process", "PATH": "/usr/bin", "API_KEY": "abc"}
    run = {"HF_TOKEN": "hf_only_the_run", "SLACK_BOT_TOKEN": "xoxb-1234"}
    # both HF_TOKEN values, longest first; short values and non-secret names are left alone
    assert secret_values(process, run) == ("hf_only_the_run", "hf_process", "xoxb-1234")
    assert secret_values() == ()


def test_redact_masks_the_longest_secret_whole() -> None:
    text = "token=xoxb-1234-5678 and xoxb-1234 at redis://:pw@redis:6379"
    masked = redact(text, secrets=("xoxb-1234", "xoxb-1234-5678"))
    assert masked == "token=*** and *** at redis://:pw@redis:6379"
    assert redact_urls(masked) == "token=*** and *** at redis://:***@redis:6379"


def test_a_switch_under_a_secret_looking_name_is_not_masked() -> None:
    from jobs.redaction import redact, secret_values

    env = {"TOKENIZERS_PARALLELISM": "false", "HF_TOKEN": "hf_abcdefgh"}
    secrets = secret_values(env)
    assert secrets == ("hf_abcdefgh",)
    assert redact("use_fast=false token=hf_abcdefgh", secrets=secrets) == "use_fast=false token=***"
