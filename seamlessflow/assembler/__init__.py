"""The assembler's adapter layer: session-events records in, Trajectory / DeadLetter records out.

`SessionBook` holds no Kafka client: it turns decoded records into outputs and says which source offsets
are safe to commit. `app.Assembler` wires it to the Kafka layer's group member and producer.
"""

from seamlessflow.assembler.book import Output, SessionBook
from seamlessflow.assembler.convert import call_from_token_io, trajectory_id, trajectory_of
from seamlessflow.assembler.options import AssemblerOptions

__all__ = ["AssemblerOptions", "Output", "SessionBook", "call_from_token_io", "trajectory_id", "trajectory_of"]
