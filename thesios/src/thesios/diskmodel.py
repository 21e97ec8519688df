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
