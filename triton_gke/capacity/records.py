"""Capacity records: how many requests/s one GPU sustains at an SLO, per GPU type, model variant, image and SLO.

One JSON file per record under capacity/records/ (`"schema": 1` and the fields of CapacityRecord but `path`; the run's
conditions, OPTIONAL_KEYS, only where the run recorded them: older records have none and stay valid). `make bench`
writes and updates them (bench/reports/record.py); the stack sizing reads them with find_record; `triton-gke capacity
compare` reports regressions between two sets. Pure: the standard library only, no Pulumi, no other room of the project,
so every layer may read records.

Loading is strict: a record file with bad JSON, an unknown or missing key, a value of the wrong type, a
non-positive rate, a value outside its bounds (BOUNDS) or a key (gpu, variant, image tag, SLO) that another file
holds too is refused with one CapacityError line naming the file and the key. A folder's records are its files
named as records (RECORD_NAME); other files are not read. File names and keys in messages are shown
with their control characters escaped (escaped()), so a message stays one line.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import re
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from decimal import Context, Decimal, localcontext
from fractions import Fraction
from pathlib import Path
from typing import Any

from triton_gke.bounded_files import one_line, parse_json, read_text_file
from triton_gke.contracts.naming import MODEL_NAME_RE
from triton_gke.contracts.paths import CAPACITY_RECORDS_DIR
from triton_gke.contracts.slo import MAX_SLO_LATENCY_MS
from triton_gke.one_line import CONSOLE_SCRIPT, hint_command

try:  # POSIX; elsewhere record updates are not serialised between processes (threads still are)
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

SCHEMA = 1
RECORDS_DIR = CAPACITY_RECORDS_DIR
SOURCES = ("reference", "measured")
TWIN_GPU = "cpu-twin"  # the `gpu` of sandbox measurements: one CPU twin server, no GPU
MAX_FILE_BYTES = 64 * 1024  # a record is ~1 KB; anything far larger is not one
MAX_TEXT = {"image_tag": 128, "method": 2000, "noisy": 2000}
MAX_REVISION = 2**31 - 1
# A record dated after today (UTC) is refused: it would win every "newest" lookup. One day of grace for a clock
# ahead of UTC (a run started after midnight at UTC+14 writes a date one day ahead of UTC's).
CLOCK_SKEW_DAYS = 1
# Significant digits a percentage keeps (percent_of): far more than any SLO states, fewer than the 17 where the
# binary round-off of a ratio computed as percent / 100 shows (1.1 / 100 = 0.011000000000000001).
PERCENT_DIGITS = 12
# (least, most) a record's numbers may be: far beyond any GPU or SLO (a T4 serves ~250-1,400 ResNet-50 req/s; a
# Triton batch is at most a few thousand), near enough that sizing never meets 300-digit node counts (1e308) or
# rates that vanish (5e-324). The rate's floor: below 0.01 req/s per GPU a record describes a broken run.
BOUNDS: dict[str, tuple[float, float]] = {
    "max_rps_per_gpu": (0.01, 1e6),
    "slo_latency_ms": (0.0, float(MAX_SLO_LATENCY_MS)),  # above 0: _positive checks it; contracts/slo.py
    "p50_ms": (0.0, 1e6),
    "p95_ms": (0.0, 1e6),
    "batch": (0.0, 1e5),
    "baseline_before": (0.0, 1e7),  # inferences/s of bench/metrics/conditions.py's baseline model (~120 on 2 cores)
    "baseline_after": (0.0, 1e7),
    "load_average": (0.0, 1e5),
    "cpu_steal_percent": (0.0, 100.0),
}

# GPU names as GKE's accelerator types spell them (lowercase letters, digits, hyphens: "nvidia-tesla-t4",
# "nvidia-l4"; https://cloud.google.com/kubernetes-engine/docs/how-to/gpus#create), or "cpu-twin".
_GPU_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_VARIANT_RE = MODEL_NAME_RE  # contracts/naming.py: the variant names the model repository accepts
_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
# The names record_file_name gives (GPU__VARIANT__TAG__slo-Nms.json; -2, -3... where two tags share one): in a folder
# only these are records. A benchmark's --out holds results.json beside records/, and an editor leaves hidden files
# (Emacs' lock link .#NAME, a dangling symlink) beside the one it edits: neither is a record, and reading them would
# fail every plan. A GPU name starts with a letter or digit (_GPU_RE), so a hidden file never matches. DOTALL: a
# name with a line break is still a record's name (and refused by the loader if it is not one).
RECORD_NAME = re.compile(r"[a-z0-9][a-z0-9-]*__.+__.+__slo-.+ms(-[0-9]+)?\.json", re.DOTALL)


class CapacityError(ValueError):
    """Bad record input; str() is one line naming the record file or key."""


class NoRecordError(CapacityError):
    """The records are sound, but none is for what was asked (find_record): a stack without a target goes on without
    a capacity table; any other CapacityError is a broken record file."""


# A path or key for a one-line message: the package's one escaping rule (bounded_files.one_line).
escaped = one_line


@dataclass(frozen=True)
class CapacityRecord:
    gpu: str  # GKE accelerator type ("nvidia-tesla-t4") or "cpu-twin" for sandbox measurements
    variant: str  # model variant name, as in triton-gke:modelVariants
    image_tag: str  # Triton image tag it was measured with ("25.10-py3"; the sandbox wheel's release for twins)
    slo_latency_ms: float  # the SLO the rate was searched against
    slo_percentile: float  # 95
    max_failure_percent: float
    max_rps_per_gpu: float  # highest request rate one pod with ONE GPU (one twin server) sustains at the SLO
    batch: float | None  # achieved batch size at that rate
    p50_ms: float | None
    p95_ms: float | None
    source: str  # "reference" (published figure, not measured by this toolkit) | "measured"
    method: str  # one line: how it was measured (tool, arrivals, repeats, spread, machine)
    measured_at: str  # ISO date
    revision: int  # increases each time the record is updated (the record's version)
    path: Path  # the file it was read from
    # The run's conditions (bench/metrics/conditions.py; OPTIONAL_KEYS: records written before them have none): raw ONNX
    # Runtime baseline before and after the run (inferences/s), mean load average and CPU steal over it, and why the
    # run was marked noisy (null: a quiet run, or not recorded).
    baseline_before: float | None = None
    baseline_after: float | None = None
    load_average: float | None = None
    cpu_steal_percent: float | None = None
    noisy: str | None = None

    @property
    def key(self) -> tuple[str, str, str, float]:
        """What one record file stands for: two files with the same key are refused."""
        return (self.gpu, self.variant, self.image_tag, self.slo_latency_ms)

    @property
    def slo_key(self) -> tuple[str, str, float]:
        """What the compare command and find_record match on: the same GPU, variant and SLO latency."""
        return (self.gpu, self.variant, self.slo_latency_ms)

    def to_dict(self) -> dict[str, Any]:
        """The file's content: the schema number, then every field but `path` (an optional one only when set: a
        record without the run's conditions reads and writes as it did before they existed)."""
        optional = {name: getattr(self, name) for name in OPTIONAL_KEYS if getattr(self, name) is not None}
        return {"schema": SCHEMA, **{name: getattr(self, name) for name in RECORD_KEYS}, **optional}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"


