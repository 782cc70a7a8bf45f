"""The figures of the experiments' summaries (rows as `common.row` builds them); `experiments.report`
exports them next to its tables."""

from typing import Callable, Sequence

import numpy as np

from experiments.common import save_plot

__all__ = ["bar_plot", "bar_panels", "scatter_cells", "sample_grid"]


def _pyplot():
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  return plt


def _mean_std_by(rows: Sequence[dict], metric: str, scale: float = 1.0) -> dict[str, tuple[float, float, int]]:
  """Per method with a value: (mean, population std, count) of scale * metric."""
  vals: dict[str, list[float]] = {}
  for r in rows:
    if r["metrics"].get(metric) is not None:
      vals.setdefault(r["method"], []).append(scale * r["metrics"][metric])
  return {m: (float(np.mean(v)), float(np.std(v)), len(v)) for m, v in vals.items()}


def bar_plot(rows: list[dict], metric: str, workdir: str, name: str, *, title: str | None = None) -> str:
  """Mean ± std of `metric` per method, one panel per dataset; saved as <workdir>/<name>."""
  plt = _pyplot()
  datasets, methods = list(dict.fromkeys(r["dataset"] for r in rows)), list(dict.fromkeys(r["method"] for r in rows))
  fig, axes = plt.subplots(1, len(datasets), figsize=(max(3.0, 0.6 * len(methods) + 1.5) * len(datasets), 3.2),
                           squeeze=False)
  for ax, d in zip(axes[0], datasets):
    ms = _mean_std_by([r for r in rows if r["dataset"] == d], metric)
    for i, m in enumerate(methods):
      if m in ms:
        ax.bar(i, ms[m][0], yerr=ms[m][1] if ms[m][2] > 1 else None, color=f"C{i % 10}")
    ax.set_xticks(range(len(methods)), methods, rotation=30, ha="right")
    ax.set_title(d if title is None else f"{title}: {d}")
    ax.set_ylabel(metric)
  return save_plot(fig, workdir, name)


def bar_panels(rows: list[dict], *, panels: list[str], methods: list[str], highlight: str,
               metric: str = "ood_auroc"):
  """One horizontal-bar panel per setting (cells 'dataset:setting'): metric in % per method, mean ± std
  over datasets and splits; `highlight` in red. Returns the figure."""
  plt = _pyplot()
  fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.2), squeeze=False)
  for ax, setting in zip(axes[0], panels):
    ms = _mean_std_by([r for r in rows if r["dataset"].endswith(":" + setting)], metric, 100.0)
    names = [m for m in methods if m in ms][::-1]
    ax.barh(names, [ms[n][0] for n in names], xerr=[ms[n][1] for n in names],
            color=["tab:red" if n == highlight else "tab:gray" for n in names])
    ax.axvline(50, color="k", lw=0.5, ls="--")
    ax.set_xlim(0, 100)
    ax.set_title(f"{setting} (mean over datasets x splits)", fontsize=9)
    ax.set_xlabel(f"{metric} (%)")
  fig.tight_layout()
  return fig


def scatter_cells(rows: list[dict], *, cells: list[str], x: tuple[str, str, float],
                  y: tuple[str, str, float], style: Callable[[str], dict], labels: dict[str, str] | None = None,
                  skip: tuple[str, ...] = (), xlabel: str = "", ylabel: str = "", log_x: bool = False,
                  vline: float | None = None):
  """One panel per cell: each method's mean (x, y), x / y given as (src, key, scale); returns the figure."""
  plt = _pyplot()
  labels = labels or {}
  ncol = min(3, len(cells))
  fig, axes = plt.subplots(-(-len(cells) // ncol), ncol, figsize=(5.2 * ncol, 4.0 * -(-len(cells) // ncol)),
                           squeeze=False)
  for ax, cell in zip(axes.ravel(), cells):
    for method in sorted({r["method"] for r in rows if r["dataset"] == cell} - set(skip)):
      rs = [r for r in rows if r["dataset"] == cell and r["method"] == method]
      ys = [y[2] * r[y[0]][y[1]] for r in rs if r[y[0]].get(y[1]) is not None]
      xs = [x[2] * r[x[0]][x[1]] for r in rs if r[x[0]].get(x[1])]
      if xs and ys:
        ax.scatter(np.mean(xs), np.mean(ys), **style(method))
        ax.annotate(labels.get(method, method), (np.mean(xs), np.mean(ys)), fontsize=7, xytext=(3, 3),
                    textcoords="offset points")
    ax.set_xscale("log" if log_x else "linear")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=cell)
    if vline is not None:
      ax.axvline(vline, color="grey", lw=0.6, ls="--")
  for ax in axes.ravel()[len(cells):]:
    ax.axis("off")
  fig.tight_layout()
  return fig


def sample_grid(panels: list[list[tuple[str, np.ndarray | None]]], kind: str):
  """A figure of generated samples `panels[i][j] = (title, samples or None)`; kind: 'scatter' ([n, 2]), 'image'
  (8x8, the first 16), 'curves' (the first 4 rows of [n, L]), 'clouds' (3 point clouds [n, P, 3] as x-y scatters)."""
  from einops import rearrange
  plt = _pyplot()
  depth = 3 if kind == "clouds" else 1
  nrow, ncol = len(panels) * depth, max(len(p) for p in panels)
  size = {"scatter": (2.0, 2.0), "image": (1.9, 2.2), "curves": (1.9, 2.2), "clouds": (1.9, 5.5 / 3)}[kind]
  fig, axes = plt.subplots(nrow, ncol, figsize=(size[0] * ncol, size[1] * nrow), squeeze=False)
  for i, line in enumerate(panels):
    plt.setp(axes[i * depth:(i + 1) * depth, :len(line)], xticks=[], yticks=[])
    for j, (title, x) in enumerate(line):
      ax = axes[i * depth, j]
      if i == 0:
        ax.set_title(title, fontsize=8 if kind == "scatter" else 7)
      if x is None:
        continue
      if kind == "scatter":
        ax.scatter(x[:2000, 0], x[:2000, 1], s=0.5, alpha=0.5)
        ax.set_xlim(-3, 3), ax.set_ylim(-3, 3)
      elif kind == "image":
        grid = rearrange(np.clip(x[:16].reshape(16, 8, 8), -1, 1), "(r c) h w -> (r h) (c w)", r=4)
        ax.imshow(grid, cmap="gray", vmin=-1, vmax=1)
      elif kind == "curves":
        for s in x[:4]:
          ax.plot(s, lw=0.8)
        ax.set_ylim(-4, 4)
      else:
        for k in range(depth):
          axes[i * depth + k, j].scatter(x[k, :, 0], x[k, :, 1], s=1)
          axes[i * depth + k, j].set_xlim(-1.6, 1.6), axes[i * depth + k, j].set_ylim(-1.6, 1.6)
  fig.tight_layout()
  return fig
