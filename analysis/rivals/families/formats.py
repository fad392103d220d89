"""The edit formats, `unified-diff` and `search-replace` (analysis.coverage.formats): every token of the
format's text decoded (what enters the cache), the apply step free. Not run end to end."""

from __future__ import annotations

from analysis.coverage.formats import search_replace_text, unified_diff_text
from analysis.errors import ParamsError
from analysis.rivals.forwards import decode_forwards
from analysis.rivals.methods import Family, Method, register

FORMATS = ("unified-diff", "search-replace")


@register
class EditFormat(Family):
    """A member is named by its format alone (no family prefix)."""

    name, title, position = "format", "edit format", 40
    fields, choices = ("fmt",), {"fmt": FORMATS}

    def spell(self, m: Method) -> str:
        return str(m.fmt)

    def owns(self, name: str) -> bool:
        return name in FORMATS

    def read(self, name: str) -> Method:
        if name not in FORMATS:
            raise ParamsError(f"method {name!r} is not spelled {self.pattern()}")
        return Method(self.name, fmt=name)

    def pattern(self) -> str:
        return "|".join(FORMATS)

    def label(self, m: Method) -> str:
        return f"{m.fmt} (decoded)"

    def short(self, m: Method) -> str:
        return str(m.fmt)

    def headline_rank(self, m: Method) -> int:
        return 2

    def forwards(self, m: Method, case, drafts, env):
        text = (unified_diff_text(case.source, case.target, env.udiff_context) if m.fmt == "unified-diff"
                else search_replace_text(case.source, case.target))
        return decode_forwards(len(env.tokenizer.encode(text).ids))

    def members(self, params: dict, stage: str) -> tuple[Method, ...]:
        return tuple(Method(self.name, fmt=f) for f in FORMATS)