# Keys a record file may leave out (read as null): added after the first records were committed.
OPTIONAL_KEYS: tuple[str, ...] = ("baseline_before", "baseline_after", "load_average", "cpu_steal_percent", "noisy")
RECORD_KEYS: tuple[str, ...] = tuple(f.name for f in fields(CapacityRecord) if f.name not in ("path", *OPTIONAL_KEYS))
FILE_KEYS: tuple[str, ...] = ("schema", *RECORD_KEYS)  # the keys every record file has


class _Bad(Exception):
    """A value's problem, without the file and key (the loader adds them)."""


def _show(value: Any) -> str:
    if isinstance(value, Decimal):
        value = str(value)
        return value if len(value) <= 40 else value[:37] + "..."
    text = json.dumps(value, ensure_ascii=True) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise _Bad(f"expected a number, got {_show(value)}")
    try:
        number = float(value)  # a huge JSON integer overflows here; a huge Decimal becomes inf
    except OverflowError:
        number = math.inf
    if not math.isfinite(number) or (isinstance(value, Decimal) and value and not number):
        raise _Bad(f"{_show(value)} is not a finite number a record holds")
    return number


def _exact_decimal(check: Callable[[Any], float]) -> Callable[[Any], float]:
    """A percentage kept as the decimal written: one a float cannot hold exactly as that decimal (more than 17
    significant digits, 7.0000000000000000001) is refused, not silently rounded."""

    def exact(value: Any) -> float:
        number = check(value)
        if isinstance(value, Decimal) and Decimal(repr(number)) != value:
            raise _Bad(f"{_show(value)} has more digits than a percentage keeps exactly (write {number!r})")
        return number

    return exact


