"""The licence and citation of each source the items come from: the terms of the sources this project knows, and how
the dataset card's one `license:` is chosen from the sources' (the Hub takes one id; several sources may differ)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A Hub license id (cc-by-4.0, mit, other, unknown, ...): one YAML word, no quoting needed.
LICENSE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+-]*")
LICENSE_MAX = 64
UNKNOWN = "unknown"  # the Hub's id for "not stated"
MIXED = "other"  # the Hub's id when the terms are not one license: the card's table says which source has which


def license_problem(license: str) -> str | None:
    """Why a text cannot be a license id of the card, or None."""
    if not LICENSE_ID.fullmatch(license or "") or len(license) > LICENSE_MAX:
        return f"{license!r} is not a license id of the Hugging Face Hub (e.g. cc-by-4.0, other, unknown)"
    return None


@dataclass(frozen=True)
class SourceTerms:
    """The terms the items of one source are exported under: a Hub license id, a citation (BibTeX or plain text; may
    be empty) and a note the card shows beside the license (what it covers, whose rights stay whose)."""

    license: str
    citation: str = ""
    note: str = ""


MVTEC_AD = SourceTerms(
    license="cc-by-nc-sa-4.0",
    note="MVTec AD: CC BY-NC-SA 4.0, non-commercial use only",
    citation="""@inproceedings{bergmann2019mvtec,
  title = {{MVTec AD} -- A Comprehensive Real-World Dataset for Unsupervised Anomaly Detection},
  author = {Bergmann, Paul and Fauser, Michael and Sattlegger, David and Steger, Carsten},
  booktitle = {IEEE/CVF Conference on Computer Vision and Pattern Recognition (CVPR)},
  pages = {9592--9600},
  year = {2019}
}""",
)
YOUTUBE_8M = SourceTerms(
    license="cc-by-4.0",
    note=(
        "the YouTube-8M dataset (video ids and labels) is CC BY 4.0 (Google); the frames are stills of public "
        "YouTube videos, whose rights stay with their uploaders"
    ),
    citation="""@article{abuelhaija2016youtube8m,
  title = {{YouTube-8M}: A Large-Scale Video Classification Benchmark},
  author = {Abu-El-Haija, Sami and Kothari, Nisarg and Lee, Joonseok and Natsev, Paul and Toderici, George and
            Varadarajan, Balakrishnan and Vijayanarasimhan, Sudheendra},
  journal = {arXiv preprint arXiv:1609.08675},
  year = {2016}
}""",
)
# The source names under which these datasets arrive: the video source, and the usual names of an MVTec-AD import.
KNOWN_SOURCES = {"yt8m": YOUTUBE_8M, "mvtec": MVTEC_AD, "mvtec_ad": MVTEC_AD, "mvtec-ad": MVTEC_AD}
# The source of the pairs the app draws itself (annotator/synthetic): under the benchmark's own license.
GENERATED_SOURCE = "synthetic"


def card_license(licenses) -> str:
    """The card's one `license:`: the sources' license when they all have the same, else `other` (the card's table
    gives each source's); `unknown` for no source at all."""
    distinct = set(licenses)
    if not distinct:
        return UNKNOWN
    return distinct.pop() if len(distinct) == 1 else MIXED
