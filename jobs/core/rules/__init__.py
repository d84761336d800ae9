"""Failure rules (docs/contracts.md "Verdict rules"): the shared file and each engine's, merged
(`_rules`), one rule's keys (`_rule_schema`), and matching a log against them (`_rule_set`): the
cause of a failure, the fallback from a declared change."""

from jobs.core.rules._rule_set import (
    CAUSES,
    PRECEDENCE,
    RULE_TAGS,
    Match,
    Rule,
    RuleSet,
    cause_of,
    fallback_line,
)
from jobs.core.rules._rules import engine_rule_files, load_rules, parse_rules

__all__ = [
    "CAUSES",
    "Match",
    "PRECEDENCE",
    "RULE_TAGS",
    "Rule",
    "RuleSet",
    "cause_of",
    "engine_rule_files",
    "fallback_line",
    "load_rules",
    "parse_rules",
]
