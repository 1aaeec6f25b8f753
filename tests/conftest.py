import os

from hypothesis import settings

settings.register_profile("default", deadline=None, max_examples=40, derandomize=False)
settings.register_profile("ci", deadline=None, max_examples=40, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
