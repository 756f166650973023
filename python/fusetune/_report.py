"""fusetune.report(): a tuning job's tables and SVG plots, as `fusetune report`
prints and writes them, in an object a notebook shows (the tables, then the
plots inline)."""

import html
import os

from . import _fusetune


class Svg:
    """One SVG plot; Jupyter shows it inline."""

    def __init__(self, name, text):
        self.name = name  # the file `fusetune report --out` writes: "roofline.svg"
        self.text = text

    def _repr_svg_(self):
        return self.text

    def __repr__(self):
        return f"<fusetune.Svg {self.name}, {len(self.text)} characters>"

    def save(self, path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.text)


class Report:
    """A job's report: `summary` (the dict of `fusetune report --json`), `text`
    (the tables `fusetune report` prints) and `plots` (file name -> Svg): the
    tuning curves, the whole model over the job, predicted against measured
    time, the roofline."""

    def __init__(self, summary, text, plots):
        self.summary = summary
        self.text = text
        self.plots = {name: Svg(name, svg) for name, svg in plots}
        self.job = summary.get("job")
        self.state = summary.get("state")

    def __str__(self):
        return self.text

    def __repr__(self):
        return f"<fusetune.Report of job {self.job} ({self.state}), {len(self.plots)} plots>"

    def _repr_html_(self):
        parts = [f"<pre>{html.escape(self.text)}</pre>"]
        parts += [f"<div>{svg.text}</div>" for svg in self.plots.values()]
        return "\n".join(parts)

    def save(self, folder):
        """Writes the plots into `folder` as `fusetune report --out` does; returns their paths."""
        os.makedirs(folder, exist_ok=True)
        paths = []
        for name, svg in self.plots.items():
            paths.append(os.path.join(folder, name))
            svg.save(paths[-1])
        return paths


def report(db="fusetune.db", job=None):
    """The report of tuning job `job` in the database, by default its latest job."""
    return Report(*_fusetune.report(os.fspath(db), job or 0))
