"""A small, deterministic physical model of accelerator cards for the demo and the compose feeder.

Power follows the load within a few seconds; temperature follows power with a thermal time
constant towards ``ambient + c_per_w * power``. The converted mining chassis has a hot intake and
little airflow, so its cards run hotter; a ``fan_fault`` multiplies the thermal resistance (a card
overheating). No Django here: the renderers turn :class:`CardSim` into real tool output.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

#: a faulty lead's dips: how often a step sags under load, and to what share of the power
LEAD_DIP_CHANCE = 0.15
LEAD_DIP_SHARE = 0.6


@dataclass(frozen=True)
class CardKind:
    key: str
    product: str  # as the vendor tool prints it
    idle_w: float
    max_w: float
    limit_w: float
    c_per_w: float  # steady-state rise above the intake per watt
    tau_s: float  # thermal time constant
    memory_mib: int  # 0 = unified memory (GB10: nvidia-smi prints [N/A])
    sm_clock_mhz: tuple[int, int]  # idle, busy
    mem_clock_mhz: int
    pcie: tuple[int, int]  # generation, width
    fan: bool


KINDS: dict[str, CardKind] = {
    "h100": CardKind("h100", "NVIDIA H100 80GB HBM3", 70.0, 690.0, 700.0, 0.055, 60.0, 81559,
                     (345, 1980), 2619, (5, 16), False),
    "gb10": CardKind("gb10", "NVIDIA GB10", 11.0, 140.0, 0.0, 0.22, 90.0, 0, (208, 2405), 0, (0, 0), False),
    "p150a": CardKind("p150a", "p150a", 75.0, 240.0, 300.0, 0.16, 45.0, 32768, (800, 1350), 0, (5, 16), True),
}  # fmt: skip


def card_kind_for(model_name: str) -> CardKind:
    """The kind of a card model name from the inventory ("H100 SXM 80GB", "GB10", "Blackhole p150a")."""
    name = model_name.lower()
    if "h100" in name:
        return KINDS["h100"]
    if "gb10" in name:
        return KINDS["gb10"]
    return KINDS["p150a"]


@dataclass
class CardSim:
    """One card's simulated state. ``ambient_c`` is the chassis intake temperature."""

    kind: CardKind
    index: int
    bus_id: str  # "0000:18:00.0"
    uuid: str = ""
    serial: str = ""
    ambient_c: float = 25.0
    seed: int = 0
    load: float = 0.0  # 0..1 demanded by the jobs on this card
    util: float = 0.0
    mem_util: float = 0.0
    power_w: float = 0.0
    temp_c: float = 0.0
    energy_j: float = 0.0
    heartbeat: int = 5000
    fan_fault: bool = False
    #: the firmware hangs: the heartbeat stands still until the card is reset (tt-smi -r)
    hung: bool = False
    links_down: set[int] = field(default_factory=set)  # Ethernet channels held down
    link_ports: dict[str, tuple[int, ...]] = field(default_factory=dict)  # cabled port -> its channels
    xid: int = 0
    #: a bad 8-pin lead: under load the voltage sags now and then and the board power dips with it
    lead_fault: bool = False
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self.power_w = self.kind.idle_w
        self.temp_c = self.steady_temp(self.power_w)

    @property
    def thermal_resistance(self) -> float:
        return self.kind.c_per_w * (1.7 if self.fan_fault else 1.0)

    def steady_temp(self, power_w: float) -> float:
        return self.ambient_c + self.thermal_resistance * power_w

    @property
    def throttling(self) -> bool:
        return self.temp_c >= 90.0

    def step(self, dt: float) -> None:
        """Advance ``dt`` seconds: utilisation jitters around the load, power follows, heat lags."""
        if dt <= 0:
            return
        jitter = self._rng.uniform(-0.04, 0.04) if self.load > 0 else self._rng.uniform(0.0, 0.01)
        self.util = min(1.0, max(0.0, self.load * (0.55 if self.throttling else 1.0) + jitter))
        self.mem_util = min(1.0, max(0.0, self.util * 0.6 + self._rng.uniform(-0.03, 0.03)))
        target_w = self.kind.idle_w + (self.kind.max_w - self.kind.idle_w) * self.util
        self.power_w += (target_w - self.power_w) * (1.0 - math.exp(-dt / 3.0))
        if self.lead_fault and self.util > 0.3 and self._rng.random() < LEAD_DIP_CHANCE:
            self.power_w *= LEAD_DIP_SHARE
        self.temp_c += (self.steady_temp(self.power_w) - self.temp_c) * (
            1.0 - math.exp(-dt / self.kind.tau_s)
        )
        self.energy_j += self.power_w * dt
        if not self.hung:
            self.heartbeat += max(1, round(dt * 2))

    @property
    def memory_used_mib(self) -> int:
        if not self.kind.memory_mib:
            return 0
        return int(3 + (self.kind.memory_mib - 600) * min(1.0, self.load))

    @property
    def sm_clock_mhz(self) -> int:
        idle, busy = self.kind.sm_clock_mhz
        clock = idle + (busy - idle) * min(1.0, self.util * 1.5)
        return int(clock * (0.7 if self.throttling else 1.0))

    @property
    def fan_rpm(self) -> int:
        if self.fan_fault:
            return 0
        return int(1500 + max(0.0, self.temp_c - 40.0) * 45)

    def eth_live_status(self) -> int:
        """Bit per Ethernet channel, 1 = link up (tt-smi smbus_telem.ETH_LIVE_STATUS): the channels
        of the cabled ports (inventory.links), less those held down."""
        bits = 0
        for channels in self.link_ports.values():
            for channel in channels:
                if channel not in self.links_down:
                    bits |= 1 << channel
        return bits
