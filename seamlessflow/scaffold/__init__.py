"""`seamlessflow init`: a directory with an agent for one harness, a task file, a reward and the command that
trains it on the running stack. The templates are package data (`templates/`), read only when scaffolding."""

from seamlessflow.scaffold.write import HARNESSES, DirectoryNotEmpty, Harness, Scaffold, scaffold

__all__ = ["HARNESSES", "DirectoryNotEmpty", "Harness", "Scaffold", "scaffold"]
