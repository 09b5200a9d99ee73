"""The fragment every live page shares: the "live" marker (the pages' own fragments are their apps')."""

from __future__ import annotations

import html
import time


def status_html(seq: str = "", ts: float | None = None) -> str:
    """The page's "live" marker (in the active language): the last pushed event (the benchmark
    reads data-ts/data-seq)."""
    from django.utils.translation import gettext

    ts = ts or time.time()
    clock = time.strftime("%H:%M:%S", time.localtime(ts))
    return (
        f'<span id="live-status" class="live-status on" data-seq="{html.escape(seq)}" data-ts="{ts:.6f}"'
        f' title="{html.escape(gettext("Last update %(time)s") % {"time": clock})}">{html.escape(gettext("live"))}</span>'
    )


def languages() -> list[str]:
    """The UI's languages (a summary renders its frames in each)."""
    from django.conf import settings

    return [code for code, _name in settings.LANGUAGES]
