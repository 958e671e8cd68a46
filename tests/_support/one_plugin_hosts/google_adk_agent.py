"""Google ADK: an ``LlmAgent`` with the two tools as Python functions, its model ADK's
native ``Gemini`` model on the scripted server's Gemini route (``base_url``); one
``InMemoryRunner.run_async`` turn."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from . import PROMPT, SYSTEM, delete_file, get_weather


def run_turn(server_url: str) -> dict[str, Any]:
    os.environ.setdefault("GOOGLE_API_KEY", "scripted")
    from google.adk.agents import LlmAgent
    from google.adk.models.google_llm import Gemini
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    agent = LlmAgent(name="weather_agent", instruction=SYSTEM,
                     model=Gemini(model="scripted-model", base_url=server_url),
                     tools=[get_weather, delete_file])
    runner = InMemoryRunner(agent=agent, app_name="weather")

    async def turn() -> str:
        session = await runner.session_service.create_session(app_name="weather",
                                                              user_id="user")
        final = ""
        async for event in runner.run_async(
                user_id="user", session_id=session.id,
                new_message=types.Content(role="user", parts=[types.Part(text=PROMPT)])):
            if event.is_final_response() and event.content and event.content.parts:
                final = "".join(p.text or "" for p in event.content.parts)
        return final

    return {"final": asyncio.run(turn())}
