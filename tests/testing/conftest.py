"""The plugin's fixtures, as users would import them."""

from __future__ import annotations

from sandcrew.testing import pytest_plugin

scripted_model_server = pytest_plugin.scripted_model_server
no_real_model_requests = pytest_plugin.no_real_model_requests
