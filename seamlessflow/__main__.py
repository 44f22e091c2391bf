from seamlessflow.cli.main import cli

cli()
