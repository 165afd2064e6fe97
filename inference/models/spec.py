"""Family specs: the documented schema of ``model_specs/<family>.json``, a loader and option validation.

Schema (version 1; what a model can do is reported by the loaded engine, ``contract.Capabilities``)::

    {
      "schema_version": 1, "family": str, "name": str, "description": str,
      "languages": [str], "license": str,
      "session_options": {NAME: OPTION}, "request_options": {NAME: OPTION},
      "packages": [PACKAGE]
    }
    OPTION  = {"type": "int"|"float"|"bool"|"string"|"enum", "default": value, "description": str,
               optional "min"/"max" (numbers), "min_exclusive"/"max_exclusive" (bool),
               "choices" (enum), "aliases" [str], "nullable" (bool), "max_bytes" (string),
               "language_code" (string: one of the family's ``languages``, given as the code or its English
               name, validated to the code)}
    PACKAGE = {"id": str, "name": str,
               "format": "gguf"|"safetensors"|"ctranslate2"|"phonon2-archive"|"nemo"|"bundled",
               "files": [FILE], "size_bytes": int,
               optional "hf_repo", "revision", "default", "quantization", "languages", "license",
               "strip_prefix", "target_dir", "bundled_path", "size_is_estimate", "notes"}
    FILE    = {"path": str, optional "size": int, "sha256": str, "hf_repo": str, "revision": str,
               "target_dir": str}

A file comes from the package's ``hf_repo`` at ``revision`` (default ``main``) and lands at its path minus
``strip_prefix``, under ``target_dir``. A file with its own ``hf_repo`` (which then needs a pinned ``revision``)
lands at ``<its target_dir>/<path>``, the package's prefix and folder not applying (the Phonon-2 sidecars).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inference.errors import ModelError, UsageError
from inference.languages import language_code
from inference.paths import model_specs_dir

OPTION_TYPES = ("int", "float", "bool", "string", "enum")
PACKAGE_FORMATS = ("gguf", "safetensors", "ctranslate2", "phonon2-archive", "nemo", "bundled")
# Formats whose downloaded files no engine loads directly: installable only with their family's conversion.
FORMATS_NEEDING_CONVERSION = frozenset({"phonon2-archive"})
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class OptionSpec:
    name: str
    type: str
    default: Any
    description: str = ""
    minimum: float | None = None
    maximum: float | None = None
    min_exclusive: bool = False
    max_exclusive: bool = False
    choices: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    nullable: bool = False
    max_bytes: int | None = None
    language_code: bool = False

    def allowed(self) -> str:
        if self.type == "enum":
            return "one of " + ", ".join(self.choices)
        if self.type == "bool":
            return "true or false"
        if self.type in ("int", "float"):
            lo = "(" if self.min_exclusive else "["
            hi = ")" if self.max_exclusive else "]"
            low = "-inf" if self.minimum is None else f"{self.minimum:g}"
            high = "inf" if self.maximum is None else f"{self.maximum:g}"
            return f"a{'n integer' if self.type == 'int' else ' number'} in {lo}{low}, {high}{hi}"
        return "text"

    def coerce(self, raw: Any) -> Any:
        """Turn a CLI string (or JSON value) into a checked value of this option's type."""
        if raw is None and self.nullable:
            return None
        problem = f"option {self.name!r} must be {self.allowed()}, got {raw!r}"
        if self.type == "bool":
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            raise UsageError(problem)
        if self.type in ("int", "float"):
            if isinstance(raw, bool):
                raise UsageError(problem)
            try:
                value: float = int(str(raw).strip()) if self.type == "int" else float(str(raw).strip())
            except ValueError:
                raise UsageError(problem) from None
            if self.type == "float" and not math.isfinite(value):
                raise UsageError(problem)
            if self.minimum is not None and (
                value < self.minimum or (self.min_exclusive and value == self.minimum)
            ):
                raise UsageError(problem)
            if self.maximum is not None and (
                value > self.maximum or (self.max_exclusive and value == self.maximum)
            ):
                raise UsageError(problem)
            return value
        if self.type == "enum":
            text = str(raw).strip()
            if text not in self.choices:
                raise UsageError(problem)
            return text
        text = str(raw)
        if self.max_bytes is not None and len(text.encode("utf-8")) > self.max_bytes:
            raise UsageError(f"option {self.name!r} is longer than {self.max_bytes} bytes")
        return text


