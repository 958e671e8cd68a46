"""An Agents SDK program that knows nothing about otelmw (run under ``otelmw run``)."""

import asyncio

from agents import Agent, Runner, function_tool


@function_tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


agent = Agent(name="Plain", instructions="Answer briefly.", tools=[get_weather],
              model="scripted-model")


async def main() -> None:
    result = await Runner.run(agent, "Weather in Paris?")
    print("ASYNC", result.final_output)
    streamed = Runner.run_streamed(agent, "Weather in Rome?")
    async for _ in streamed.stream_events():
        pass
    print("STREAMED", streamed.final_output)


asyncio.run(main())
