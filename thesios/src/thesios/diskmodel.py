"""An HDD service-time model: seek + rotational latency + zoned transfer.

The decomposition is the classic one of Ruemmler and Wilkes, "An introduction to disk drive
modeling", IEEE Computer 27(3), 1994: seek time grows with the square root of the seek distance for
short seeks; the rotational latency is uniform over one revolution (mean 30/RPM s, half of 60/RPM);
the transfer rate falls linearly from the outer to the inner zone (zoned bit recording).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class HDDModel:
    """A hard disk drive's service-time model.

    Attributes:
        rpm: spindle speed, revolutions per minute.
        seek_min_s: track-to-track seek time, seconds (distance > 0).
        seek_max_s: full-stroke seek time, seconds.
        outer_rate_bps: transfer rate at the outer edge (radial position 0), bytes/second.
        inner_rate_bps: transfer rate at the inner edge (radial position 1), bytes/second.
    """

    rpm: float = 7200.0
    seek_min_s: float = 0.0008
    seek_max_s: float = 0.016
    outer_rate_bps: float = 250e6
    inner_rate_bps: float = 120e6

    @property
    def revolution_s(self) -> float:
        """One revolution, seconds: 60/RPM."""
        return 60.0 / self.rpm

    def seek_time(self, distance: np.ndarray) -> np.ndarray:
        """Seek time (s) for radial distances in [0, 1] (fraction of the stroke), float64 array."""
        d = np.asarray(distance, dtype=np.float64)
        return np.where(d > 0, self.seek_min_s + (self.seek_max_s - self.seek_min_s) * np.sqrt(d), 0.0)

    def rotation_time(self, fraction: np.ndarray) -> np.ndarray:
        """Rotational latency (s) for fractions of a revolution in [0, 1): ``fraction * 60/rpm``."""
        return np.asarray(fraction, dtype=np.float64) * self.revolution_s

    def transfer_rate(self, position: np.ndarray) -> np.ndarray:
        """Zoned transfer rate (bytes/s) at radial positions in [0, 1] (0 = outer edge)."""
        x = np.asarray(position, dtype=np.float64)
        return self.outer_rate_bps + (self.inner_rate_bps - self.outer_rate_bps) * x

    def transfer_time(self, size_bytes: np.ndarray, position: np.ndarray) -> np.ndarray:
        """Transfer time (s) of ``size_bytes`` (int64 array) at radial ``position`` (float64)."""
        return np.asarray(size_bytes, dtype=np.float64) / self.transfer_rate(position)

    def service_time(
        self, size_bytes: np.ndarray, position: np.ndarray, seek_distance: np.ndarray, rot_fraction: np.ndarray
    ) -> np.ndarray:
        """Service time (s) = seek(distance) + rotation(fraction) + transfer(size, position)."""
        return self.seek_time(seek_distance) + self.rotation_time(rot_fraction) + self.transfer_time(size_bytes, position)

    def mean_service_time(self, size_bytes: float, position: float = 0.5) -> float:
        """Mean service time (s) of a request with a uniformly random head position and phase.

        With head and target uniform on [0, 1] the distance has density 2(1 - d), so
        E[sqrt(d)] = 8/15; the mean rotation is half a revolution, 30/RPM s.
        """
        seek = self.seek_min_s + (self.seek_max_s - self.seek_min_s) * 8.0 / 15.0
        return seek + 30.0 / self.rpm + float(self.transfer_time(np.array([size_bytes]), np.array([position]))[0])


@dataclass(frozen=True)
class FittedService:
    """``disk_time ~ overhead_s + bytes / rate_bps`` fitted by least squares over cache-miss reads.

    ``overhead_s`` is mean seek plus mean rotation; ``residual_s`` the root-mean-square error.
    """

    overhead_s: float
    rate_bps: float
    residual_s: float
    n: int


def fit_service_time(disk_time_s: np.ndarray, size_bytes: np.ndarray) -> FittedService:
    """Fit the size-linear HDD service model to observed ``disk_time`` (s) and sizes (bytes).

    Raises:
        ThesiosInputError: fewer than two distinct sizes, or a fit with a non-positive rate.
    """
    from thesios.errors import ThesiosInputError

    t = np.asarray(disk_time_s, dtype=np.float64)
    x = np.asarray(size_bytes, dtype=np.float64)
    if len(np.unique(x)) < 2:
        raise ThesiosInputError("fitting the HDD model needs cache-miss reads of at least two sizes")
    slope, intercept = np.polyfit(x, t, 1)
    if slope <= 0:
        raise ThesiosInputError("disk_time does not grow with size: no transfer rate can be fitted")
    resid = t - (intercept + slope * x)
    return FittedService(float(intercept), float(1.0 / slope), float(np.sqrt(np.mean(resid**2))), len(t))


def split_service_time(disk_time_s: np.ndarray, size_bytes: np.ndarray, rpm: float, fit: FittedService) -> tuple[np.ndarray, np.ndarray]:
    """Estimated (rotation, transfer) parts (s) of observed service times, float64 arrays.

    Rotation is its mean, 30/RPM s, and transfer ``size / rate`` from the fit, each capped so the
    parts never exceed the observed time: exact in expectation, not per request.
    """
    t = np.asarray(disk_time_s, dtype=np.float64)
    transfer = np.minimum(np.asarray(size_bytes, dtype=np.float64) / fit.rate_bps, t)
    rotation = np.minimum(np.full_like(t, 30.0 / rpm), t - transfer)
    return rotation, transfer
