#!/usr/bin/env bash
# Fetches the dashboard's vendored libraries again from the npm registry
# (`npm pack`) into crates/server/dashboard/vendor/. Only needed to change a
# version: the files are checked in, and neither the build nor the server
# needs npm.
set -euo pipefail
cd "$(dirname "$0")/.."
UPLOT_VERSION=1.6.32
GRIDJS_VERSION=6.2.0
out=crates/server/dashboard/vendor
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "uplot@$UPLOT_VERSION" "gridjs@$GRIDJS_VERSION" >/dev/null)
mkdir -p "$work/uplot" "$work/gridjs" "$out"
tar xzf "$work/uplot-$UPLOT_VERSION.tgz" -C "$work/uplot"
tar xzf "$work/gridjs-$GRIDJS_VERSION.tgz" -C "$work/gridjs"
cp "$work/uplot/package/dist/uPlot.iife.min.js" "$out/uPlot.iife.min.js"
cp "$work/uplot/package/dist/uPlot.min.css" "$out/uPlot.min.css"
cp "$work/uplot/package/LICENSE" "$out/LICENSE.uplot"
cp "$work/gridjs/package/dist/gridjs.umd.js" "$out/gridjs.umd.js"
cp "$work/gridjs/package/dist/theme/mermaid.min.css" "$out/gridjs-mermaid.min.css"
cp "$work/gridjs/package/LICENSE" "$out/LICENSE.gridjs"
(cd "$out" && sha256sum uPlot.iife.min.js uPlot.min.css gridjs.umd.js gridjs-mermaid.min.css)
