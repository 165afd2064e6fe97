#!/usr/bin/env bash
# Smoke-test a built onedir app (Linux): it runs outside the checkout and its virtual environment,
# loads ggml from inside itself, transcribes both bundled samples with the CLI, and the GUI captions
# a file into its autosaved session.
#
# Usage: installers/smoke_test_bundle.sh BUNDLE_DIR     (e.g. dist/captioneer)
# Needs a display for the GUI step, or QT_QPA_PLATFORM=offscreen (set by default when none is set).
set -euo pipefail

[[ $# -eq 1 && -x $1/captioneer ]] || { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
bundle=$(cd "$1" && pwd)
samples=$bundle/_internal/resources/samples
work=$(mktemp -d)
gui_pid=
cleanup() { [[ -n $gui_pid ]] && kill "$gui_pid" 2>/dev/null; rm -rf -- "$work"; }
trap cleanup EXIT
cd "$work"  # nothing may come from the current directory or the checkout
export CAPTIONEER_HOME=$work/home
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV LLAMA_CPP_LIB_PATH CAPTIONEER_MODEL_SPECS
if [[ -z ${DISPLAY:-} && -z ${WAYLAND_DISPLAY:-} ]]; then export QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen}; fi
fail() { echo "FAIL: $*" >&2; exit 1; }
normalise() { tr '[:upper:]' '[:lower:]' | tr -cd 'a-z0-9 \n' | tr -s ' '; }

version=$("$bundle/captioneer" --version 2>"$work/version.err")
echo "$version"
if grep -q "load_backend" "$work/version.err"; then
    fail "ggml's backend-loading chatter reached stderr: $(cat "$work/version.err")"
fi
grep -q "ggml CPU backend: .*($bundle/_internal/llama_cpp/lib)" <<<"$version" \
    || fail "ggml was not loaded from inside the bundle"

expected_texts=$(sed -n 's/.*"text": "\(.*\)".*/\1/p' "$samples/samples.json")
mapfile -t expected <<<"$expected_texts"
for i in 1 2; do
    start=$(date +%s.%N)
    got=$("$bundle/captioneer" transcribe "$samples/demo_sample_$i.wav" 2>"$work/cli.log" | normalise) \
        || { cat "$work/cli.log" >&2; fail "sample $i: the CLI failed"; }
    seconds=$(echo "$(date +%s.%N) - $start" | bc)
    [[ $got == *"$(normalise <<<"${expected[$((i - 1))]}")"* ]] \
        || fail "sample $i: expected '${expected[$((i - 1))]}', got '$got'"
    echo "ok: CLI sample $i in ${seconds}s: $got"
done

start=$(date +%s.%N)
"$bundle/captioneer" --input-file "$samples/demo_sample_1.wav" >"$work/gui.log" 2>&1 &
gui_pid=$!
want=$(normalise <<<"${expected[0]}" | cut -d' ' -f1-3)
started=
for _ in $(seq 600); do
    # The session file is created when the shown window starts captioning: a start-up time.
    if [[ -z $started ]] && compgen -G "$CAPTIONEER_HOME/data/sessions/*.jsonl" >/dev/null; then
        started=1
        echo "ok: the GUI started captioning $(echo "$(date +%s.%N) - $start" | bc) s after launch"
    fi
    if cat "$CAPTIONEER_HOME"/data/sessions/*.jsonl 2>/dev/null | grep '"speech_end"' | normalise | grep -q "$want"; then
        echo "ok: the GUI captioned the file into its autosaved session"
        exit 0
    fi
    kill -0 "$gui_pid" 2>/dev/null || { cat "$work/gui.log" >&2; fail "the GUI exited early"; }
    sleep 0.1
done
cat "$work/gui.log" >&2
fail "no '$want' in the autosaved session after 60 s"
