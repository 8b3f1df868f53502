"""Every module that registers configuration sections, imported by name so tools can follow it.

`app.config` imports this module when a configuration is loaded (not at its own import: each
settings module imports `app.config` for `register_section` and `setting`). `[lake]` and
`[dashboard]` are registered in app/config.py itself.

To add a section: decorate a frozen dataclass with `@register_section("name")` (or call
`register_list_section` / `register_table_section`) in a settings module, then import that
module below and list it in SETTINGS_MODULES.
"""

from __future__ import annotations

from types import ModuleType

# The import order is the registration order, in which `gpuledger config check` and the
# configuration reference list the sections: keep it, and add new modules at the end.
# isort: off
from app.alerts import settings as alerts_settings
from app.service import settings as service_settings
from app.pipeline import settings as pipeline_settings
from app.serve import settings as serve_settings
from app.api import settings as api_settings
from app.jobmail import settings as jobmail_settings
from app.retention import settings as retention_settings

# isort: on

__all__ = ["SETTINGS_MODULES"]

SETTINGS_MODULES: tuple[ModuleType, ...] = (
    alerts_settings,
    service_settings,
    pipeline_settings,
    serve_settings,
    api_settings,
    jobmail_settings,
    retention_settings,
)
