"""Drains: the evacuation controller (VMIs marked by an eviction migrate off their node) and
the disruption-budget controller (one PodDisruptionBudget per protected VMI)."""
