"""Example 4: write a function; reward = pass rate of its test cases, run in a subprocess with a timeout.

The environment runs off the inference path, per session: a test that hangs or crashes costs only this
session its reward (the subprocess is killed at the timeout); other sessions keep going.
"""

import json
import os
import re
import subprocess
import sys

import openai

from seamlessflow.messages import Task

MODEL = os.environ.get("SEAMLESSFLOW_MODEL", "policy")
TIMEOUT_S = float(os.environ.get("SEAMLESSFLOW_TEST_TIMEOUT_S", "5"))
HARNESS = """
import json, sys
spec = json.loads(sys.stdin.readline())
namespace = {}
passed = 0
try:
    exec(spec["setup"], namespace)  # the environment's own code, before the model's
    exec(spec["code"], namespace)
    for args, expected in spec["tests"]:
        try:
            passed += namespace[spec["function"]](*args) == expected
        except Exception:
            pass
finally:
    print(json.dumps({"passed": passed}))
"""


def extract_code(text: str) -> str:
    block = re.search(r"```(?:python)?\n(.*?)```", text, re.S)
    return block.group(1) if block else text


def pass_rate(code: str, function: str, tests: list, setup: str = "") -> tuple[float, str]:
    spec = json.dumps({"setup": setup, "code": code, "function": function, "tests": tests})
    try:
        done = subprocess.run([sys.executable, "-I", "-c", HARNESS], input=spec + "\n", capture_output=True,
                              text=True, timeout=TIMEOUT_S)
        passed = json.loads(done.stdout.strip().splitlines()[-1])["passed"]
    except subprocess.TimeoutExpired:
        return 0.0, "timeout"
    except (ValueError, IndexError, KeyError):
        return 0.0, "crashed"
    return passed / len(tests), "ran"


def agent(task: Task, client: openai.OpenAI) -> tuple[float, dict[str, str]]:
    payload = json.loads(task.payload_json)
    reply = client.chat.completions.create(
        model=MODEL, max_tokens=64,
        messages=[{"role": "user", "content": f"{task.prompt}\nReply with a Python code block."}])
    code = extract_code(reply.choices[0].message.content or "")
    reward, how = pass_rate(code, payload["function"], payload["tests"], payload.get("setup", ""))
    return reward, {"environment": how}
