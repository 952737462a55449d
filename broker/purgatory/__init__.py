"""The request purgatory: a generic delayed-operation engine on a hierarchical timing wheel.

Nothing here knows about Kafka requests: DelayedFetch and friends live beside the replica
manager and build on DelayedOperation.
"""

from purgatory.broker.purgatory.clock import LoopScheduler, ManualScheduler, Periodic, Scheduler
from purgatory.broker.purgatory.delayed_operation import DelayedOperation
from purgatory.broker.purgatory.purgatory import DelayedOperationPurgatory, WatcherRemoval
from purgatory.broker.purgatory.timer import SystemTimer, TimerTask, TimerTaskList, TimingWheel

__all__ = [
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "LoopScheduler",
    "ManualScheduler",
    "Periodic",
    "Scheduler",
    "SystemTimer",
    "TimerTask",
    "TimerTaskList",
    "TimingWheel",
    "WatcherRemoval",
]
