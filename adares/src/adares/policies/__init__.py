"""Rightsizing policies. The names here are the CLI's; ``adares.replay.make_policy`` builds them."""

from adares.errors import InputError

POLICY_NAMES = ("clairvoyant", "static", "threshold", "predictive", "vpa", "autopilot", "adares")


def parse_policies(spec: str) -> list[str]:
    """Comma-separated policy names, checked; InputError on unknown or empty."""
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise InputError("no policy given")
    for n in names:
        if n not in POLICY_NAMES:
            raise InputError(f"unknown policy {n!r} (known: {', '.join(POLICY_NAMES)})")
    return list(dict.fromkeys(names))
