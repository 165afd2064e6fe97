#!/usr/bin/env bash
# Install Captioneer for the current user (no root needed), or remove it.
#
#   ./install.sh              install or upgrade from this unpacked tarball
#   ./install.sh --uninstall  remove the app, its menu entry and icon (models and settings stay)
#   ./install.sh --purge      also delete downloaded models, settings, caches and logs
#
# Files: the app in ~/.local/lib/captioneer, the command ~/.local/bin/captioneer, the menu entry
# in ~/.local/share/applications, the icon in ~/.local/share/icons. Models are downloaded to
# ~/.local/share/Captioneer/models (`captioneer models path`; CAPTIONEER_MODELS_DIR moves them).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
data_home=${XDG_DATA_HOME:-$HOME/.local/share}
app_dir=$HOME/.local/lib/captioneer
bin_link=$HOME/.local/bin/captioneer
desktop_file=$data_home/applications/captioneer.desktop
icon_file=$data_home/icons/hicolor/scalable/apps/captioneer.svg

refresh_menus() {
    command -v update-desktop-database >/dev/null && update-desktop-database -q "$data_home/applications" || true
    command -v gtk-update-icon-cache >/dev/null && gtk-update-icon-cache -q -t "$data_home/icons/hicolor" || true
}

uninstall() {
    rm -rf -- "$app_dir"
    [[ -L $bin_link ]] && rm -f -- "$bin_link"
    rm -f -- "$desktop_file" "$icon_file"
    refresh_menus
    echo "Captioneer removed."
}

purge_user_data() {
    # The app's own folders (platformdirs' user data/config/cache/log dirs for "Captioneer").
    local dirs=("$data_home/Captioneer" "${XDG_CONFIG_HOME:-$HOME/.config}/Captioneer"
                "${XDG_CACHE_HOME:-$HOME/.cache}/Captioneer" "${XDG_STATE_HOME:-$HOME/.local/state}/Captioneer")
    rm -rf -- "${dirs[@]}"
    echo "Deleted models, settings, caches and logs: ${dirs[*]}"
}

case ${1:-} in
    --uninstall) uninstall; echo "Models and settings were kept (./install.sh --purge deletes them)."; exit 0 ;;
    --purge) uninstall; purge_user_data; exit 0 ;;
    "") ;;
    *) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac

[[ -x $here/captioneer/captioneer ]] || { echo "error: $here/captioneer/captioneer is missing; run install.sh from the unpacked tarball" >&2; exit 1; }

# Copy next to the old version, then swap, so a failed copy leaves the old install working.
mkdir -p "$(dirname "$app_dir")" "$(dirname "$bin_link")" "$(dirname "$desktop_file")" "$(dirname "$icon_file")"
staging=$(mktemp -d "$app_dir.new.XXXXXX")
trap 'rm -rf -- "$staging"' EXIT
cp -a "$here/captioneer/." "$staging/"
rm -rf -- "$app_dir"
mv -- "$staging" "$app_dir"
trap - EXIT

ln -sfn "$app_dir/captioneer" "$bin_link"
sed "s|@BIN@|$app_dir/captioneer|g" "$here/captioneer.desktop" > "$desktop_file"
cp -- "$here/captioneer.svg" "$icon_file"
refresh_menus

echo "Captioneer installed in $app_dir"
echo "Start it from the applications menu, or run: captioneer"
case ":$PATH:" in *":$HOME/.local/bin:"*) ;; *) echo "note: add ~/.local/bin to PATH to run 'captioneer' from a terminal" ;; esac
