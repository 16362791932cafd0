"""The runtime's maintenance services, one per module: each a small class whose ``run_once()`` is one pass
against the store (testable alone) and whose ``run()`` is the loop the runtime starts.

* :class:`Relay` (``relay``): moves outbox events into jobs, one bounded transaction per pass.
* :class:`Rescuer` (``rescuer``): makes running jobs whose lease expired retryable.
* :class:`Pruner` (``pruner``): deletes done jobs older than ``keep_done``, every ``prune_interval``.
* :class:`PeriodicScheduler` (``periodic``): enqueues each due periodic job once across processes.
* :class:`Canceller` (``canceller``): stops this process's attempts of jobs cancelled in the store.
"""

from corral.runtime.maintenance.canceller import Canceller
from corral.runtime.maintenance.periodic import PeriodicScheduler
from corral.runtime.maintenance.pruner import Pruner
from corral.runtime.maintenance.relay import Relay
from corral.runtime.maintenance.rescuer import Rescuer

__all__ = ["Canceller", "PeriodicScheduler", "Pruner", "Relay", "Rescuer"]
