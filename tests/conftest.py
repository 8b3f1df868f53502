"""Settings every test shares.

Hypothesis runs derandomized by default, so `make test` (and CI) draws the same examples every
run: a red build is a real regression, reproducible by running the test again. Explore with
fresh random examples, without the per-example deadline a loaded 2-core machine would trip:
`HYPOTHESIS_PROFILE=explore make test`.
"""

import os

from hypothesis import settings

settings.register_profile("repeatable", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))