@dataclass(frozen=True)
class PackageFile:
    path: str
    size: int | None = None
    sha256: str | None = None
    hf_repo: str | None = None  # None: the package's repository
    revision: str | None = None  # None: the package's revision
    target_dir: str | None = None  # None: the package's strip_prefix/target_dir rule


@dataclass(frozen=True)
class PackageSpec:
    id: str
    family: str
    name: str
    format: str
    files: tuple[PackageFile, ...]
    size_bytes: int
    hf_repo: str | None = None
    revision: str | None = None
    default: bool = False
    quantization: str | None = None
    languages: tuple[str, ...] = ()
    license: str = ""
    strip_prefix: str = ""
    target_dir: str | None = None
    bundled_path: str | None = None
    size_is_estimate: bool = False
    notes: str = ""

    def source_of(self, file: PackageFile) -> tuple[str | None, str]:
        """(repository, revision) a file of this package is downloaded from."""
        if file.hf_repo and file.hf_repo != self.hf_repo:
            return file.hf_repo, file.revision or "main"
        return self.hf_repo, file.revision or self.revision or "main"

    def is_foreign(self, file: PackageFile) -> bool:
        """Whether the file comes from another repository than the package's own."""
        return bool(file.hf_repo) and file.hf_repo != self.hf_repo


@dataclass(frozen=True)
class FamilySpec:
    family: str
    name: str
    description: str
    languages: tuple[str, ...]
    license: str
    session_options: dict[str, OptionSpec]
    request_options: dict[str, OptionSpec]
    packages: tuple[PackageSpec, ...] = field(default_factory=tuple)

    def validate_session_options(self, raw: dict[str, Any]) -> dict[str, Any]:
        return _validate(self.family, "session", self.session_options, raw)

    def validate_request_options(self, raw: dict[str, Any]) -> dict[str, Any]:
        out = _validate(self.family, "request", self.request_options, raw)
        for name, value in out.items():
            if self.request_options[name].language_code and value:
                out[name] = language_code(value, self.languages, f"the {self.family} family")
        return out

    def takes_request_option(self, name: str) -> bool:
        """Whether ``name`` is one of the request options, under its own name or as an alias."""
        return self.request_option(name) is not None

    def resolved_options(self, kind: str, raw: dict[str, Any]) -> dict[str, Any]:
        """Every ``kind`` ("session" or "request") option with its value: the validated ``raw`` values over the
        spec's defaults. The families' typed settings (their ``options.py``) are built from it."""
        validate = self.validate_session_options if kind == "session" else self.validate_request_options
        return {**self.defaults(kind), **validate(raw)}

    def request_option(self, name: str) -> OptionSpec | None:
        """The request option called ``name`` (its own name or an alias), if the family has one."""
        return next(
            (o for o in self.request_options.values() if name == o.name or name in o.aliases),
            None,
        )

    def defaults(self, kind: str) -> dict[str, Any]:
        options = self.session_options if kind == "session" else self.request_options
        return {name: opt.default for name, opt in options.items()}


def _validate(family: str, kind: str, specs: dict[str, OptionSpec], raw: dict[str, Any]) -> dict[str, Any]:
    """Canonicalise names (aliases, ``family.`` prefixes), reject unknown keys, coerce values."""
    lookup: dict[str, OptionSpec] = {}
    for option in specs.values():
        lookup[option.name] = option
        for alias in option.aliases:
            lookup[alias] = option
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = key.removeprefix(f"{family}.")
        spec = lookup.get(name)
        if spec is None:
            known = ", ".join(sorted(specs)) or "none"
            raise UsageError(f"unknown {kind} option {key!r} for {family}", f"known {kind} options: {known}")
        if spec.name in out:
            raise UsageError(f"{kind} option {spec.name!r} given twice (possibly through an alias)")
        out[spec.name] = spec.coerce(value)
    return out


