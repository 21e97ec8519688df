"""Rightsizing policies: the protocol they implement and the margin decorator
(``adares.policies.base``) and the one registry of names, factories and knobs
(``adares.policies.registry``). To add a policy, ``register(PolicySpec(name, factory, ...))``:
replay, compare, recommend, the report and the command line take it from there."""

from adares.policies.base import (Knob, Margined, Observation, Policy, PolicyOptions,
                                  TraceInfo)
from adares.policies.registry import (REPLAY_BASELINES, PolicySpec, baseline_names,
                                      compare_names, get, make_policy, parse_knobs,
                                      parse_policies, policy_names, register, unregister)

__all__ = ["Knob", "Margined", "Observation", "Policy", "PolicyOptions", "TraceInfo",
           "REPLAY_BASELINES", "PolicySpec", "baseline_names", "compare_names", "get",
           "make_policy", "parse_knobs", "parse_policies", "policy_names", "register",
           "unregister"]
