"""The model families this build knows: one list of descriptors (``inference/family.py``), asked by everything that
would otherwise name a family (the engine loader, the worker, the store, the CLI, the server and the app).

``FamilyRegistry.from_environment()`` gives the built-in families followed by the ones in the folders named by
``CAPTIONEER_FAMILY_PATH`` (``os.pathsep``-separated). Such a folder is a Python package holding a ``family.py``
that exports ``FAMILY``, a :class:`~inference.family.ModelFamily`; it is imported as a package named after the
folder and its path (``captioneer_family_<folder name>_<hash>``), so its descriptor names its engine factory
from ``__package__`` (``f"{__package__}.engine:create_engine"``).
The environment travels to the spawned worker, which builds the same registry. A registry is a value: each
process (or test) builds its own and passes it on; nothing is registered globally.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from inference.errors import ModelError, UsageError
from inference.families.confucius4_r2t2.family import FAMILY as CONFUCIUS4_R2T2
from inference.families.parakeet_tdt.family import FAMILY as PARAKEET_TDT
from inference.families.whisper_ct2.family import FAMILY as WHISPER_CT2
from inference.family import ModelFamily
from inference.models import identify
from inference.models.catalog import Catalog
from inference.models.conversion import ConversionRegistry
from inference.models.spec import FamilySpec, load_all_specs, load_family_spec
from inference.paths import AppPaths

# In detection order: a family may refuse a near miss (whisper_ct2 a Transformers Whisper folder) only after
# the others had their look.
BUILTIN_FAMILIES: tuple[ModelFamily, ...] = (PARAKEET_TDT, CONFUCIUS4_R2T2, WHISPER_CT2)
FAMILY_PATH_VARIABLE = "CAPTIONEER_FAMILY_PATH"
DESCRIPTOR_MODULE = "family"
PACKAGE_PREFIX = "captioneer_family_"


class FamilyRegistry:
    """The families, by name, in detection order; what the rest of Captioneer asks instead of naming one."""

    def __init__(self, families: Sequence[ModelFamily] = BUILTIN_FAMILIES) -> None:
        by_name: dict[str, ModelFamily] = {}
        for family in families:
            if family.name in by_name:
                raise ModelError(f"two model families are called {family.name!r}", "rename one of them")
            by_name[family.name] = family
        self._families = by_name

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> FamilyRegistry:
        """The built-in families, then those of the folders in ``CAPTIONEER_FAMILY_PATH``."""
        value = (os.environ if environ is None else environ).get(FAMILY_PATH_VARIABLE, "")
        folders = [Path(entry) for entry in value.split(os.pathsep) if entry.strip()]
        return cls(BUILTIN_FAMILIES + tuple(load_family_folder(folder) for folder in folders))

    @property
    def families(self) -> tuple[ModelFamily, ...]:
        return tuple(self._families.values())

    def names(self) -> tuple[str, ...]:
        return tuple(self._families)

    def get(self, name: str) -> ModelFamily:
        family = self._families.get(name)
        if family is None:
            raise UsageError(f"unknown family {name!r}", f"choose one of: {', '.join(self._families)}")
        return family

    def detect_family(self, model_path: Path) -> str:
        """The family of a model folder or GGUF file, from its ``config.json`` or metadata."""
        return identify.detect_family(Path(model_path), self.families)

    def spec(self, name: str) -> FamilySpec:
        """The family's options and packages (``model_specs/<name>.json``, or the file its descriptor names)."""
        family = self.get(name)
        if family.spec_file is not None:
            return load_family_spec(family.spec_file.stem, family.spec_file.parent)
        return load_family_spec(name)

    def specs(self) -> dict[str, FamilySpec]:
        """Every spec of the catalog's folder, then those the descriptors keep beside their family."""
        specs = load_all_specs()
        for family in self.families:
            if family.spec_file is not None:
                specs[family.name] = self.spec(family.name)
        return specs

    def catalog(self, paths: AppPaths) -> Catalog:
        return Catalog(paths, self.specs())

    def conversions(self) -> ConversionRegistry:
        """What a model store runs of the families: their install-time conversions, their source importers and
        the detection of an imported folder's family."""
        registry = ConversionRegistry(detect_family=self.detect_family)
        for family in self.families:
            if family.install is not None:
                step = family.install
                registry.register(family.name, step.converter, step.extra_space, step.preflight)
            registry.source_importers.extend(family.source_importers)
        return registry

    def translators(self) -> str:
        """Whose models translate speech into English (their spec takes ``task``), for messages: "Whisper models
        (family whisper_ct2)"."""
        found = []
        for family in self.families:
            try:
                if self.spec(family.name).takes_request_option("task"):
                    found.append(family)
            except ModelError:  # a spec folder without this family's file (a test's catalog)
                continue
        if not found:
            return "a model family that translates (none is installed)"
        names = " or ".join(f.display_name for f in found)
        return f"{names} models (family {' or '.join(f.name for f in found)})"


def load_family_folder(folder: Path) -> ModelFamily:
    """The ``FAMILY`` of a family folder outside this package (a plugin, a test's family)."""
    folder = Path(folder).expanduser().resolve()
    init = folder / "__init__.py"
    if not (folder / f"{DESCRIPTOR_MODULE}.py").is_file() or not init.is_file():
        raise ModelError(
            f"{folder} is not a model family folder (it needs __init__.py and {DESCRIPTOR_MODULE}.py)",
            f"fix {FAMILY_PATH_VARIABLE}",
        )
    # The same name in every process (the worker imports the factory by it), distinct for same-named folders.
    package = f"{PACKAGE_PREFIX}{folder.name}_{hashlib.sha256(str(folder).encode()).hexdigest()[:12]}"
    if package not in sys.modules:  # the import system's own table: loaded once per process, like any module
        spec = importlib.util.spec_from_file_location(package, init, submodule_search_locations=[str(folder)])
        if spec is None or spec.loader is None:
            raise ModelError(f"cannot import the model family in {folder}", f"fix {FAMILY_PATH_VARIABLE}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[package] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[package]
            raise
    descriptor = getattr(importlib.import_module(f"{package}.{DESCRIPTOR_MODULE}"), "FAMILY", None)
    if not isinstance(descriptor, ModelFamily):
        raise ModelError(
            f"{folder / (DESCRIPTOR_MODULE + '.py')} exports no FAMILY (an inference.family.ModelFamily)",
            f"fix {FAMILY_PATH_VARIABLE}",
        )
    return descriptor
