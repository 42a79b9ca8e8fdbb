"""The figure of the getting-started page: ArviZ's trace plot of the README's mixture run
(``python docs/assets/getting_started_plot.py`` writes docs/assets/getting_started_trace.png)."""

from pathlib import Path
import runpy

import arviz as az
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

here = Path(__file__).parent
run = runpy.run_path(str(here / "readme_example.py"))  # prints what the README shows
idata = az.from_numpyro(run["mcmc"])
az.plot_trace(idata, var_names=["weights", "locs", "scale"], compact=True)
plt.tight_layout()
plt.savefig(here / "getting_started_trace.png", dpi=80)
