"""Hermes Agent: ``AIAgent.run_conversation``, its tools from a Hermes plugin
(``hermes_weather_tools``, enabled in a ``HERMES_HOME`` of its own), the model reached
through the openai SDK Hermes uses."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from . import PROMPT, SYSTEM


def hermes_home() -> Path:
    home = Path(tempfile.mkdtemp(prefix="hermes-home-"))
    shutil.copytree(Path(__file__).with_name("hermes_weather_tools"),
                    home / "plugins" / "weather_tools")
    (home / "config.yaml").write_text("plugins:\n  enabled:\n    - weather_tools\n")
    return home


def run_turn(server_url: str) -> dict[str, Any]:
    os.environ["HERMES_HOME"] = str(hermes_home())
    from run_agent import AIAgent

    agent = AIAgent(base_url=f"{server_url}/v1", api_key="sk-scripted",
                    model="scripted-model", enabled_toolsets=["weather"], quiet_mode=True,
                    skip_context_files=True, skip_memory=True)
    result = agent.run_conversation(PROMPT, system_message=SYSTEM)
    return {"final": result.get("final_response"), "completed": result.get("completed")}
