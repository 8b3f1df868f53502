"""Show free text from the lake (job, user, account and partition names, finding messages)
inside Markdown as the literal text it is, never as formatting, links or HTML.

Streamlit renders `st.markdown`, `st.caption`, `st.info`, `st.title`, expander labels and the
like as GitHub-flavoured Markdown (plus `$…$` maths and `:color[…]` directives): a job named
`**boss** [click](http://evil)` would otherwise be drawn bold with a live link.
"""

from __future__ import annotations

import re

__all__ = ["WORD_JOINER", "md"]

# every ASCII punctuation character Markdown, GFM, maths or Streamlit's directives give a
# meaning to; CommonMark lets a backslash escape any ASCII punctuation
_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&=\"'])")


# GFM's literal autolinks (`https://…`, `www.…`, `name@host.tld`) are found in the text after
# escapes are read, so a backslash does not stop them: an invisible WORD JOINER (U+2060) inside
# the pattern does (`https:⁠//`, `www⁠.`, `name@⁠host.tld`), and the text reads the same. Only
# there: a joiner copies along (a `--time` with one in it is no option to paste into sbatch)
_AUTOLINK = re.compile(r"(?i)(?<=:)(?=//)|(?<=www)(?=\.)|(?<=[\w.+-]@)(?=[\w-]+\.)")
WORD_JOINER = "\u2060"


def md(value: object) -> str:
    """`value` as Markdown that displays exactly its text, on one line (line breaks become
    spaces: a line break could start a heading or a list), with no link made of an address in
    it (a job named `sign in at https://evil.example` is no live link)."""
    text = " ".join(str(value).splitlines()) if value is not None else ""
    return _SPECIAL.sub(r"\\\1", _AUTOLINK.sub(WORD_JOINER, text))
