"""A PraisonAI program that knows nothing about otelmw (run under ``otelmw run``)."""

import asyncio

from praisonaiagents import Agent


def get_weather(city: str) -> dict:
    """Current weather for a city."""
    return {"status": "ok", "data": f"sunny in {city}"}


agent = Agent(name="Plain", instructions="Answer briefly.", llm="gpt-4o-mini",
              tools=[get_weather], output="silent")
print("SYNC", agent.chat("Weather in Paris?"))
print("ASYNC", asyncio.run(agent.achat("Weather in Rome?")))
