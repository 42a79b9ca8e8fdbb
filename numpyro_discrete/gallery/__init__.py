"""A gallery of real models with references: numpyro models as users write them, each with
a data simulator at two sizes, label-invariant summaries of its posterior draws and a
reference for those summaries that a skeptic accepts (exact enumeration, a closed form, or
NUTS with the discrete sites summed out by numpyro's enumeration). The benchmarks, the
tests and the examples take their models from here.

.. code-block:: python

    from numpyro_discrete.gallery import GALLERY

    entry = GALLERY["mixture"]
    data = entry.simulate(0, "exact")
    reference = entry.reference(data)  # reference.mean["sorted_locs"], exact
    mcmc = MCMC(LBPGibbs(NUTS(entry.model)), num_warmup=500, num_samples=2000)
    mcmc.run(random.key(0), *data.args, **data.kwargs)
    summaries = entry.summaries(mcmc.get_samples(), data)

See ``docs/guide/gallery.md`` for each model, its reference and how exact it is.
"""

from numpyro_discrete.gallery.base import (
    SIZES,
    Dataset,
    GalleryModel,
    Reference,
    batch_summaries,
    enumerate_sites,
    enumerated_nuts_reference,
    exact_reference,
    mcse,
)
from numpyro_discrete.gallery.ecology import CAPTURE_RECAPTURE, N_MIXTURE
from numpyro_discrete.gallery.fhmm import FHMM
from numpyro_discrete.gallery.lattices import ISING, POTTS_DENOISING
from numpyro_discrete.gallery.mixtures import MIXTURE
from numpyro_discrete.gallery.networks import RBM, SBM
from numpyro_discrete.gallery.regression import VARIABLE_SELECTION
from numpyro_discrete.gallery.sequences import CHANGE_POINT, HMM

__all__ = [
    "GALLERY",
    "SIZES",
    "Dataset",
    "GalleryModel",
    "Reference",
    "batch_summaries",
    "enumerate_sites",
    "enumerated_nuts_reference",
    "exact_reference",
    "mcse",
]

#: Every gallery model by name, in the order of issue 30's list.
GALLERY: dict[str, GalleryModel] = {
    entry.name: entry
    for entry in (
        MIXTURE,
        HMM,
        FHMM,
        CHANGE_POINT,
        VARIABLE_SELECTION,
        N_MIXTURE,
        CAPTURE_RECAPTURE,
        SBM,
        POTTS_DENOISING,
        ISING,
        RBM,
    )
}
