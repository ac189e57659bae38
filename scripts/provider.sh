#!/usr/bin/env bash
# Builds terraform-provider-libvirt (pinned) from the Go module proxy into a filesystem mirror,
# and makes sure a terraform binary exists. Output: $CACHE/terraform/{mirror,cli.tfrc,bin}.
# Cached by a hash of this recipe, so a second run returns at once.
set -euo pipefail
PROVIDER_VERSION=0.8.3
TERRAFORM_VERSION=1.11.4
CACHE=${VTB_CACHE:-/var/cache/vtb}
here=$(cd "$(dirname "$0")" && pwd)
key=$(sha256sum "$here/provider.sh" | cut -c1-16)
out=$CACHE/terraform/$key
mirror=$out/mirror
bin=$mirror/registry.terraform.io/dmacvicar/libvirt/$PROVIDER_VERSION/linux_amd64/terraform-provider-libvirt_v$PROVIDER_VERSION
mkdir -p "$CACHE/terraform"
ln -sfn "$key" "$CACHE/terraform/current"

GO_TOOLCHAIN=go1.23.1   # the provider's go.mod asks for Go 1.23
# `make setup` starts this step beside the host packages' (it needs none of them): what it does
# need it installs itself (host-packages.sh installs only what is missing, after apt's locks).
need_go() {
  command -v go >/dev/null || { [ -x /usr/local/go/bin/go ] && export PATH=$PATH:/usr/local/go/bin; }
  if command -v go >/dev/null; then
    "$here/host-packages.sh" --packages ca-certificates >/dev/null   # the module proxy is HTTPS
    return 0
  fi
  "$here/host-packages.sh" --packages ca-certificates curl unzip
  # No Go on this machine: fetch the official toolchain from the Go module proxy (it serves
  # golang.org/toolchain as a module zip), into the cache.
  local dir=$CACHE/go/$GO_TOOLCHAIN
  if [ ! -x "$dir/bin/go" ]; then
    echo "go: not found; fetching $GO_TOOLCHAIN from the Go module proxy"
    local zip
    zip=$(mktemp --suffix=.zip)
    curl -fsSL -o "$zip" "${GOPROXY_URL:-https://proxy.golang.org}/golang.org/toolchain/@v/v0.0.1-$GO_TOOLCHAIN.linux-amd64.zip" \
      || { echo "error: cannot fetch Go from the module proxy; install Go >= 1.23 and retry" >&2; exit 1; }
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp" && unzip -q "$zip" -d "$dir.tmp" && rm -f "$zip"
    mv "$dir.tmp/golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN.linux-amd64" "$dir" && rm -rf "$dir.tmp"
    chmod +x "$dir"/bin/* "$dir"/pkg/tool/*/* 2>/dev/null || true
  fi
  export PATH=$dir/bin:$PATH GOTOOLCHAIN=local
}

# Builds module@version from the module proxy. `go install` refuses modules with replace
# directives (the provider has some), so build from a writable copy of the module source.
build_module() { # module version package-subdir output
  local mod=$1 ver=$2 pkg=$3 dest=$4 work
  work=$(mktemp -d)
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' RETURN
  local dir
  dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$mod@$ver" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { echo "error: go mod download $mod@$ver gave no source dir" >&2; return 1; }
  cp -r "$dir" "$work/src" && chmod -R u+w "$work/src"
  (cd "$work/src" && CGO_ENABLED=0 go build -trimpath -o "$dest" "$pkg")
}

if [ -x "$bin" ]; then
  echo "terraform provider: cached ($bin)"
else
  need_go
  echo "terraform provider: building dmacvicar/libvirt v$PROVIDER_VERSION from the Go module proxy (about 2 min cold)"
  mkdir -p "$(dirname "$bin")"
  build_module github.com/dmacvicar/terraform-provider-libvirt "v$PROVIDER_VERSION" . "$bin.tmp"
  mv "$bin.tmp" "$bin"
fi

mkdir -p "$out/bin"
if command -v terraform >/dev/null; then
  ln -sfn "$(command -v terraform)" "$out/bin/terraform"
elif [ ! -x "$out/bin/terraform" ]; then
  need_go
  echo "terraform: not found; building v$TERRAFORM_VERSION from the Go module proxy"
  build_module github.com/hashicorp/terraform "v$TERRAFORM_VERSION" . "$out/bin/terraform.tmp"
  mv "$out/bin/terraform.tmp" "$out/bin/terraform"
fi

cat > "$out/cli.tfrc" <<CFG
provider_installation {
  filesystem_mirror {
    path    = "$mirror"
    include = ["registry.terraform.io/dmacvicar/libvirt"]
  }
  direct {
    exclude = ["registry.terraform.io/dmacvicar/libvirt"]
  }
}
CFG
echo "terraform: $(TF_CLI_CONFIG_FILE="$out/cli.tfrc" "$out/bin/terraform" version | head -1); provider mirror: $mirror"
