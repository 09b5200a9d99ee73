"""Development and production settings: everything from the environment (portal/settings/base.py)."""

from portal.settings.base import *  # noqa: F403
