"""`python -m services.agents MODULE:FUNCTION --team T --pool P ...`: the agent worker as a service.

The same as `seamlessflow agent run`; settings come from --config / SEAMLESSFLOW_* like every service.
"""

import click

from seamlessflow.cli.agent import agent_run
from seamlessflow.cli.context import global_options, load_settings
from seamlessflow.service_metrics import serve_metrics


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@global_options
@click.pass_context
def main(ctx, config_path, **overrides):
    settings = load_settings(config_path, **overrides)
    serve_metrics()
    agent_run.main(ctx.args, standalone_mode=True, obj=settings)


if __name__ == "__main__":
    main()
