"""Prefect flows, one per pipeline stage, and `pipeline` over all of them.

Before Prefect is imported: no usage telemetry. Its server-side service reads then writes the
sqlite store in one transaction at startup, which fails with 'database is locked' (SQLITE_BUSY is
returned at once there, the busy timeout does not apply) when a stage is writing at the same
moment on a loaded machine; the lab runs offline anyway.
"""

import os

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