def _option(name: str, data: dict[str, Any], where: str) -> OptionSpec:
    kind = data.get("type")
    if kind not in OPTION_TYPES:
        raise ModelError(f"{where}: option {name!r} has invalid type {kind!r}")
    if "default" not in data:
        raise ModelError(f"{where}: option {name!r} has no default")
    choices = tuple(data.get("choices", ()))
    nullable_default = data["default"] is None and bool(data.get("nullable"))
    if kind == "enum" and (not choices or (data["default"] not in choices and not nullable_default)):
        raise ModelError(f"{where}: enum option {name!r} needs choices that include its default")
    spec = OptionSpec(
        name=name,
        type=kind,
        default=data["default"],
        description=str(data.get("description", "")),
        minimum=data.get("min"),
        maximum=data.get("max"),
        min_exclusive=bool(data.get("min_exclusive", False)),
        max_exclusive=bool(data.get("max_exclusive", False)),
        choices=choices,
        aliases=tuple(data.get("aliases", ())),
        nullable=bool(data.get("nullable", False)),
        max_bytes=data.get("max_bytes"),
        language_code=bool(data.get("language_code", False)),
    )
    if spec.default is not None:
        try:
            spec.coerce(spec.default)
        except UsageError as exc:
            raise ModelError(f"{where}: default of {name!r} is invalid: {exc}") from None
    return spec


def _package_file(data: dict[str, Any], where: str) -> PackageFile:
    if not isinstance(data, dict) or not isinstance(data.get("path"), str) or not data["path"]:
        raise ModelError(f"{where} has a file entry without a path: {data!r}")
    repo, revision = data.get("hf_repo"), data.get("revision")
    if repo is not None and not revision:
        raise ModelError(f"{where}: file {data['path']!r} from {repo} needs a pinned revision")
    sha256 = data.get("sha256")
    return PackageFile(
        path=data["path"],
        size=data.get("size"),
        sha256=sha256.lower() if isinstance(sha256, str) else None,
        hf_repo=repo,
        revision=revision,
        target_dir=data.get("target_dir"),
    )


def parse_family_spec(data: dict[str, Any], where: str = "spec") -> FamilySpec:
    if data.get("schema_version") != 1:
        raise ModelError(f"{where}: unsupported schema_version {data.get('schema_version')!r}")
    for key in ("family", "name", "session_options", "request_options", "packages"):
        if key not in data:
            raise ModelError(f"{where}: missing key {key!r}")
    family = str(data["family"])
    packages = []
    seen: set[str] = set()
    for entry in data["packages"]:
        pid = entry.get("id")
        if not pid or pid in seen:
            raise ModelError(f"{where}: package without id or duplicate id {pid!r}")
        seen.add(pid)
        if entry.get("format") not in PACKAGE_FORMATS:
            raise ModelError(f"{where}: package {pid!r} has unknown format {entry.get('format')!r}")
        files = tuple(_package_file(f, f"{where}: package {pid!r}") for f in entry.get("files", ()))
        packages.append(
            PackageSpec(
                id=pid,
                family=family,
                name=str(entry.get("name", pid)),
                format=entry["format"],
                files=files,
                size_bytes=int(entry.get("size_bytes", 0)),
                hf_repo=entry.get("hf_repo"),
                revision=entry.get("revision"),
                default=bool(entry.get("default", False)),
                quantization=entry.get("quantization"),
                languages=tuple(entry.get("languages", data.get("languages", ()))),
                license=str(entry.get("license", data.get("license", ""))),
                strip_prefix=str(entry.get("strip_prefix", "")),
                target_dir=entry.get("target_dir"),
                bundled_path=entry.get("bundled_path"),
                size_is_estimate=bool(entry.get("size_is_estimate", False)),
                notes=str(entry.get("notes", "")),
            )
        )
    return FamilySpec(
        family=family,
        name=str(data["name"]),
        description=str(data.get("description", "")),
        languages=tuple(data.get("languages", ())),
        license=str(data.get("license", "")),
        session_options={n: _option(n, d, where) for n, d in data["session_options"].items()},
        request_options={n: _option(n, d, where) for n, d in data["request_options"].items()},
        packages=tuple(packages),
    )


def load_family_spec(family: str, specs_dir: Path | None = None) -> FamilySpec:
    path = (specs_dir or model_specs_dir()) / f"{family}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(f"no model spec for family {family!r} at {path}") from None
    except json.JSONDecodeError as exc:
        raise ModelError(f"{path} is not valid JSON: {exc}") from None
    return parse_family_spec(data, str(path))


def load_all_specs(specs_dir: Path | None = None) -> dict[str, FamilySpec]:
    directory = specs_dir or model_specs_dir()
    return {p.stem: load_family_spec(p.stem, directory) for p in sorted(directory.glob("*.json"))}
