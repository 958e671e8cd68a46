"""``otelmw_strands``: the turn (``Agent._run_loop``), the OpenAI model route
(``OpenAIModel.stream``) and the tool seam (``_run_tool``, the terminal of Strands'
tool middleware), each wrapped when its own module is imported (a program without
``openai`` never imports ``strands.models.openai``); the ``strands`` normalizer."""

from __future__ import annotations

from typing import Any

from .._base import OtelmwInstrumentor, Wrapper
from .models import stream
from .results import NORMALIZER
from .tools import run_tool
from .turns import run_loop


class StrandsInstrumentor(OtelmwInstrumentor):
    """``otelmw_strands`` (see the package docstring)."""

    root_module = "strands"
    wrap_each_on_import = True
    # The floor is the release tested (the middleware stages whose tool terminal is
    # ``_run_tool`` are recent); scripts/envs/strands.txt.
    dependencies = ("strands-agents >= 1.62.0, < 2",)

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return [("strands.agent.agent", "Agent._run_loop", run_loop),
                ("strands.models.openai", "OpenAIModel.stream", stream),
                ("strands.tools.executors._executor", "_run_tool", run_tool)]

    def result_normalizer(self) -> Any:
        return NORMALIZER
