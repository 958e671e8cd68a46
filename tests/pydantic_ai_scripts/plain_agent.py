"""A plain pydantic-ai program, as a user writes it, never importing the toolkit. One
``run_sync`` turn and one streamed turn against the OpenAI-compatible server named by
``OPENAI_BASE_URL`` (the scripted server in the test)."""

import asyncio

from pydantic_ai import Agent

agent = Agent("openai-chat:scripted-model", name="Weather", instructions="Answer briefly.")


@agent.tool_plain
def get_weather(city: str) -> dict:
    """Current weather for a city."""
    return {"city": city, "sky": "sunny"}


print("SYNC " + agent.run_sync("Weather in Paris?").output)


async def stream() -> str:
    async with agent.run_stream("Weather in Paris?") as result:
        return "".join([t async for t in result.stream_text(delta=True)])


print("STREAM " + asyncio.run(stream()))