def _positive(value: Any) -> float:
    number = _number(value)
    if number <= 0:
        raise _Bad(f"{number:g} is not positive")
    return number


def _optional_positive(value: Any) -> float | None:
    return None if value is None else _positive(value)


def _bounded(key: str, check: Callable[[Any], float | None]) -> Callable[[Any], float | None]:
    least, most = BOUNDS[key]

    def bounded(value: Any) -> float | None:
        number = check(value)
        if number is not None and not least <= number <= most:
            raise _Bad(f"{number!r} is out of bounds (at least {least:g}, at most {most:g})")
        return number

    return bounded


def _percentile(value: Any) -> float:
    number = _number(value)
    if not 0 < number <= 100:
        raise _Bad(f"{number:g} is not a percentile (above 0, at most 100)")
    return number


def _failure_percent(value: Any) -> float:
    number = _number(value)
    if not 0 <= number < 100:
        raise _Bad(f"{number:g} is not a failure budget in percent (0 to below 100)")
    return number


def _line(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise _Bad(f"expected text ({what}), got {_show(value)}")
    if not value.strip() or value != value.strip() or not value.isprintable() or len(value) > limit:
        raise _Bad(f"{_show(value)} is not {what}: one printable line of 1-{limit} characters, no outer spaces")
    return value


def _pattern(regex: re.Pattern[str], what: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not regex.fullmatch(value):
            raise _Bad(f"{_show(value)} is not {what}")
        return value

    return check


def _source(value: Any) -> str:
    if value not in SOURCES:
        raise _Bad(f"{_show(value)} is not one of {', '.join(SOURCES)}")
    return value


def _date(value: Any) -> str:
    try:  # fromisoformat alone also reads week dates ("2026-W48-1")
        if isinstance(value, str) and _DATE_RE.fullmatch(value) and datetime.date.fromisoformat(value):
            return value
    except ValueError:
        pass
    raise _Bad(f"{_show(value)} is not an ISO date (YYYY-MM-DD)")


def _revision(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_REVISION:
        raise _Bad(f"{_show(value)} is not a revision (a whole number from 1 to {MAX_REVISION})")
    return value


def _schema(value: Any) -> int:
    if isinstance(value, bool) or value != SCHEMA:
        raise _Bad(f"{_show(value)} is not a schema this toolkit reads (only {SCHEMA})")
    return SCHEMA


CHECKS: dict[str, Callable[[Any], Any]] = {
    "schema": _schema,
    "gpu": _pattern(_GPU_RE, "a GKE accelerator type (lowercase letters, digits, '-') or 'cpu-twin'"),
    "variant": _pattern(_VARIANT_RE, "a model variant name (1-64 letters, digits, '_', '-', '.')"),
    "image_tag": lambda v: _line(v, "an image tag", MAX_TEXT["image_tag"]),
    "slo_latency_ms": _bounded("slo_latency_ms", _positive),
    "slo_percentile": _exact_decimal(_percentile),
    "max_failure_percent": _exact_decimal(_failure_percent),
    "max_rps_per_gpu": _bounded("max_rps_per_gpu", _positive),
    "batch": _bounded("batch", _optional_positive),
    "p50_ms": _bounded("p50_ms", _optional_positive),
    "p95_ms": _bounded("p95_ms", _optional_positive),
    "source": _source,
    "method": lambda v: _line(v, "a method line", MAX_TEXT["method"]),
    "measured_at": _date,
    "revision": _revision,
    "baseline_before": _bounded("baseline_before", _optional_positive),
    "baseline_after": _bounded("baseline_after", _optional_positive),
    "load_average": _bounded("load_average", lambda v: None if v is None else _number(v)),
    "cpu_steal_percent": _bounded("cpu_steal_percent", lambda v: None if v is None else _number(v)),
    "noisy": lambda v: None if v is None else _line(v, "why the run was marked noisy", MAX_TEXT["noisy"]),
}


def record_from_dict(data: Any, path: Path) -> CapacityRecord:
    """A record from a file's parsed JSON; CapacityError names the file and the key."""
    if not isinstance(data, dict):
        raise CapacityError(f"{escaped(path)}: expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(FILE_KEYS) - set(OPTIONAL_KEYS))
    if unknown:
        raise CapacityError(
            f"{escaped(path)}: {escaped(unknown[0])}: unknown key (a record has {', '.join(FILE_KEYS)}; it may have "
            f"{', '.join(OPTIONAL_KEYS)})"
        )
    missing = [key for key in FILE_KEYS if key not in data]
    if missing:
        raise CapacityError(f"{escaped(path)}: {missing[0]}: missing")
    values: dict[str, Any] = {}
    for key in (*FILE_KEYS, *OPTIONAL_KEYS):
        try:
            values[key] = CHECKS[key](data.get(key))
        except _Bad as bad:
            raise CapacityError(f"{escaped(path)}: {key}: {bad}") from None
    problem = _contradiction(values)
    if problem:
        raise CapacityError(f"{escaped(path)}: {problem}")
    values.pop("schema")
    return CapacityRecord(**values, path=path)


def _today() -> datetime.date:
    return datetime.datetime.now(datetime.UTC).date()


def _contradiction(values: dict[str, Any]) -> str:
    """The problem ("key: why") where the record contradicts itself or the clock, else "": p50 above p95, a latency
    percentile above the SLO latency the rate was searched at (a p95 of 120 ms cannot meet p95 <= 100 ms; a p95 SLO
    bounds p50 too), or a date after today (CLOCK_SKEW_DAYS of grace)."""
    p50, p95, slo, percentile = (values[k] for k in ("p50_ms", "p95_ms", "slo_latency_ms", "slo_percentile"))
    if p50 is not None and p95 is not None and p50 > p95:
        return f"p50_ms: {number(p50)} is above p95_ms {number(p95)}"
    for key, value, level in (("p95_ms", p95, 95), ("p50_ms", p50, 50)):
        if value is not None and percentile >= level and value > slo:
            return (
                f"{key}: {number(value)} is above the record's own SLO (p{number(percentile)} <= {number(slo)} ms, "
                "slo_latency_ms): a rate whose latency broke its SLO is no capacity at it"
            )
    latest = _today() + datetime.timedelta(days=CLOCK_SKEW_DAYS)
    if datetime.date.fromisoformat(values["measured_at"]) > latest:
        return (
            f"measured_at: {values['measured_at']} is in the future (today is {_today().isoformat()} UTC, "
            f"{CLOCK_SKEW_DAYS} day of clock skew allowed)"
        )
    return ""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Bad(f"{escaped(key)}: given twice")
        seen[key] = value
    return seen


def load_record(path: Path) -> CapacityRecord:
    """One record file, strictly, through the one bounded reader (triton_gke/bounded_files.py): a regular UTF-8 file of
    at most MAX_FILE_BYTES, JSON of bounded depth without NaN or Infinity, its numbers read as the decimals written
    (a percentage a float cannot hold exactly is refused, not rounded)."""
    path = Path(path)
    if not path.is_file():
        raise CapacityError(f"{escaped(path)}: not a record file ({_what_is(path)})")
    text = read_text_file(path, MAX_FILE_BYTES, "a capacity record file", CapacityError)
    try:
        data = parse_json(text, escaped(path), CapacityError, object_pairs_hook=_no_duplicate_keys, parse_float=Decimal)
    except _Bad as bad:
        raise CapacityError(f"{escaped(path)}: {bad}") from None
    return record_from_dict(data, path)


def _what_is(path: Path) -> str:
    """What a path that is no regular file is, for the refusal: "no such file" only where nothing is there."""
    try:
        mode = path.stat().st_mode  # follows links: a dangling one is "no such file"
    except FileNotFoundError:
        return "no such file"
    except OSError as err:
        return f"cannot read: {err.strerror or err}"
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    kind = next((name for test, name in kinds if test(mode)), "something else")
    return f"{kind}, not a regular file"


def record_files(records_dir: Path) -> list[Path]:
    """The folder's files named as records (RECORD_NAME; not its subfolders), sorted by name."""
    return sorted(p for p in Path(records_dir).iterdir() if RECORD_NAME.fullmatch(p.name) and not p.is_dir())


def load_records(records_dir: Path = RECORDS_DIR) -> list[CapacityRecord]:
    """Every file of the folder named as a record (record_files), sorted by file name; one key per file. Other files
    (hidden ones, a benchmark's results.json) are no records and are not read; a broken file with a record's name is
    refused."""
    records_dir = Path(records_dir)
    if not records_dir.is_dir():
        raise CapacityError(f"{escaped(records_dir)}: not a folder of capacity records")
    records = [load_record(path) for path in record_files(records_dir)]
    _check_unique(records)
    return records


def _check_unique(records: Iterable[CapacityRecord]) -> None:
    first: dict[tuple[str, str, str, float], Path] = {}
    for record in records:
        if record.key in first:
            gpu, variant, tag, slo = record.key
            raise CapacityError(
                f"{escaped(record.path)}: holds the same gpu {gpu}, variant {variant}, image_tag {tag!r} and "
                f"slo_latency_ms {slo!r} as {escaped(first[record.key])}; keep one file per record"
            )
        first[record.key] = record.path


def newest(records: Iterable[CapacityRecord]) -> CapacityRecord:
    """The most recently measured record (then the higher revision, then the file name: deterministic)."""
    return max(records, key=lambda r: (r.measured_at, r.revision, str(r.path)))


def number(value: float) -> str:
    """A record's number in as many digits as it has (99.9999999 stays so, not "100"); 100.0 as 100."""
    text = repr(float(value))
    return text.removesuffix(".0")


def slo_mismatch(record: CapacityRecord, percentile: float, max_failure_percent: float) -> str:
    """Why the record's rate is not one at this SLO ("" when it is): it must be searched at the same latency
    percentile (a p50 rate is far above a p95 one) and within at most the failures the SLO allows (a rate that let
    99 % of requests fail serves nothing)."""
    if _decimal(record.slo_percentile) != _decimal(percentile):
        return f"it is for p{number(record.slo_percentile)}; the stack's SLO is p{number(percentile)}"
    if _decimal(record.max_failure_percent) > _decimal(max_failure_percent):
        return (
            f"it allows {number(record.max_failure_percent)} % failures; the stack's SLO allows "
            f"{number(max_failure_percent)} % (sloMaxFailurePercent)"
        )
    return ""


def _decimal(value: float) -> Fraction:
    return Fraction(repr(float(value)))  # the decimal a file shows (0.95 x 100 = 95 exactly, as written)


def percent_of(ratio: float) -> float:
    """A ratio as the percentage it states, without binary round-off: 0.07 -> 7.0 (100 x 0.07 is 7.000000000000001
    in floats, which a stack allowing 7 % would refuse), 0.011000000000000001 (1.1 / 100) -> 1.1. The ratio's
    decimal as written, times 100, to PERCENT_DIGITS significant digits."""
    with localcontext(Context(prec=PERCENT_DIGITS)):
        return float(+(Decimal(repr(float(ratio))) * 100))


def image_mismatch(record: CapacityRecord, image_tag: str | None) -> str:
    """The empty string when the record was measured with `image_tag` (or none is asked), else the mismatch in
    words, for the caller to show beside the figure it sizes from."""
    if image_tag is None or record.image_tag == image_tag:
        return ""
    return f"measured with image {escaped(record.image_tag)}, not the stack's {escaped(image_tag)}"


def find_record(
    gpu: str,
    variant: str,
    slo_latency_ms: float,
    image_tag: str | None = None,
    records_dir: Path = RECORDS_DIR,
    slo: tuple[float, float] | None = None,
) -> CapacityRecord:
    """The record for this GPU, variant and SLO latency: the one of `image_tag` if there is one, else the newest
    of another tag (a record measured with another image is the best estimate there is; image_mismatch(record,
    image_tag) names the difference, and the stack sizing shows it beside the record).

    slo: (latency percentile, failure percent) the record must match (slo_mismatch); records that do not are
    skipped, and the NoRecordError then says which and why. A broken record file of the folder is a CapacityError.
    """
    candidates = [r for r in load_records(records_dir) if r.slo_key == (gpu, variant, float(slo_latency_ms))]
    why_not = {r.path: slo_mismatch(r, *slo) if slo else "" for r in candidates}
    matches = [r for r in candidates if not why_not[r.path]]
    exact = [r for r in matches if r.image_tag == image_tag]
    if exact:
        return exact[0]
    if matches:
        return newest(matches)
    notes = "".join(f" ({escaped(path.name)} skipped: {why})" for path, why in why_not.items() if why)
    raise NoRecordError(
        f"no capacity record for gpu {gpu}, variant {variant} at an SLO of {number(float(slo_latency_ms))} ms in "
        f"{escaped(records_dir)}{notes}; measure one with "
        f"`{hint_command('make bench ARGS=--record', f'{CONSOLE_SCRIPT} bench --record')}` or add a record file"
    )


# --- writing --------------------------------------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-.")[:60].strip("-.") or "x"  # well within 255 bytes


def record_file_name(gpu: str, variant: str, image_tag: str, slo_latency_ms: float) -> str:
    """The file a new record of this key gets (an existing one keeps its file)."""
    return f"{gpu}__{variant}__{_slug(image_tag)}__slo-{float(slo_latency_ms):g}ms.json"


def revised(records: Sequence[CapacityRecord], against: Path = RECORDS_DIR) -> list[CapacityRecord]:
    """The records with the revision they get in `against`: one more than the record of the same key there, else 1.
    Their paths are left as they are."""
    existing = {r.key: r for r in load_records(against)} if Path(against).is_dir() else {}
    return [replace(r, revision=existing[r.key].revision + 1 if r.key in existing else 1) for r in records]


_held = threading.local()  # the folders this thread holds locked (records_lock is re-entrant within a thread)


@contextlib.contextmanager
def records_lock(records_dir: Path) -> Iterator[None]:
    """Hold the records folder exclusively: an update reads the folder (revisions, taken file names) and writes it under
    one lock, so two `bench.reports.record --record` runs at once both land (one after the other: the second sees the
    first's file and raises its revision) instead of one overwriting the other. flock(2) on the folder itself
    (https://man7.org/linux/man-pages/man2/flock.2.html): no lock file is left among the records, and the lock goes with
    the process that held it. Creates the folder. Re-entrant within a thread."""
    folder = Path(records_dir)
    folder.mkdir(parents=True, exist_ok=True)
    key = os.path.realpath(folder)
    held: set[str] = _held.__dict__.setdefault("folders", set())
    if key in held:
        yield
        return
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def update_records(records: Sequence[CapacityRecord], records_dir: Path = RECORDS_DIR) -> list[CapacityRecord]:
    """revised() and write_records() under one records_lock: each record gets one more than the revision of its key
    in the folder at the moment it is written, so concurrent updates of one key all count."""
    with records_lock(records_dir):
        return write_records(revised(records, records_dir), records_dir)


def write_records(records: Sequence[CapacityRecord], records_dir: Path = RECORDS_DIR) -> list[CapacityRecord]:
    """Write the records into the folder: a key already there is overwritten in its own file, a new key gets a new
    file. Everything is checked before the first file is written (nothing half-written on bad input); each file is
    replaced atomically; the folder is read and written under records_lock (a concurrent writer's new file is seen,
    never overwritten). Returns the records as written (with their paths)."""
    records_dir = Path(records_dir)
    _check_unique(records)
    for record in records:
        record_from_dict(record.to_dict(), record.path)  # the same checks as on reading, before the folder is made
    with records_lock(records_dir):
        return _write_records(records, records_dir)


def _write_records(records: Sequence[CapacityRecord], records_dir: Path) -> list[CapacityRecord]:
    present = load_records(records_dir) if records_dir.is_dir() else []
    by_key = {r.key: r.path for r in present}
    taken = {r.path.name for r in present}
    planned: list[CapacityRecord] = []
    for record in records:
        target = by_key.get(record.key)
        if target is None:
            target = _free_name(records_dir, record_file_name(*record.key), taken)
            taken.add(target.name)
        planned.append(replace(record, path=target))
    records_dir.mkdir(parents=True, exist_ok=True)
    for record in planned:
        _write_atomically(record.path, record.to_json())
    return planned


def _free_name(records_dir: Path, name: str, taken: set[str]) -> Path:
    """`name`, or `name` with -2, -3... where two image tags give the same file name (their keys differ)."""
    stem, candidate, number = name.removesuffix(".json"), name, 2
    while candidate in taken or (records_dir / candidate).exists():
        candidate, number = f"{stem}-{number}.json", number + 1
    return records_dir / candidate


def _write_atomically(path: Path, text: str) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
