"""The lifecycle engine: what a spec's behavioural primitives make the engine do.

Tier boundaries (compounding, promotion, archive or removal), retention access tracking,
decay models in ranking and pruning, conflict resolution by typology, abstention, and the
periodic ``primitives maintain`` job. Every statement is set-based SQL compiled from the spec;
every change it makes is journalled.
"""

from primitives.lifecycle._boundary import ScopeEnd
from primitives.lifecycle._maintain import MaintainReport, maintain
from primitives.lifecycle._passes import (
    JobContext,
    MaintenanceJob,
    MaintenancePass,
    job_builders,
    pass_builders,
)

__all__ = ["JobContext", "MaintainReport", "MaintenanceJob", "MaintenancePass", "ScopeEnd",
           "job_builders", "maintain", "pass_builders"]
