"""The capacity figure (matplotlib, Agg, PNG, as `lrtrace.plots`): per task class,
what the target judges against fleet size for every setting searched, the target's
threshold as a line and each setting's capacity marked; with a sweep, a last panel
of capacity per setting."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from lrtrace.capacity import CapacityPlanner, SettingResult
from lrtrace.plots import SIM_STAMP


def _ylabel(cls: str) -> str:
    if cls.startswith("urgent"):
        return f"{cls}: share of tasks at full utility"
    return f"{cls}: mean utility / maximum"


def capacity_figure(planner: CapacityPlanner, results: list[SettingResult], path: Path) -> Path:
    classes = sorted({c for r in results for p in r.points.values() for c in p.judged})
    panels = len(classes) + (1 if len(results) > 1 else 0)
    fig, axes = plt.subplots(1, max(1, panels), figsize=(5.2 * max(1, panels), 4.2), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, cls in zip(axes[0], classes, strict=False):
        urgency = cls.split("-", 1)[0]
        for k, r in enumerate(results):
            color = colors[k % len(colors)]
            sizes = [n for n in sorted(r.points) if cls in r.points[n].judged]
            ys = [100 * r.points[n].judged[cls] for n in sizes]
            seeds = [
                [100 * s.classes[cls].value for s in r.points[n].runs if cls in s.classes]
                for n in sizes
            ]
            ax.fill_between(
                sizes, [min(v) for v in seeds], [max(v) for v in seeds], color=color, alpha=0.15
            )
            ax.plot(sizes, ys, marker="o", ms=3, color=color, label=r.setting.label)
            if r.capacity:
                ax.axvline(r.capacity, color=color, ls=":", lw=1)
        ax.axhline(
            100 * planner.target.threshold(urgency), color="tab:red", ls="--", lw=1, label="target"
        )
        ax.set_xlabel("fleet size (robots)")
        ax.set_ylabel(_ylabel(cls) + " (%)")
        ax.set_ylim(-2, 102)
        ax.legend(fontsize=7)
    if len(results) > 1:
        ax = axes[0][-1]
        labels = [r.setting.label for r in results]
        caps = [r.capacity for r in results]
        bars = ax.bar(
            range(len(results)), caps, color=[colors[k % len(colors)] for k in range(len(results))]
        )
        ax.bar_label(bars, [str(c) for c in caps], fontsize=7)
        ax.set_xticks(range(len(results)), labels, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel("capacity (robots)")
    fig.suptitle(
        f"{planner.mix.name}: fleet size one engine serves ({planner.profile.name}; band: "
        f"seeds' range, dotted: capacity) — {SIM_STAMP}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
