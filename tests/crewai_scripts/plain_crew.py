"""A plain CrewAI program, as a user writes it, never importing the toolkit: a crew of
two agents (a forecaster with a tool, then a writer), kicked off once, against the
OpenAI-compatible server named by ``OPENAI_BASE_URL`` (the scripted server in the
test)."""

import os

from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool


@tool("get_weather")
def get_weather(city: str) -> str:
    """Current weather for a city."""
    print(f"TOOL got {city}")
    return f"sunny in {city}"


llm = LLM(model="openai/scripted-model", base_url=os.environ["OPENAI_BASE_URL"], api_key="x")
forecaster = Agent(role="Forecaster", goal="Report the weather", backstory="A meteorologist.",
                   llm=llm, tools=[get_weather])
writer = Agent(role="Writer", goal="Write it up", backstory="A writer.", llm=llm)
crew = Crew(name="WeatherCrew", agents=[forecaster, writer], tasks=[
    Task(description="Weather in Paris?", expected_output="the weather", agent=forecaster),
    Task(description="Write one sentence about it.", expected_output="a sentence",
         agent=writer)])
print("CREW " + str(crew.kickoff().raw))
