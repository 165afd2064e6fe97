#!/usr/bin/env bash
# Build the Linux onedir app with PyInstaller and pack it as a tarball with a per-user installer.
#
# Usage: installers/build_linux.sh OUT_DIR
# Environment: PYTHON: the interpreter of an environment holding Captioneer's dependencies, the
# portable llama-cpp-python wheel (installers/build_llama_portable.sh) and PyInstaller (default python3).
# Writes OUT_DIR/captioneer-VERSION-linux-ARCH.tar.gz; the onedir is left in OUT_DIR/dist/captioneer.
set -euo pipefail

[[ $# -eq 1 && $1 != -* ]] || { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
out_dir=$(mkdir -p "$1" && cd "$1" && pwd)
repo_root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}

variants=$("$python" -c 'import llama_cpp, pathlib; print(len(list((pathlib.Path(llama_cpp.__file__).parent / "lib").glob("libggml-cpu-*.so"))))')
if [[ $variants == 0 ]]; then
    echo "warning: this llama-cpp-python has one CPU backend built for this machine; the bundle may not run" \
         "on older CPUs (install the wheel from installers/build_llama_portable.sh)" >&2
fi

"$python" -m PyInstaller --noconfirm --clean --log-level WARN \
    --distpath "$out_dir/dist" --workpath "$out_dir/work" "$repo_root/installers/captioneer.spec"

# PyInstaller's strip option corrupts auditwheel-patched wheel libraries (numpy's OpenBLAS); these are safe to
# strip: libpython, and CTranslate2's extension and library (68 MB -> 2 MB and 80 MB -> 74 MB; the Whisper tests
# pass against the stripped pair).
for lib in "$out_dir/dist/captioneer/_internal/"libpython3*.so* \
           "$out_dir/dist/captioneer/_internal/ctranslate2/"_ext*.so \
           "$out_dir/dist/captioneer/_internal/ctranslate2.libs/"libctranslate2*.so*; do
    if [[ -f $lib && ! -L $lib ]]; then strip --strip-unneeded "$lib"; fi
done

"$python" "$repo_root/installers/third_party.py" "$out_dir/dist/captioneer" > "$out_dir/dist/captioneer/THIRD_PARTY.md"

version=$("$python" -c 'import sys; sys.path.insert(0, sys.argv[1]); import inference; print(inference.__version__)' "$repo_root")
name=captioneer-$version-linux-$(uname -m)
stage=$out_dir/$name
rm -rf -- "$stage"
mkdir -p "$stage"
cp -a "$out_dir/dist/captioneer" "$stage/captioneer"
cp "$repo_root/installers/linux/install.sh" "$repo_root/installers/linux/captioneer.desktop" \
   "$repo_root/installers/captioneer.svg" "$stage/"
tar -C "$out_dir" -czf "$out_dir/$name.tar.gz" "$name"
rm -rf -- "$stage"
echo "built $out_dir/$name.tar.gz ($(du -sh "$out_dir/$name.tar.gz" | cut -f1); unpacked app $(du -sh "$out_dir/dist/captioneer" | cut -f1))"
