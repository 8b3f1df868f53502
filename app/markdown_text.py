"""Show free text from the lake (job, user, account and partition names, finding messages)
inside Markdown as the literal text it is, never as formatting, links or HTML.

Streamlit renders `st.markdown`, `st.caption`, `st.info`, `st.title`, expander labels and the
like as GitHub-flavoured Markdown (plus `$…$` maths and `:color[…]` directives): a job named
`**boss** [click](http://evil)` would otherwise be drawn bold with a live link.
"""

from __future__ import annotations

import re

__all__ = ["md"]

# every ASCII punctuation character Markdown, GFM, maths or Streamlit's directives give a
# meaning to; CommonMark lets a backslash escape any ASCII punctuation
_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&=\"'])")


def md(value: object) -> str:
    """`value` as Markdown that displays exactly its text, on one line (line breaks become
    spaces: a line break could start a heading or a list)."""
    text = " ".join(str(value).splitlines()) if value is not None else ""
    return _SPECIAL.sub(r"\\\1", text)
