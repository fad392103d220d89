"""The whole rewrite, `ar`: every gold token decoded, one forward each (the baseline every speedup is over)."""

from __future__ import annotations

from analysis.rivals.forwards import decode_forwards
from analysis.rivals.methods import Family, Method, register

AR = "ar"  # its one member's name: the baseline every table divides by


@register
class WholeRewrite(Family):
    name, title, position = AR, "whole rewrite (AR)", 0
    executor = "autoregressive"

    def label(self, m: Method) -> str:
        return "whole rewrite (AR)"

    def short(self, m: Method) -> str:
        return "AR"

    def role(self, m: Method) -> str:
        return "baseline"

    def headline_rank(self, m: Method) -> int:
        return 4

    def forwards(self, m: Method, case, drafts, env):
        return decode_forwards(len(case.gold))

    def members(self, params: dict, stage: str) -> tuple[Method, ...]:
        return (Method(self.name),)
