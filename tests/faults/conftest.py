"""The soak (``test_soak.py``: an hour of mixed traffic) is collected only when asked for
with WHATSBLAST_SOAK=1; the default run, CI included, never starts it."""

from __future__ import annotations

import os

collect_ignore = [] if os.environ.get("WHATSBLAST_SOAK") == "1" else ["test_soak.py"]
