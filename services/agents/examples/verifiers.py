"""Example 6: the reward left to reward workers. The agent answers and returns `Unscored(answer)`; a
reward pool scores it off the GPU path:

    seamlessflow agent run services.agents.examples.verifiers:agent --team red --pool arith
    seamlessflow reward run services.agents.examples.verifiers:arithmetic --pool arithmetic --concurrency 8
    seamlessflow reward run services.agents.examples.verifiers:code_tests --pool code --timeout-s 30

Each verifier runs in the reward worker's sandboxed child process (time and memory limits), so a
verifier that hangs or crashes costs only its own trajectory, which then comes out `unscorable`.
"""

import os

import openai

from seamlessflow.messages import Task
from seamlessflow.rewards import ScoreRequest, Unscored
from seamlessflow.tasks import score_completion
from services.agents.examples.code_tests import extract_code, pass_rate

MODEL = os.environ.get("SEAMLESSFLOW_MODEL", "policy")


def agent(task: Task, client: openai.OpenAI) -> Unscored:
    reply = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": task.prompt}], max_tokens=16, temperature=1.0)
    return Unscored(reply.choices[0].message.content or "", verifier="arithmetic")


def arithmetic(request: ScoreRequest) -> float:
    """Rule-based: the demo task's graded score against the payload's answer."""
    return score_completion(request.submission, str(request.payload["answer"]))


def code_tests(request: ScoreRequest) -> tuple[float, dict[str, str]]:
    """Code tests: the pass rate of the payload's test cases (each run in a further subprocess)."""
    payload = request.payload
    reward, how = pass_rate(extract_code(request.submission), payload["function"], payload["tests"],
                            payload.get("setup", ""))
    return reward, {"environment": how}
