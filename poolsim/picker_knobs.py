"""llm-d's picker knobs, for a sweep: `predicted-latency:KNOB[:KNOB...]` names a variant.

- `least` / `most`: `headroomSelectionStrategy` (least, best fit, is llm-d's default);
- `tau=0.99+0.8` (default: a strict filter at 0.99 before the SLO tiers, a loose one at
  0.80 after), `tau=0.8` (one filter at 0.80: llm-d's routing-only profile), `tau=0.6`
  (one at 0.6: suggested for multimodal traffic); any `tau=A+B` or `tau=A` works;
- `noslo`: the picker sees no SLO on any request (headroom is then minus the prediction,
  so the fastest pods score best), as when the EPP gets no SLO headers;
- `noclass`: no `pod_class` in the rows of a mixed pool (what llm-d's EPP sends), as
  `predicted-latency-noclass`, to compare the other knobs with and without it.

Only the configuration changes: llm-d's algorithm runs as specified (latency_client.pick).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from latency_client import PickerConfig

BASE = "predicted-latency"
HELP = "predicted-latency:KNOB[:KNOB...], KNOB = least|most, tau=0.99+0.8|0.8|0.6, noslo, noclass"


@dataclass(frozen=True, slots=True)
class Knobs:
    config: PickerConfig
    use_slos: bool
    pod_class: bool = True


def parse(name: str) -> Knobs:
    """The knobs of a variant name; ValueError naming the bad part."""
    base, _, spec = name.partition(":")
    if base != BASE:
        raise ValueError(f"only {BASE} takes knobs, not {base!r} ({HELP})")
    config, use_slos, pod_class = PickerConfig(), True, True
    for knob in filter(None, spec.split(":")):
        if knob == "least":
            config = replace(config, strategy="least")
        elif knob == "most":
            config = replace(config, strategy="most")
        elif knob == "noslo":
            use_slos = False
        elif knob == "noclass":
            pod_class = False
        elif knob.startswith("tau="):
            config = _taus(config, knob.removeprefix("tau="))
        else:
            raise ValueError(f"unknown knob {knob!r} in {name!r} ({HELP})")
    return Knobs(config, use_slos, pod_class)


def _taus(config: PickerConfig, text: str) -> PickerConfig:
    try:
        taus = [float(part) for part in text.split("+")]
    except ValueError:
        raise ValueError(f"tau={text}: thresholds must be numbers ({HELP})") from None
    if len(taus) not in (1, 2) or not all(0.0 < tau <= 1.0 for tau in taus):
        raise ValueError(f"tau={text}: one or two thresholds in (0, 1] ({HELP})")
    if len(taus) == 1:
        return replace(config, strict_affinity_tau=None, loose_affinity_tau=taus[0])
    return replace(config, strict_affinity_tau=taus[0], loose_affinity_tau=taus[1])
